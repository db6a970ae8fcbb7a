"""``opsbot --help`` and every ``opsbot VERB --help`` read the same whether the parser is
built whole or, as ``opsbot`` does, with only the named command's module imported; and
a command imports only what it needs (issue 13, item 11: console start-up); ``opsbot help
VERB`` prints what ``opsbot VERB --help`` does (issue 41). No timing
here: bench/console_startup.py measures; these tests check what makes it fast."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsbot_cli.main import COMMANDS, build_parser, main
from shared_io.exit_codes import USAGE

REPO = Path(__file__).resolve().parents[3]
VERBS = [c.name for c in COMMANDS]


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse wraps at the terminal's width: the same for every parser compared."""
    monkeypatch.setenv("COLUMNS", "100")


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_table_names_every_command_the_modules_register_in_order() -> None:
    """main.py's table of commands (name, module, --help line) is what the command
    modules themselves register, in the same order: the table cannot drift from them."""
    full = build_parser()
    action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert [c.dest for c in action._choices_actions] == VERBS
    assert {c.dest: c.help for c in action._choices_actions} == {
        c.name: c.summary for c in COMMANDS
    }


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"], ["no-such-verb"]])
def test_opsbot_help_is_the_same_without_importing_any_command(argv: list[str]) -> None:
    """``opsbot --help`` (and the usage error of ``opsbot`` alone or a wrong verb) lists
    every command with its line, exactly as the whole parser does."""
    assert build_parser(argv).format_help() == build_parser().format_help()
    assert build_parser(argv).format_usage() == build_parser().format_usage()


