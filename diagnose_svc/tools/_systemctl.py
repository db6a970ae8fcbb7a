"""Reading ``systemctl show`` output: KEY=VALUE lines, one block per unit."""

from __future__ import annotations

import re
from collections.abc import Sequence
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


def parse_int(value: str) -> int:
    """An integer property; systemd prints '' or '[not set]' for none, read as 0."""
    try:
        return int(value)
    except ValueError:
        return 0
