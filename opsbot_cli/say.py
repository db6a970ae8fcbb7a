"""How the console says what went wrong, in lines of at most 100 columns.

:func:`error_lines` is what main.py prints for every error: ``opsbot: error: MESSAGE``,
then ``opsbot: hint: HINT``, each folded to fit (its further lines indented by eight
spaces; a word longer than a line, such as a long path, is never cut; :func:`unfold`
gives a script each error and hint whole again). :class:`Parser`
is argparse's parser with usage errors that fit the same way: a choice it does not know
(``opsbot aprove``) is one line naming the nearest it does ("did you mean approve?"),
exit status 2 as for every usage error.

Light on purpose (argparse, textwrap): ``opsbot --help`` imports it.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from typing import Any, NoReturn

__all__ = ["INDENT", "WIDTH", "Parser", "error_lines", "fold", "nearest", "unfold"]

WIDTH = 100
#: What a folded message's further lines start with.
INDENT = " " * 8
#: A list of choices at most this long is named whole after an unknown choice.
_LISTED = 40


def fold(head: str, text: str, width: int = WIDTH) -> list[str]:
    """``text`` on lines of at most ``width`` columns, the first starting with ``head``,
    the others with :data:`INDENT`; runs of blanks and line breaks read as one space. A
    first word too long to follow ``head`` (a long path) starts the second line, ``head``
    alone on the first, as it is (``opsbot: error: ``, what a script looks for)."""
    words = text.split()
    if not words:
        return [head.rstrip()]
    first = len(words[0])
    alone = len(head) + first > width >= len(INDENT) + first
    lines = textwrap.wrap(
        " ".join(words),
        width,
        initial_indent=INDENT if alone else head,
        subsequent_indent=INDENT,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return [head, *lines] if alone else lines


def unfold(text: str) -> list[str]:
    """The lines of ``text`` with each folded line whole again: a line that starts with
    :data:`INDENT` joins the one before it."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(INDENT) and lines:
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line)
    return lines


def error_lines(message: str, hint: str | None = None, prog: str = "opsbot") -> list[str]:
    """An error as the console prints it: the message first, the hint on its own line."""
    lines = fold(f"{prog}: error: ", message)
    if hint:
        lines += fold(f"{prog}: hint: ", hint)
    return lines


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` most likely misspells, or None when none is close."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


class Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors said in lines that fit (see the module)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(choice) for choice in action.choices]
        best = nearest(str(value), choices)
        listed = ", ".join(choices)
        if best is not None:
            said = f"did you mean {best}?"
        elif len(listed) <= _LISTED:
            said = f"choose from {listed}"
        else:
            said = f"`{self.prog} --help` lists them"
        raise argparse.ArgumentError(None, f"invalid choice: {str(value)[:40]!r} ({said})")

    def error(self, message: str) -> NoReturn:
        """Exit 2 with the error folded to fit; an unknown choice is that one line alone,
        any other error follows the usage line, as argparse prints it."""
        if not message.startswith("invalid choice: "):
            self.print_usage(sys.stderr)
        self.exit(2, "\n".join(fold(f"{self.prog}: error: ", message)) + "\n")
