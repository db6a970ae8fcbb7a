"""Unit names and plan ids as grammar: what both halves and the console check before
anything touches the host. Pure text: no model is built here (the pydantic types built on
it are shared_schema.units).

A unit name follows systemd's unit-name grammar (unit_name_is_valid): at most 256
characters from ``[A-Za-z0-9:_.\\-]``, an optional ``@instance``, a known type suffix.
opsbot is stricter in one way: no leading ``-`` (it would read as an option to a
program that forgot ``--``), so ``-.mount`` and ``-.slice`` cannot be named in a plan.
"""

import re

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
_FIRST = r"[A-Za-z0-9:_.\\]"  # any of _CHARS but "-"
#: The whole grammar, anchored (the JSON Schema of a unit name says the same; no
#: lookaround, which some engines that guide a model's output do not take).
UNIT_NAME_PATTERN = rf"^{_FIRST}{_CHARS}*(?:@{_CHARS}*)?\.(?:{'|'.join(UNIT_SUFFIXES)})$"
_UNIT_RE = re.compile(UNIT_NAME_PATTERN, re.ASCII)

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
