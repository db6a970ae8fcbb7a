"""Reading ``systemctl show`` output: KEY=VALUE lines, one block per unit."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from diagnose_svc.limits import COMMAND_PARSE_LIMIT, COMMAND_TIMEOUT_SECONDS
from shared_io.errors import CommandFailed
from shared_io.run import run

_TIMESTAMP = re.compile(
    r"(?:[A-Z][a-z]{2} )?(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d{1,6})? UTC"
)


def show(units: Sequence[str], properties: Sequence[str]) -> list[dict[str, str]]:
    """``systemctl show`` of ``properties`` for each of ``units``, one dict per unit, in order.

    Timestamps are asked for in UTC with microseconds (``--timestamp=us+utc``).
    """
    argv = [
        "systemctl",
        "show",
        "--no-pager",
        "--timestamp=us+utc",
        "--property=" + ",".join(properties),
        "--",
        *units,
    ]
    result = run(argv, timeout=COMMAND_TIMEOUT_SECONDS, output_limit=COMMAND_PARSE_LIMIT).check()
    if result.truncated:
        raise CommandFailed(f"systemctl show printed more than {COMMAND_PARSE_LIMIT} characters")
    blocks = parse_show(result.stdout)
    if len(blocks) != len(units):
        raise CommandFailed(
            f"systemctl show returned {len(blocks)} blocks for {len(units)} units",
            hint="this systemd's output is not what opsbot expects",
        )
    return blocks


def parse_show(text: str) -> list[dict[str, str]]:
    """Split ``systemctl show`` output into one {property: value} dict per unit."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            current[key] = value
    if current:
        blocks.append(current)
    return blocks


def parse_timestamp(value: str) -> datetime | None:
    """A ``--timestamp=us+utc`` (or plain ``utc``) value as an aware datetime; None if unset."""
    match = _TIMESTAMP.fullmatch(value.strip())
    if match is None:
        return None
    day, clock, fraction = match.groups()
    micro = int((fraction or ".0")[1:].ljust(6, "0"))
    return datetime.fromisoformat(f"{day}T{clock}").replace(microsecond=micro, tzinfo=UTC)


_SPAN = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|min|h|d|w|month|y)")
_SPAN_SECONDS = {
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "month": 2629800.0,
    "y": 31557600.0,
}


def parse_timespan(value: str) -> float | None:
    """A timespan as ``systemctl show`` prints it ("2h 51min 25.545956s") in seconds;
    None when unset or not a timespan."""
    words = value.split()
    if not words:
        return None
    total = 0.0
    for word in words:
        match = _SPAN.fullmatch(word)
        if match is None:
            return None
        total += float(match.group(1)) * _SPAN_SECONDS[match.group(2)]
    return total


def parse_int(value: str) -> int:
    """An integer property; systemd prints '' or '[not set]' for none, read as 0."""
    try:
        return int(value)
    except ValueError:
        return 0


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
