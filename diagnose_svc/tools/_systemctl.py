"""The read tools' view of ``systemctl show``: shared_io.unit_show's one reader, within
the diagnosis's own bounds, and the Exec*= properties only diagnosis reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from diagnose_svc.limits import COMMAND_PARSE_LIMIT, COMMAND_TIMEOUT_SECONDS
from shared_io.unit_show import (
    UnitProperties,
    parse_int,
    parse_show,
    parse_timestamp,
    parse_units,
    show as show_units,
)
from shared_schema.timespan import parse_timespan

__all__ = [
    "ExecCommand",
    "UnitProperties",
    "parse_exec",
    "parse_int",
    "parse_show",
    "parse_timespan",
    "parse_timestamp",
    "parse_units",
    "show",
]


def show(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
    """``systemctl show`` of ``properties`` for each of ``units``, one block per unit, in
    order, within the read tools' time and output bounds (UnitStateError otherwise)."""
    return show_units(
        units, properties, timeout=COMMAND_TIMEOUT_SECONDS, output_limit=COMMAND_PARSE_LIMIT
    )


_EXEC = re.compile(
    r"\{ path=(?P<path>.*?) ; argv\[\]=(?P<argv>.*?) ; ignore_errors=(?P<ignore>\w+) ; "
    r"start_time=\[(?P<start>.*?)\] ; stop_time=\[(?P<stop>.*?)\] ; pid=(?P<pid>\d+) ; "
    r"code=(?P<code>\S+) ; status=(?P<status>\S+) \}"
)


@dataclass(frozen=True)
class ExecCommand:
    """One command of an Exec*= property, with how its last run ended."""

    path: str
    argv: tuple[str, ...]
    ignore_errors: bool
    code: str  # "exited", "killed", "dumped", or "(null)" when it has not run
    status: int
    ran: bool
    #: How long its last run took (stop_time - start_time), when both are known.
    ran_seconds: float | None = None

    @property
    def failed(self) -> bool:
        return self.ran and not self.ignore_errors and (self.code != "exited" or self.status != 0)


def parse_exec(value: str) -> list[ExecCommand]:
    """The commands of an ``ExecStart=``-like property as ``systemctl show`` prints it."""
    commands = []
    for match in _EXEC.finditer(value):
        status = match.group("status").split("/", 1)[0]
        started = parse_timestamp(match.group("start"))
        stopped = parse_timestamp(match.group("stop"))
        took = (stopped - started).total_seconds() if started and stopped else None
        commands.append(
            ExecCommand(
                path=match.group("path"),
                argv=tuple(match.group("argv").split()),
                ignore_errors=match.group("ignore") == "yes",
                code=match.group("code"),
                status=int(status) if status.isdigit() else 0,
                ran=match.group("code") != "(null)",
                ran_seconds=took,
            )
        )
    return commands
