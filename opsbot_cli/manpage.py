"""The man page opsbot(8), generated from the console's own parser
(:func:`opsbot_cli.main.build_parser`): everything ``opsbot COMMAND --help`` prints, and
a NAME line (``opsbot \\- ...``) that mandb indexes for ``man -k opsbot``.

argparse-manpage writes the page (the header, NAME, SYNOPSIS, each command's usage,
description, arguments and options, sub-commands at any depth, the top-level epilog as
COMMENTS); :class:`_WithEpilogs` adds what it leaves out, each command's own epilog (its
verbs, exit statuses and examples) as that command's COMMENTS section, and keeps a line of
help text that starts with ``.`` or ``'`` from reading as a roff request.
packaging/opsbot-manpage.sh runs ``python -m opsbot_cli.manpage OUTPUT`` (``-`` for
stdout); tests/integration/test_console_man_and_completion.py compares the installed page
with every command's --help.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from argparse_manpage.manpage import (  # type: ignore[import-untyped]
    Manpage,
    _ManpageFormatter,
    quoted,
    underline,
)

__all__ = ["NAME", "render"]

#: The NAME line's description: what ``man -k opsbot`` and ``whatis opsbot`` print.
NAME = "review, approve and apply fixes for failed systemd services"
#: argparse wraps usage lines at $COLUMNS: the same page whatever terminal generates it.
COLUMNS = "80"


def _roff_text(text: str) -> str:
    """``text`` (already escaped by argparse-manpage) with each line that would start a
    roff request (``.``, ``'``) guarded by a zero-width ``\\&``."""
    return "\n".join(f"\\&{line}" if line[:1] in (".", "'") else line for line in text.split("\n"))


class _WithEpilogs(_ManpageFormatter):  # type: ignore[misc]
    """argparse-manpage's formatter, with each command's epilog after its options."""

    @staticmethod
    def format_text(text: str) -> str:
        return _roff_text(_ManpageFormatter.format_text(text))

    def _format_parser(
        self,
        parser: argparse.ArgumentParser,
        subcommand: str | None = None,
        *rest: Any,
        **named: Any,
    ) -> list[str]:
        lines: list[str] = super()._format_parser(parser, subcommand, *rest, **named)
        if subcommand and parser.epilog:
            epilog = parser._get_formatter()._format_text(parser.epilog)
            lines += ["", f".SH COMMENTS {underline(quoted(subcommand))}"]
            lines.append(self.format_text(epilog))
        return lines


def render(parser: argparse.ArgumentParser, version: str) -> str:
    """The roff source of opsbot(8) for ``parser`` (the whole one: ``build_parser()``)."""
    page = Manpage(parser)
    page.mf = _WithEpilogs(page.prog, page.formatter, format="pretty")
    page.description = NAME
    page.section = 8
    page.manual = "opsbot manual"
    page.source = f"opsbot {version}"
    return str(page)


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opsbot")
    except PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    [output] = sys.argv[1:] if argv is None else argv
    os.environ["COLUMNS"] = COLUMNS
    from opsbot_cli.main import build_parser

    text = render(build_parser(), _installed_version())
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as page:
            page.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
