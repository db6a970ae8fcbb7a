"""What install.sh leaves for the operator's shell (issue 13, item 10): ``man opsbot``
shows opsbot(8), generated from the parser, and bash completion, sourced as the
bash-completion package would (or by hand where it is not installed), completes the
commands, a waiting plan's id and the units in the diagnosis scope, and stays silent for
a user who may not list plans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from opsbot_cli.main import COMMANDS
from testbed.container import BootedSystemd
from testbed.host import opsbot as cli, restart_plan, submit

COMPLETION = "/usr/share/bash-completion/completions/opsbot"
#: What bash does on TAB: set COMP_WORDS/COMP_CWORD, call the function, read COMPREPLY.
#: The words after ``opsbot`` are the script's arguments; the last is the one completed.
TAB = f"""
source {COMPLETION}
COMP_WORDS=(opsbot "$@")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
_opsbot
printf '%s\\n' "${{COMPREPLY[@]}}"
"""


def tab(ct: BootedSystemd, *words: str, user: str = "olivia") -> list[str]:
    """What bash offers for ``opsbot WORDS`` as ``user``; nothing on stderr, ever."""
    done = ct.run(["bash", "-c", TAB, "tab", *words], user=user, timeout=60)
    assert done.stderr == "", done.stderr
    return [line for line in done.stdout.splitlines() if line]


@pytest.fixture
def waiting_plan(opsbot: BootedSystemd) -> Iterator[str]:
    """A plan the diagnose user proposed and nobody approved; rejected afterwards, so
    the other stories see no plan of this test's waiting."""
    reply = submit(opsbot, restart_plan("demo-db.service", goal="a plan to complete the id of"))
    assert reply["verdict"] == "ACCEPT", reply
    yield str(reply["plan_id"])
    cli(opsbot, "reject", reply["plan_id"], "--reason", "completion test", check=False)


def test_man_opsbot_shows_the_page_with_every_command(opsbot: BootedSystemd) -> None:
    """``man opsbot`` works for an operator right after install.sh: opsbot(8) with every
    command and the exit-status table."""
    page = opsbot.run(
        ["man", "-P", "cat", "opsbot"], user="olivia", env={"LANG": "C", "MANWIDTH": "100"}
    ).stdout
    assert "OPSBOT(8)" in page
    missing = [c.name for c in COMMANDS if f"opsbot {c.name}" not in page]
    assert missing == []
    assert "exit status:" in page and "78  invalid configuration" in page


def test_completion_offers_commands_and_their_options(opsbot: BootedSystemd) -> None:
    """``opsbot sh<TAB>`` is ``show``; ``opsbot show --<TAB>`` offers its options."""
    assert tab(opsbot, "sh") == ["show"]
    assert {"--json", "--argv"} <= set(tab(opsbot, "show", "--"))


def test_completion_offers_the_id_of_a_waiting_plan(
    opsbot: BootedSystemd, waiting_plan: str
) -> None:
    """``opsbot show <TAB>`` offers the waiting plan's id (from the executor, as
    ``opsbot plans`` lists it), and so does a prefix of it after ``approve``."""
    assert waiting_plan in tab(opsbot, "show", "")
    assert waiting_plan in tab(opsbot, "approve", waiting_plan[:16], user="root")


def test_completion_offers_the_units_in_scope_only(opsbot: BootedSystemd) -> None:
    """``opsbot diagnose <TAB>`` offers the units opsbot may act on or diagnose, not a
    unit outside the scope (demo-other.service is on the host but in no config key)."""
    offered = tab(opsbot, "diagnose", "")
    assert "demo-web.service" in offered and "demo-evil.service" in offered
    assert "demo-other.service" not in offered
    assert tab(opsbot, "diagnose", "demo-w") == ["demo-web.service"]


def test_completion_is_silent_for_a_user_who_may_not_list_plans(
    opsbot: BootedSystemd, waiting_plan: str
) -> None:
    """mallory (no opsbot group) cannot reach the executor: ``opsbot show <TAB>``
    offers nothing, prints nothing on stderr, and the commands still complete."""
    assert tab(opsbot, "show", "", user="mallory") == []
    assert tab(opsbot, "pl", user="mallory") == ["plans"]
