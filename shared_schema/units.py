"""Unit names and plan ids: the grammar both halves check before anything touches the host.

A unit name follows systemd's unit-name grammar (unit_name_is_valid): at most 256
characters from ``[A-Za-z0-9:_.\\-]``, an optional ``@instance``, a known type suffix.
opsbot is stricter in one way: no leading ``-`` (it would read as an option to a
program that forgot ``--``), so ``-.mount`` and ``-.slice`` cannot be named in a plan.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

UNIT_NAME_MAX = 256
UNIT_SUFFIXES = (
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
)
_CHARS = r"[A-Za-z0-9:_.\\-]"
_UNIT_RE = re.compile(rf"(?!-){_CHARS}+(?:@{_CHARS}*)?\.(?:{'|'.join(UNIT_SUFFIXES)})", re.ASCII)

# Units no plan may touch, whatever the config says: opsbot itself (a plan must not be
# able to stop its own audit or approval gate), systemd's own daemons, the message bus
# every systemctl call goes through, polkit, and the ways in for a human (ssh, getty).
BUILTIN_DENYLIST: tuple[str, ...] = (
    "opsbot*",
    "systemd-*",
    "dbus*",
    "ssh*",
    "sshd*",
    "polkit*",
    "getty*",
    "serial-getty*",
    "init.scope",
    "-.slice",
    "*.slice",
    "*.scope",
    "*.device",
    "*.swap",
)

PLAN_ID_PATTERN = r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$"
_PLAN_ID_RE = re.compile(PLAN_ID_PATTERN, re.ASCII)


def is_valid_unit_name(name: str) -> bool:
    """True when ``name`` is a unit name opsbot accepts (see module docstring)."""
    return len(name) <= UNIT_NAME_MAX and _UNIT_RE.fullmatch(name) is not None


def _match(pattern: str, name: str) -> bool:
    if pattern.startswith("*"):
        return name.endswith(pattern[1:])
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def denied_reason(name: str) -> str | None:
    """The built-in denylist entry ``name`` falls under, or None if it is not denied."""
    for pattern in BUILTIN_DENYLIST:
        if _match(pattern, name):
            return pattern
    return None


def is_valid_plan_id(plan_id: str) -> bool:
    """True for ids opsbot makes: ``YYYYMMDD-HHMMSS-xxxxxxxx`` (never a path)."""
    return _PLAN_ID_RE.fullmatch(plan_id) is not None


def _check_unit(name: str) -> str:
    if len(name) > UNIT_NAME_MAX:
        raise ValueError(
            f"unit name is {len(name)} characters long; systemd allows {UNIT_NAME_MAX}"
        )
    if name.startswith("-"):
        raise ValueError("unit name must not start with '-'")
    if "/" in name:
        raise ValueError("unit name must not contain '/'; name a unit, not a path")
    if _UNIT_RE.fullmatch(name) is None:
        raise ValueError(
            f"{name[:80]!r} is not a valid unit name: use letters, digits, ':', '_', '.', "
            f"'\\', '-', an optional '@instance', and a suffix such as .service "
            f"(one of {', '.join(UNIT_SUFFIXES)})"
        )
    return name


def _check_plan_id(value: str) -> str:
    if not is_valid_plan_id(value):
        raise ValueError(f"{value[:80]!r} is not a plan id; ids look like 20261129-213500-1a2b3c4d")
    return value


UnitName = Annotated[str, StringConstraints(strict=True), AfterValidator(_check_unit)]
PlanId = Annotated[str, StringConstraints(strict=True), AfterValidator(_check_plan_id)]
Sha256Hex = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]