@pytest.mark.parametrize("verb", VERBS)
def test_each_verb_s_help_is_the_same_when_only_its_module_is_loaded(verb: str) -> None:
    """``opsbot VERB --help`` is the full text of the verb's own parser (arguments,
    description, examples), and the top-level --help is unchanged beside it."""
    full = build_parser()
    lazy = build_parser([verb, "--help"])
    assert subparsers(lazy)[verb].format_help() == subparsers(full)[verb].format_help()
    assert lazy.format_help() == full.format_help()


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help_and_its_examples_render(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot VERB --help`` exits 0 and prints its usage, its one-line summary, each
    argument's help and the examples (epilog), if the verb has them."""
    own = subparsers(build_parser())[verb]
    with pytest.raises(SystemExit) as exited:
        main([verb, "--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    flat = " ".join(printed.split())
    assert printed.startswith(f"usage: opsbot {verb}")
    summary = next(c.summary for c in COMMANDS if c.name == verb)
    assert summary and " ".join(summary.split()) in flat
    for action in own._actions:
        if action.help and action.help != argparse.SUPPRESS:
            assert " ".join((action.help % {"prog": own.prog}).split()) in flat
    if own.epilog:
        assert " ".join(own.epilog.split()) in flat


def loaded_after(argv: list[str]) -> set[str]:
    """The modules a fresh ``opsbot ARGV`` has imported when it exits (no daemon: the
    executor's socket is a path where none listens)."""
    probe = (
        "import json, sys\n"
        "from opsbot_cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OPSBOT_SOCKET": "/nonexistent/opsbot/executor.sock",
        "OPSBOT_NO_JOURNAL": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return set(modules)


def test_opsbot_help_imports_no_command_module_and_no_pydantic() -> None:
    """``opsbot --help`` is argparse alone: no command module, no executor_svc, no
    pydantic models, no structlog."""
    loaded = loaded_after(["--help"])
    commands = {c.module for c in COMMANDS}
    assert not loaded & commands
    for heavy in ("executor_svc", "diagnose_svc", "shared_schema", "pydantic", "structlog"):
        assert heavy not in loaded


@pytest.mark.parametrize(
    ("argv", "needed"),
    [
        (["plans", "--json"], "opsbot_cli.plans"),
        (["show", "20261129-213500-1a2b3c4d"], "opsbot_cli.show"),
        (["show", "--help"], "opsbot_cli.show"),
    ],
)
def test_a_read_only_verb_imports_its_module_and_not_the_executor(
    argv: list[str], needed: str
) -> None:
    """``opsbot plans`` and ``opsbot show`` import their own module, none of the other
    commands' and nothing of executor_svc (the store, the gate, the apply) or structlog."""
    loaded = loaded_after(argv)
    assert needed in loaded
    assert not loaded & ({c.module for c in COMMANDS} - {needed})
    assert not {m for m in loaded if m.split(".")[0] in ("executor_svc", "diagnose_svc")}
    assert "structlog" not in loaded


def test_no_module_imports_structlog_inside_a_function() -> None:
    """main.py configures logging only when the command's modules imported structlog;
    that holds while nobody imports it (or shared_io.log) lazily inside a function, but
    for shared_io.log's ``get_logger``, which configures logging where nothing did."""
    late = []
    for package in ("opsbot_cli", "executor_svc", "shared_io", "shared_schema"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path == REPO / "opsbot_cli" / "main.py":
                continue  # the one that configures it, after the command's imports
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for inner in ast.walk(node):
                    if not isinstance(inner, ast.Import | ast.ImportFrom):
                        continue
                    names = [a.name for a in inner.names]
                    if isinstance(inner, ast.ImportFrom):
                        if inner.module == "shared_io.log" and names == ["get_logger"]:
                            continue
                        names = [f"{inner.module}.{n}" for n in names] + [str(inner.module)]
                    if any(n.startswith(("structlog", "shared_io.log")) for n in names):
                        late.append(f"{path.relative_to(REPO)}:{inner.lineno}")
    assert late == []


def printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``opsbot ARGV``'s exit status, stdout and stderr (--help exits through SystemExit)."""
    try:
        status: int | str | None = main(argv)
    except SystemExit as exited:
        status = exited.code
    out, err = capsys.readouterr()
    return int(status or 0), out, err


def verbs_of(parser: argparse.ArgumentParser) -> list[str]:
    """The verbs a command's first argument takes (policy's check, test, ...), if any."""
    first = next((a for a in parser._actions if not a.option_strings), None)
    return [str(c) for c in first.choices] if first is not None and first.choices else []


@pytest.mark.parametrize("verb", VERBS)
def test_opsbot_help_verb_prints_what_verb_help_prints(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot help VERB`` prints exactly ``opsbot VERB --help`` and exits 0; so does
    ``opsbot help VERB SUBVERB`` for each of the verb's own verbs (policy test)."""
    status, want, _ = printed([verb, "--help"], capsys)
    assert status == 0 and want.startswith(f"usage: opsbot {verb}")
    assert printed(["help", verb], capsys) == (0, want, "")
    for subverb in verbs_of(subparsers(build_parser())[verb]):
        assert printed(["help", verb, subverb], capsys) == (0, want, "")


def test_opsbot_help_json_is_the_page_and_the_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    """``opsbot help policy --json`` gives a script the same text and policy's verbs."""
    _, want, _ = printed(["policy", "--help"], capsys)
    status, out, _ = printed(["help", "policy", "--json"], capsys)
    assert status == 0
    assert json.loads(out) == {
        "command": "opsbot policy",
        "verbs": ["check", "test", "report", "pause", "resume"],
        "help": want,
    }


def test_opsbot_help_alone_prints_the_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``opsbot help`` is ``opsbot --help``: every command and the exit statuses."""
    status, want, _ = printed(["--help"], capsys)
    assert printed(["help"], capsys) == (status, want, "") == (0, want, "")


@pytest.mark.parametrize(
    ("argv", "error", "hint"),
    [
        (["aprove"], "`opsbot` has no command 'aprove'", "did you mean approve?"),
        (["no-such-verb"], "`opsbot` has no command 'no-such-verb'", "`opsbot help` lists them"),
        (["policy", "tset"], "`opsbot policy` has no verb 'tset'", "did you mean test?"),
        (["plans", "x"], "`opsbot plans` has no verb 'x'", "`opsbot help plans` shows its page"),
    ],
)
def test_opsbot_help_of_an_unknown_name_is_a_usage_error_naming_it(
    argv: list[str], error: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name opsbot does not know ends ``opsbot help`` with the usage status (2, as the
    exit-status table says) and one error naming it, then the nearest name or where the
    names are listed; nothing on stdout."""
    status, out, err = printed(["help", *argv], capsys)
    assert (status, out) == (USAGE, "")
    assert err.splitlines() == [f"opsbot: error: {error}", f"opsbot: hint: {hint}"]
