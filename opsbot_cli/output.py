"""How the console prints: text for a person, JSON for a script, untrusted text escaped."""

from __future__ import annotations

import argparse
import json
import os
import pwd
from datetime import datetime
from typing import Any

from opsbot_cli.errors import UsageError
from shared_schema import is_valid_plan_id, is_valid_unit_name
from shared_schema.text import printable

__all__ = [
    "command",
    "json_out",
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
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def when(value: datetime) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UsageError(f"{what} must run as root", hint=f"sudo opsbot {what}")


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
