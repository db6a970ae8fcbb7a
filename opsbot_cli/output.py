"""How the console prints: text for a person, JSON for a script, untrusted text escaped."""

from __future__ import annotations

import argparse
import os
import pwd
from datetime import datetime
from typing import Any

from opsbot_cli.errors import RootRequired, UsageError
from opsbot_cli.screen import WIDTH, cut as screen_cut, json_text, printable, when
from plans import wait_text
from shared_schema.names import is_valid_plan_id, is_valid_unit_name

__all__ = [
    "WIDTH",
    "command",
    "cut",
    "fit",
    "json_out",
    "one_line",
    "operator_name",
    "out",
    "plan_id_arg",
    "printable",
    "require_root",
    "unit_arg",
    "when",
]


def command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str
) -> argparse.ArgumentParser:
    """A command's parser: ``summary`` is both its line in --help and its description."""
    return sub.add_parser(name, help=summary, description=summary)


def out(text: str = "") -> None:
    print(text)


def json_out(value: Any) -> None:
    print(json_text(value))


def one_line(value: str) -> str:
    """Untrusted text for one line: line breaks and runs of blanks as one space, then
    what is left unprintable escaped (no literal ``\x0a`` for a line break)."""
    return printable(" ".join(value.split()))


def cut(line: str, verbose: bool = False) -> str:
    """One line of at most WIDTH columns, its end an ellipsis where it was cut."""
    return line if verbose else screen_cut(line, WIDTH)


def fit(text: str, indent: str = "", *, lines: int = 2, verbose: bool = False) -> list[str]:
    """``text`` (already printable) as lines of at most WIDTH columns that start with
    ``indent``, broken between words; at most ``lines`` of them, the last ending in "..."
    where text was left out, unless ``verbose``."""
    import textwrap

    width = max(WIDTH - len(indent), 20)
    wrapped = textwrap.wrap(
        " ".join(text.split()),
        width,
        break_on_hyphens=False,
        max_lines=None if verbose else lines,
        placeholder=" …",
    )
    return [indent + line for line in wrapped] or [indent.rstrip()]


def require_root(what: str) -> None:
    """RootRequired unless root runs this; main.py's hint repeats the whole command line
    (``sudo opsbot watch web``), this one's only ``what``."""
    if os.geteuid() != 0:
        raise RootRequired(f"{what} must run as root", hint=f"run it as root: sudo opsbot {what}")


def operator_name() -> str:
    """Who is at the keyboard: the user sudo was run by, else the current user."""
    name = os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name
    return "".join(c for c in name if c.isalnum() or c in "_.@-")[:64] or "root"


def plan_id_arg(value: str) -> str:
    if not is_valid_plan_id(value):
        raise UsageError(
            f"{printable(value[:80])!r} is not a plan id",
            hint="ids look like 20261129-213500-1a2b3c4d; `opsbot plans` lists them",
        )
    return value


def unit_arg(value: str) -> str:
    if "." not in value:
        value += ".service"
    if not is_valid_unit_name(value):
        raise UsageError(
            f"{printable(value[:80])!r} is not a unit name",
            hint="e.g. nginx.service, app.service, foo@bar.service",
        )
    return value


def window_words(wait: dict[str, Any] | None, long: bool = True) -> str:
    """When an APPROVED plan waiting for its apply window runs (the executor's
    ``waits_for_window``, as JSON), in plans.wait_text's words."""
    if wait is None:
        return "at the next apply"
    opens, closes = wait.get("opens_at"), wait.get("closes_at")
    return wait_text(
        datetime.fromisoformat(opens) if opens else None,
        datetime.fromisoformat(closes) if closes else None,
        long=long,
    )
