"""What systemd says of a unit, read one way: ``systemctl show``'s values, parsed at once
into frozen values.

They are read over D-Bus in-process where that gives exactly what ``systemctl show``
prints (:mod:`shared_io.unit_bus`: no process per read, a third of the time or less), and by
running ``systemctl show`` everywhere else (no bus, a property it does not render,
``OPSBOT_SYSTEMD_READ=systemctl``).

Every half reads unit state through :func:`show`: the diagnosis's read tools, the
executor's check of a step's precondition right before it runs, the console's and the
approval page's live state, and the console's look at the apply units. It asks for
timestamps in UTC with microseconds (``--timestamp=us+utc``), refuses output it cut
(``output_limit``) and a block count that is not one per unit asked, and turns every
failure into :class:`~shared_io.errors.UnitStateError` with systemctl's own words: a state
that could not be read is an error the caller says ("live state unknown: ..."), never an
empty state.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType

from shared_io.errors import UnitStateError
from shared_io.run import run
from shared_io.unit_bus import read as read_over_bus

__all__ = [
    "STATE_PROPERTIES",
    "UnitProperties",
    "UnitState",
    "parse_int",
    "parse_show",
    "parse_timestamp",
    "read_unit_state",
    "show",
]

#: Seconds ``systemctl show`` may take unless the caller says otherwise.
SHOW_TIMEOUT = 15.0
#: Characters of output read by default: far more than any unit's properties.
SHOW_OUTPUT_LIMIT = 256 * 1024
#: What :func:`read_unit_state` asks for.
STATE_PROPERTIES = ("LoadState", "ActiveState", "SubState", "InvocationID")

_TIMESTAMP = re.compile(
    r"(?:[A-Z][a-z]{2} )?(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d{1,6})? UTC"
)


class UnitProperties(Mapping[str, str]):
    """The properties ``systemctl show`` printed for one unit, read-only: a property it
    did not print reads as ``""`` through :meth:`get` (systemd prints nothing for a
    property it does not know)."""

    __slots__ = ("_values", "unit")

    def __init__(self, unit: str, values: Mapping[str, str]) -> None:
        self.unit = unit
        self._values = MappingProxyType(dict(values))

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"UnitProperties({self.unit!r}, {dict(self._values)!r})"


@dataclass(frozen=True)
class UnitState:
    """A unit's load, active and sub state and its invocation, as systemd says now."""

    unit: str
    load_state: str
    active_state: str
    sub_state: str
    invocation_id: str

    def describe(self) -> str:
        return f"{self.unit} is {self.active_state}/{self.sub_state} (load: {self.load_state})"


def show(
    units: Sequence[str],
    properties: Sequence[str],
    *,
    timeout: float = SHOW_TIMEOUT,
    output_limit: int = SHOW_OUTPUT_LIMIT,
) -> list[UnitProperties]:
    """``systemctl show`` of ``properties`` for each of ``units``, in order; UnitStateError
    when systemctl fails, its output was cut, or it is not one block per unit.

    Read over D-Bus where it can (:mod:`shared_io.unit_bus`: the same values, no process),
    else by running systemctl."""
    lines = read_over_bus(units, properties, timeout)
    if lines is not None:
        text = "\n".join(lines)
        blocks = parse_show(text)
        if len(text) <= output_limit and len(blocks) == len(units):
            return [UnitProperties(u, block) for u, block in zip(units, blocks, strict=True)]
    argv = [
        "systemctl",
        "show",
        "--no-pager",
        "--timestamp=us+utc",
        "--property=" + ",".join(properties),
        "--",
        *units,
    ]
    result = run(argv, timeout=timeout, output_limit=output_limit)
    named = ", ".join(units[:3]) + (f" and {len(units) - 3} more" if len(units) > 3 else "")
    if not result.ok:
        said = " ".join((result.stderr or result.stdout or result.error).split())[:200]
        raise UnitStateError(f"cannot read the state of {named}: {said or result.error}")
    if result.truncated:
        raise UnitStateError(
            f"cannot read the state of {named}: systemctl show printed more than "
            f"{output_limit} characters"
        )
    blocks = parse_show(result.stdout)
    if len(blocks) != len(units):
        raise UnitStateError(
            f"cannot read the state of {named}: systemctl show printed {len(blocks)} "
            f"blocks for {len(units)} units",
            hint="this systemd's output is not what opsbot expects",
        )
    return [UnitProperties(unit, block) for unit, block in zip(units, blocks, strict=True)]


def read_unit_state(unit: str, timeout: float = SHOW_TIMEOUT) -> UnitState:
    """``unit``'s load, active and sub state and invocation id; UnitStateError if systemd
    could not say."""
    [values] = show([unit], STATE_PROPERTIES, timeout=timeout)
    return UnitState(
        unit=unit,
        load_state=values.get("LoadState", ""),
        active_state=values.get("ActiveState", ""),
        sub_state=values.get("SubState", ""),
        invocation_id=values.get("InvocationID", ""),
    )


# -- values -----------------------------------------------------------------------------


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


def parse_units(value: str) -> list[str]:
    """A list of units as ``systemctl show`` prints one (``After=``, ``Requires=``, ...):
    space-separated, a name with a backslash escape quoted (an instance's slice,
    ``"system-web\\x2dapi.slice"``): the names as systemd knows them, unquoted."""
    try:
        return [name for name in shlex.split(value) if name]
    except ValueError:  # an unbalanced quote: the words as printed
        return value.split()


def parse_int(value: str) -> int:
    """An integer property; systemd prints '' or '[not set]' for none, read as 0."""
    try:
        return int(value)
    except ValueError:
        return 0
