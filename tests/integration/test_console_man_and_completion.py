"""What install.sh leaves for the operator's shell (issue 13, item 10): ``man opsbot``
shows opsbot(8), generated from the parser, with everything each ``opsbot VERB --help``
prints in that verb's sections, and ``man -k opsbot`` finds it; ``opsbot help VERB``
prints the verb's help (issue 41); bash completion, sourced as the bash-completion
package would (or by hand where it is not installed), completes the commands, their
verbs after ``help``, a waiting plan's id and the units in the diagnosis scope, and
stays silent for a user who may not list plans."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterator

import pytest

from opsbot_cli.main import COMMANDS, build_parser
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


#: ``man`` as an operator reads it, without hyphenation or justification (which would
#: split or space out words); wide, so that few lines wrap.
MAN = ["man", "--nh", "--nj", "-P", "cat"]
MAN_ENV = {"LANG": "C.UTF-8", "MANWIDTH": "200"}


def flat(text: str) -> str:
    """``text`` with every run of blanks and line breaks as one space."""
    return " ".join(text.split())


def sections(page: str) -> dict[str, str]:
    """The rendered page, flattened, cut at its headings (the lines that start at column
    0): each command's sections (COMMAND, OPTIONS, COMMENTS 'opsbot VERB') under its name
    ``opsbot VERB``, every other one (NAME, DESCRIPTION, the list of commands, the
    top-level OPTIONS and COMMENTS) under ``opsbot``."""
    cut: dict[str, list[str]] = defaultdict(list)
    name = "opsbot"
    for line in page.splitlines():
        if line[:1].strip():
            named = re.search(r" '(opsbot [^']+)'$", line)
            name = named.group(1) if named else "opsbot"
        cut[name].append(line)
    return {name: flat("\n".join(lines)) for name, lines in cut.items()}


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every command under it, at any depth."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # an alias once
                yield from parsers(child)


def what_help_says(parser: argparse.ArgumentParser) -> list[str]:
    """What ``PROG --help`` prints, in the pieces its man section must hold: the usage,
    each paragraph of the description and of the epilog (verbs, exit statuses,
    examples), and each argument's names and help; not ``-h, --help`` itself."""
    formatter = parser._get_formatter()
    pieces = [parser.format_usage().removeprefix("usage: ")]
    for text in (parser.description, parser.epilog):
        pieces += re.split(r"\n\s*\n", text or "")
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            pieces += [f"{sub.dest} {sub.help}" for sub in action._choices_actions]
            continue
        pieces += action.option_strings or formatter._metavar_formatter(action, action.dest)(1)
        if action.help:
            pieces.append(formatter._expand_help(action))
    return [flat(piece) for piece in pieces if piece.strip()]


def missing_from_page(page: str) -> dict[str, list[str]]:
    """Per command, what its --help says that its sections of the rendered ``page`` do
    not (the top-level --help against the page's other sections)."""
    cut = sections(page)
    missing = {}
    for parser in parsers(build_parser()):
        printed = flat(parser.format_help())
        pieces = what_help_says(parser)
        assert all(piece in printed for piece in pieces), parser.prog  # the checker's own
        lacking = [piece for piece in pieces if piece not in cut.get(parser.prog, "")]
        if lacking:
            missing[parser.prog] = lacking
    return missing


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


def test_man_opsbot_holds_everything_each_verb_s_help_prints(opsbot: BootedSystemd) -> None:
    """Every command's --help (usage, description, every argument and option, its verbs,
    exit statuses and examples) is in that command's sections of ``man opsbot`` as an
    operator reads it; nothing --help prints is missing from the page."""
    page = opsbot.run([*MAN, "opsbot"], user="olivia", env=MAN_ENV).stdout
    assert missing_from_page(page) == {}
    cut = re.sub(r"(?m)^COMMENTS 'opsbot policy'\n(.*\n)+?(?=\S)", "", page)
    assert missing_from_page(cut).keys() == {"opsbot policy"}  # the checker sees a cut


def test_man_k_finds_opsbot(opsbot: BootedSystemd) -> None:
    """``man -k opsbot`` (apropos) finds opsbot(8) by its NAME line right after
    install.sh, for an operator, and ``whatis`` says what it is."""
    found = opsbot.run(["man", "-k", "opsbot"], user="olivia", env=MAN_ENV).stdout
    assert re.search(r"^opsbot \(8\)\s+- review, approve and apply fixes", found, re.M), found
    assert "opsbot (8)" in opsbot.run(["whatis", "opsbot"], user="olivia").stdout


def test_opsbot_help_verb_prints_the_verb_s_help(opsbot: BootedSystemd) -> None:
    """``opsbot help policy`` (and ``opsbot help policy test``) print what ``opsbot policy
    --help`` prints; an unknown command is the usage status, 2, with one error line."""
    want = cli(opsbot, "policy", "--help", user="olivia").stdout
    assert "exit status:" in want
    assert cli(opsbot, "help", "policy", user="olivia").stdout == want
    assert cli(opsbot, "help", "policy", "test", user="olivia").stdout == want
    unknown = cli(opsbot, "help", "polciy", user="olivia", check=False)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr.startswith("opsbot: error: `opsbot` has no command 'polciy'\n")


def test_completion_offers_commands_and_their_options(opsbot: BootedSystemd) -> None:
    """``opsbot sh<TAB>`` is ``show``; ``opsbot show --<TAB>`` offers its options."""
    assert tab(opsbot, "sh") == ["show"]
    assert {"--json", "--argv"} <= set(tab(opsbot, "show", "--"))


def test_completion_offers_the_verbs_after_help(opsbot: BootedSystemd) -> None:
    """``opsbot help po<TAB>`` offers policy and polkit-rule, ``opsbot help policy
    <TAB>`` policy's verbs."""
    assert tab(opsbot, "help", "po") == ["policy", "polkit-rule"]
    assert tab(opsbot, "help", "policy", "") == ["check", "test", "report", "pause", "resume"]


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
