"""``opsbot help [VERB [SUBVERB]]``: a command's page, the text ``opsbot VERB --help``
prints (and ``man opsbot`` holds: opsbot_cli/manpage.py); ``opsbot help`` alone is
``opsbot --help``. A SUBVERB is a sub-command of VERB (its own page) or one of the verbs
VERB takes (``policy test``, ``approvers add``: VERB's page, which documents them). A name
opsbot does not know is a usage error (exit 2) naming the nearest it does. Bash
completion offers the same names (:func:`next_words`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from opsbot_cli.errors import UsageError
from opsbot_cli.say import nearest
from shared_io.paths import Paths

__all__ = ["SUMMARY", "add_parser", "next_words", "page", "run"]

SUMMARY = "print a command's help, the same as `opsbot COMMAND --help`"
EPILOG = """\
examples:
  opsbot help                  the commands (`opsbot --help`)
  opsbot help policy           policy's verbs, exit statuses and examples
  opsbot help policy test      the same page: test is one of policy's verbs

exit status: 0 printed; 2 no such command or verb (the error names the nearest)
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "help",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("verb", metavar="VERB", nargs="?", help="a command, as `opsbot help` lists them")
    p.add_argument("subverb", metavar="SUBVERB", nargs="?", help="one of its commands or verbs")
    p.add_argument(
        "--json",
        action="store_true",
        help='the page as JSON: {"command": "opsbot VERB", "verbs": [...], "help": TEXT}',
    )
    p.set_defaults(func=run)


def _sub_commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _verbs(parser: argparse.ArgumentParser) -> list[str]:
    """The choices of ``parser``'s first positional argument (policy's VERB), if any."""
    positionals = [a for a in parser._actions if not a.option_strings]
    first = positionals[0] if positionals else None
    return [str(c) for c in first.choices] if first is not None and first.choices else []


def page(words: Sequence[str]) -> argparse.ArgumentParser:
    """The parser whose --help ``opsbot help WORDS`` prints."""
    from opsbot_cli.main import build_parser

    parser: argparse.ArgumentParser = build_parser(list(words[:1]))
    said = ["opsbot"]
    for word in words:
        commands = _sub_commands(parser)
        verbs = _verbs(parser) if not commands and len(said) == 2 else []
        if word in commands:
            parser = commands[word]
        elif word not in verbs:  # a verb of a command's VERB argument: the command's page
            raise _unknown(said, word, list(commands) or verbs, "command" if commands else "verb")
        said.append(word)
    return parser


def _unknown(said: list[str], word: str, names: list[str], kind: str) -> UsageError:
    best = nearest(word, names)
    hint = f"did you mean {best}?" if best else " ".join(["`opsbot help", *said[1:]]) + "`"
    if not best:
        hint += " lists them" if names else " shows its page"
    return UsageError(f"`{' '.join(said)}` has no {kind} {word[:40]!r}", hint=hint)


def next_words(words: Sequence[str]) -> list[str]:
    """What may follow ``opsbot help WORDS``: the commands, then the sub-commands or
    verbs of the one named; nothing after a name opsbot does not know."""
    if len(words) > 1:
        return []
    try:
        parser = page(words)
    except UsageError:
        return []
    return list(_sub_commands(parser)) or (_verbs(parser) if words else [])


def run(args: argparse.Namespace, paths: Paths) -> int:
    words = [word for word in (args.verb, args.subverb) if word is not None]
    parser = page(words)
    if args.json:
        from opsbot_cli.screen import json_text

        verbs = list(_sub_commands(parser)) or _verbs(parser)
        print(json_text({"command": parser.prog, "verbs": verbs, "help": parser.format_help()}))
    else:
        print(parser.format_help(), end="")
    return 0
