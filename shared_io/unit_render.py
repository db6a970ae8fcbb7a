"""A unit property read over D-Bus, written as ``systemctl show --timestamp=us+utc`` prints it.

systemd's own rules (systemd 252's src/shared/bus-print-properties.c and
src/systemctl/systemctl-show.c), for the properties opsbot reads and no other: each is in
:data:`RENDERERS` with the D-Bus type it must have and the interface that holds it. A
property not in the table, a value of another type, or a value whose printing this module
does not copy (a character outside printable ASCII in a quoted word, a real-time signal)
raises :class:`NotRendered`, and the caller asks ``systemctl show`` instead: a value is
printed exactly as systemctl would print it, or not at all.

:func:`render` gives ``systemctl show``'s lines for one property: none (systemctl prints
nothing, e.g. an empty ExecStartPre=), one, or several (one per command of an Exec*=).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shared_schema.names import UNIT_SUFFIXES

__all__ = ["RENDERERS", "NotRendered", "interface_of", "render"]

#: The largest unsigned 64-bit value: systemd's "infinity", "unset".
U64_MAX = 2**64 - 1
#: What systemd prints a unit's type interface for, by the unit name's suffix.
TYPE_INTERFACES = {
    suffix: "org.freedesktop.systemd1." + suffix.capitalize() for suffix in UNIT_SUFFIXES
}
UNIT_INTERFACE = "org.freedesktop.systemd1.Unit"
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: shell_maybe_quote(): a word with one of these is printed in double quotes.
_NEEDS_QUOTES = frozenset(" \"\\`$*?['()<>|&;!")
#: ... and inside them these take a backslash.
_NEEDS_ESCAPE = frozenset('"\\`$')
#: sigchld_code_to_string(): how a command ended (CLD_* from waitid(2)); 0 never ran.
_CLD_CODES = {1: "exited", 2: "killed", 3: "dumped", 4: "trapped", 5: "stopped", 6: "continued"}
#: signal_to_string() for the signals below SIGRTMIN (Linux x86 and arm numbering).
_SIGNALS = (
    "0 HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT CHLD "
    "CONT STOP TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS"
).split()


class NotRendered(Exception):
    """This property or value is not one this module prints as systemctl does."""


def _string(value: str) -> str:
    return "[unprintable]" if "\n" in value else value


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _number(value: int) -> str:
    return str(value)


def _unset_or_number(value: int) -> str:
    return "[not set]" if value == U64_MAX else str(value)


def _infinity_or_number(value: int) -> str:
    return "infinity" if value == U64_MAX else str(value)


def timestamp_utc(usec: int) -> str:
    """A timestamp as ``--timestamp=us+utc`` prints it; '' for none (0 or infinity)."""
    if usec in (0, U64_MAX):
        return ""
    when = datetime.fromtimestamp(usec // 1_000_000, tz=UTC)
    return f"{_WEEKDAYS[when.weekday()]} {when:%Y-%m-%d %H:%M:%S}.{usec % 1_000_000:06d} UTC"


def timestamp_local(usec: int) -> str:
    """A timestamp as systemctl prints the few it formats in its default style (local
    time, whole seconds, the zone's abbreviation); '' for none."""
    if usec in (0, U64_MAX):
        return ""
    local = time.localtime(usec // 1_000_000)
    zone = f" {local.tm_zone}" if local.tm_zone else ""
    return f"{_WEEKDAYS[local.tm_wday]} {time.strftime('%Y-%m-%d %H:%M:%S', local)}{zone}"


def quote_word(word: str) -> str:
    """One word of a list, as systemd's shell_maybe_quote() prints it."""
    if not all(" " <= c < "\x7f" for c in word):
        raise NotRendered(f"a word with a character outside printable ASCII: {word!r}")
    if not any(c in _NEEDS_QUOTES for c in word):
        return word
    return '"' + "".join("\\" + c if c in _NEEDS_ESCAPE else c for c in word) + '"'


def _words(value: list[str]) -> str:
    return " ".join(quote_word(word) for word in value)


def _hex(value: bytes) -> str:
    return value.hex()


def _load_error(value: tuple[str, str]) -> str:
    name, message = value
    return f'{name} "{message}"' if name else ""


def _signal(number: int) -> str:
    if not 0 <= number < len(_SIGNALS):
        raise NotRendered(f"signal {number}")
    return _SIGNALS[number]


def _exec_lines(value: list[tuple[Any, ...]]) -> list[str]:
    lines = []
    for path, argv, ignore, start, _start_mono, stop, _stop_mono, pid, code, status in value:
        if code == 1:
            ended = str(status)
        elif code in _CLD_CODES or code == 0:
            ended = f"{status}/{_signal(status)}"
        else:
            raise NotRendered(f"exit code {code}")
        lines.append(
            f"{{ path={path or 'n/a'} ; argv[]={' '.join(argv)} ; "
            f"ignore_errors={_yes_no(ignore)} ; start_time=[{timestamp_utc(start) or 'n/a'}] ; "
            f"stop_time=[{timestamp_utc(stop) or 'n/a'}] ; pid={pid} ; "
            f"code={_CLD_CODES.get(code, '(null)')} ; status={ended} }}"
        )
    return lines


def _environment_files(value: list[tuple[str, bool]]) -> list[str]:
    return [f"{path} (ignore_errors={_yes_no(ignore)})" for path, ignore in value]


Render = Callable[[Any], "str | list[str]"]
#: Each property opsbot reads: its D-Bus signature, whether it is on the Unit interface
#: (else on the unit type's: Service, Timer, Socket, ...), and how systemctl prints it.
RENDERERS: dict[str, tuple[str, bool, Render]] = {
    **{
        name: ("s", True, _string)
        for name in ("Id", "LoadState", "ActiveState", "SubState", "FragmentPath")
    },
    "UnitFileState": ("s", True, _string),
    **{
        name: ("s", False, _string)
        for name in (
            "Result",
            "Restart",
            "ReloadResult",
            "User",
            "Group",
            "Type",
            "ControlGroup",
            "WorkingDirectory",
            "StatusText",
            "Unit",
        )
    },
    "NeedDaemonReload": ("b", True, _yes_no),
    "CanReload": ("b", True, _yes_no),
    "DynamicUser": ("b", False, _yes_no),
    **{name: ("u", False, _number) for name in ("MainPID", "ControlPID", "NRestarts")},
    "ExecMainStatus": ("i", False, _number),
    "ExecMainCode": ("i", False, _number),
    "MemoryCurrent": ("t", False, _unset_or_number),
    "TasksCurrent": ("t", False, _unset_or_number),
    **{
        name: ("t", False, _infinity_or_number)
        for name in ("MemoryMax", "MemoryHigh", "TasksMax", "LimitNOFILE", "LimitNOFILESoft")
    },
    **{
        name: ("t", True, timestamp_utc)
        for name in (
            "ActiveEnterTimestamp",
            "ActiveExitTimestamp",
            "InactiveEnterTimestamp",
            "StateChangeTimestamp",
        )
    },
    "ExecMainStartTimestamp": ("t", False, timestamp_utc),
    "LastTriggerUSec": ("t", False, timestamp_local),
    "NextElapseUSecRealtime": ("t", False, timestamp_local),
    **{
        name: ("as", True, _words)
        for name in (
            "Requires",
            "Requisite",
            "Wants",
            "BindsTo",
            "PartOf",
            "BoundBy",
            "RequiredBy",
            "After",
            "OnFailure",
            "Triggers",
            "TriggeredBy",
            "DropInPaths",
        )
    },
    **{
        name: ("as", False, _words)
        for name in (
            "Environment",
            "StateDirectory",
            "LogsDirectory",
            "CacheDirectory",
            "RuntimeDirectory",
            "ReadWritePaths",
        )
    },
    "InvocationID": ("ay", True, _hex),
    "LoadError": ("(ss)", True, _load_error),
    **{
        name: ("a(sasbttttuii)", False, _exec_lines)
        for name in ("ExecStartPre", "ExecStart", "ExecReload")
    },
    "EnvironmentFiles": ("a(sb)", False, _environment_files),
}


def interface_of(unit: str, name: str) -> str:
    """The D-Bus interface that holds ``name`` for ``unit``; NotRendered if opsbot does
    not read it this way or the unit's type is not one systemd knows."""
    if name not in RENDERERS:
        raise NotRendered(f"property {name}")
    if RENDERERS[name][1]:
        return UNIT_INTERFACE
    suffix = unit.rpartition(".")[2]
    if suffix not in TYPE_INTERFACES:
        raise NotRendered(f"unit type of {unit}")
    return TYPE_INTERFACES[suffix]


def render(name: str, signature: str, value: Any) -> list[str]:
    """``systemctl show``'s lines for property ``name`` of D-Bus type ``signature``."""
    if name not in RENDERERS:
        raise NotRendered(f"property {name}")
    expected, _on_unit, rendered = RENDERERS[name]
    if signature != expected:
        raise NotRendered(f"{name} of type {signature}, not {expected}")
    text = rendered(value)
    if isinstance(text, list):
        return [f"{name}={line}" for line in text]
    return [f"{name}={text}"]
