"""Bash completion's candidates (opsbot_cli/complete.py), from the parser itself: the
commands, each command's options, an option's choices, and nothing but silence when the
host cannot be asked (no executor socket here). The plan ids and the units in scope on a
real host: tests/integration/test_console_man_and_completion.py."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsbot_cli.complete import candidates
from opsbot_cli.main import COMMANDS, build_parser

REPO = Path(__file__).resolve().parents[3]


def test_before_a_command_it_offers_the_commands_of_the_parser() -> None:
    """``opsbot <TAB>`` offers every command in --help's order, ``opsbot sh<TAB>`` show,
    ``opsbot -<TAB>`` the top-level options."""
    assert candidates([""]) == [c.name for c in COMMANDS]
    assert candidates(["sh"]) == ["show"]
    assert candidates(["--v"]) == ["--version"]


@pytest.mark.parametrize("verb", [c.name for c in COMMANDS])
def test_after_a_command_it_offers_exactly_that_command_s_options(verb: str) -> None:
    """``opsbot VERB -<TAB>`` offers the options ``opsbot VERB --help`` lists."""
    full = build_parser()
    action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    own = action.choices[verb]
    options = {o for a in own._actions for o in a.option_strings}
    assert set(candidates([verb, "-"])) == options


def test_a_free_value_and_a_finished_command_line_offer_nothing() -> None:
    """After an option that takes a free value (``--symptom``), or after the last
    positional argument, nothing is offered (not the commands again)."""
    assert candidates(["diagnose", "--symptom", ""]) == []
    assert candidates(["watch", "app.service", ""]) == []
    assert candidates(["plans", ""]) == []


def test_after_help_it_offers_the_commands_then_the_named_one_s_verbs() -> None:
    """``opsbot help <TAB>`` offers every command, ``opsbot help po<TAB>`` the two that
    start so, ``opsbot help policy <TAB>`` policy's verbs, and nothing follows a verb, a
    command without verbs or a name opsbot does not know."""
    assert candidates(["help", ""]) == [c.name for c in COMMANDS]
    assert candidates(["help", "po"]) == ["policy", "polkit-rule"]
    assert candidates(["help", "policy", ""]) == ["check", "test", "report", "pause", "resume"]
    assert candidates(["help", "approvers", "a"]) == ["add"]
    assert candidates(["help", "policy", "test", ""]) == []
    assert candidates(["help", "plans", ""]) == []
    assert candidates(["help", "no-such-verb", ""]) == []


def test_plan_ids_without_an_executor_offer_nothing_silently(tmp_path: Path) -> None:
    """With no executor listening, ``opsbot show <TAB>`` prints nothing at all (no
    error line, no traceback on the operator's prompt) and exits 0."""
    env = {
        **os.environ,
        "OPSBOT_SOCKET": str(tmp_path / "no-executor.sock"),
        "OPSBOT_CONFIG": str(tmp_path / "no-config.toml"),
    }
    for words in (["show", ""], ["diagnose", ""], ["approve", "--ttl", ""]):
        done = subprocess.run(
            [sys.executable, "-I", "-m", "opsbot_cli.complete", *words],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), words
