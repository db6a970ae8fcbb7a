"""Bash completion's other half: what may come next on an ``opsbot`` command line.

packaging/opsbot.bash-completion runs ``python -I -m opsbot_cli.complete WORD...`` with
the words typed after ``opsbot`` up to the cursor (the last one, maybe empty, is the word
being completed) and offers the lines this prints. Names come from the parser itself
(:func:`opsbot_cli.main.build_parser`, which imports only the named command's module), so
completion never drifts from ``--help``:

* before a command: the commands, or after a ``-`` the top-level options;
* after one: its options after a ``-``; an option's choices after an option that takes
  a value (nothing for a free value); for a positional argument its choices, the plan ids
  for an ``ID`` (dest ``plan_id``: the executor's list, what ``opsbot plans`` reads) and
  the units of the diagnosis scope for a ``UNIT`` (dest ``unit``: diagnose_svc/scope.py,
  run as ``python -m diagnose_svc.scope_units``, since the console may not import it);
* after ``help``: the commands, then the named command's sub-commands or verbs.

Read-only, bounded by :data:`DEADLINE` seconds, and silent: whatever goes wrong (no socket,
not an operator, a bad config, a hung daemon) offers nothing and exits 0, never a
traceback (``OPSBOT_DEBUG=1`` shows one).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from opsbot_cli.main import build_parser
from shared_io import log as logsetup
from shared_io.paths import Paths
from shared_io.run import run

#: At most this long for one completion (a daemon that does not answer offers nothing).
DEADLINE = 5
#: Positional arguments completed from the host, by their dest in the parser.
PLAN_ID = "plan_id"
UNIT = "unit"
#: ``opsbot help`` completes the commands, then the named one's verbs (opsbot_cli/help.py).
HELP = "help"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
    ]


def _takes_value(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    """The option ``word`` names if it takes a value in the next word, else None."""
    if "=" in word:
        return None
    action = parser._option_string_actions.get(word)
    return action if action is not None and action.nargs != 0 else None


def _positional(parser: argparse.ArgumentParser, given: Sequence[str]) -> argparse.Action | None:
    """The positional argument the next word fills, after the words ``given``."""
    count, values_follow, after_dashes = 0, False, False
    for word in given:
        if values_follow:
            values_follow = False
        elif after_dashes or not word.startswith("-") or word == "-":
            count += 1
        elif word == "--":
            after_dashes = True
        else:
            values_follow = _takes_value(parser, word) is not None
    positionals = [a for a in parser._actions if not a.option_strings]
    return positionals[count] if count < len(positionals) else None


def plan_ids() -> list[str]:
    """The ids of the executor's plans, newest first (as ``opsbot plans`` lists them)."""
    from opsbot_cli.clients import request
    from shared_schema import ListPlans, PlanList

    reply = request(Paths.from_env().executor_socket, ListPlans())
    return [p.plan_id for p in reply.plans] if isinstance(reply, PlanList) else []


def scope_units(prefix: str) -> list[str]:
    """The units of the diagnosis scope that start with ``prefix``."""
    argv = [sys.executable, "-I", "-m", "diagnose_svc.scope_units"]
    argv += ["--config", str(Paths.from_env().config), "--", prefix]
    result = run(argv, timeout=DEADLINE - 1)
    return result.stdout.split() if result.ok else []


def _values(action: argparse.Action, current: str) -> list[str]:
    if action.choices is not None:
        return [str(choice) for choice in action.choices]
    if action.dest == PLAN_ID:
        return plan_ids()
    if action.dest == UNIT:
        return scope_units(current)
    return []


def candidates(words: Sequence[str]) -> list[str]:
    """What may replace the last of ``words`` (the words after ``opsbot``)."""
    *before, current = list(words) or [""]
    parser = build_parser(before)
    commands = _subparsers(parser)
    command = next((word for word in before if word in commands), None)
    if command is None:
        found = _options(parser) if current.startswith("-") else list(commands)
    else:
        own = commands[command]
        given = before[before.index(command) + 1 :]
        value_of = _takes_value(own, given[-1]) if given else None
        if command == HELP and not current.startswith("-"):
            from opsbot_cli.help import next_words

            found = next_words([word for word in given if not word.startswith("-")])
        elif value_of is not None:
            found = _values(value_of, current)
        elif current.startswith("-"):
            found = _options(own)
        else:
            positional = _positional(own, given)
            found = _values(positional, current) if positional is not None else []
    return [word for word in found if word.startswith(current)]


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGALRM, lambda *_: os._exit(0))
    signal.alarm(DEADLINE)
    logsetup.configure("opsbot", journal=False)  # shared_io.run's lines go to stderr
    try:
        found = candidates(words)
    except Exception:
        if os.environ.get("OPSBOT_DEBUG"):
            raise
        return 0  # completion offers nothing rather than a traceback on the prompt
    for word in found:
        print(word)
    return 0


if __name__ == "__main__":
    sys.exit(main())
