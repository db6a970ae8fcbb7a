"""What a unit's journal suggests, read the way an operator reads it: leads, never facts.

Two kinds of line are told apart by what journald recorded about their sender, not by
their text: systemd's own (PID 1: "Start request repeated too quickly", "Reloaded ...")
are facts about the unit; everything the unit's processes wrote is untrusted, since any
client can put text into an application's log (a request line is enough). So an own line
only points at what a read tool must check: a port that may be held, a filesystem that
may be full, a setting that may be wrong. Only the lines of its latest attempt (and of the
attempts just before it, when it never got as far as active) count for its current
trouble: see :func:`episode_start`.
"""

from __future__ import annotations

import re
from datetime import datetime

from diagnose_svc.tools import JournalLine, JournalTail

_START_LIMIT = re.compile(r"Start request repeated too quickly")
_RELOADED = re.compile(r"^Reloaded ")
_RELOAD_FAILED = re.compile(r"^Reload failed for ")
_PORT = re.compile(r"(?:port |:)(\d{2,5})\b")
_SETTING = re.compile(r"\b([A-Z][A-Z0-9_]{1,63})=['\"]?([^'\"\s;,)]{1,120})")
ADDRESS_IN_USE = re.compile(r"(?i)address already in use|address in use")
NO_SPACE = re.compile(r"(?i)no space left on device|disk full")


def when(line: JournalLine) -> datetime | None:
    try:
        return datetime.fromisoformat(line.time)
    except ValueError:
        return None


def after(lines: list[JournalLine], moment: datetime | None) -> list[JournalLine]:
    """The lines logged after ``moment`` (all of them when it is None)."""
    if moment is None:
        return list(lines)
    return [line for line in lines if (t := when(line)) is not None and t > moment]


def episode_start(tail: JournalTail, active_enter: datetime | None) -> datetime | None:
    """When the unit's current trouble began, as its journal shows it: the last thing
    systemd said about it before it last became active (the previous attempt's end).

    Lines after that moment are its latest attempt's, whatever its Type=: a simple
    service becomes active as it forks, so its own output follows ActiveEnterTimestamp;
    a notify service that never became ready is still on its last good ActiveEnter, so
    every attempt since then counts. None (the whole tail) when it never was active or
    the tail shows nothing before it.
    """
    if active_enter is None:
        return None
    before = [
        t for line in systemd_lines(tail) if (t := when(line)) is not None and t < active_enter
    ]
    return max(before, default=None)


def own_lines(tail: JournalTail, since: datetime | None) -> list[JournalLine]:
    """What the unit's own processes wrote after ``since``: untrusted leads."""
    return [line for line in after(tail.lines, since) if not line.systemd]


def systemd_lines(tail: JournalTail, since: datetime | None = None) -> list[JournalLine]:
    """What systemd itself (PID 1) wrote about the unit after ``since``: facts."""
    return [line for line in after(tail.lines, since) if line.systemd]


def start_limit_hit(tail: JournalTail, since: datetime | None) -> JournalLine | None:
    """systemd's "Start request repeated too quickly", if it said so after ``since``."""
    for line in reversed(systemd_lines(tail, since)):
        if _START_LIMIT.search(line.message):
            return line
    return None


def last_reload(tail: JournalTail) -> datetime | None:
    """When systemd last reloaded the unit ("Reloaded ..."), if the tail shows it."""
    for line in reversed(systemd_lines(tail)):
        if _RELOADED.match(line.message):
            return when(line)
    return None


def reload_failed(tail: JournalTail) -> JournalLine | None:
    for line in reversed(systemd_lines(tail)):
        if _RELOAD_FAILED.match(line.message):
            return line
        if _RELOADED.match(line.message):
            return None
    return None


def ports_named(lines: list[JournalLine]) -> list[int]:
    """Ports that lines about an address in use name (leads for list_listeners)."""
    ports: dict[int, None] = {}
    for line in lines:
        if ADDRESS_IN_USE.search(line.message):
            for match in _PORT.finditer(line.message):
                number = int(match.group(1))
                if 0 < number < 65536:
                    ports.setdefault(number, None)
    return list(ports)


def says(lines: list[JournalLine], pattern: re.Pattern[str]) -> JournalLine | None:
    for line in reversed(lines):
        if pattern.search(line.message):
            return line
    return None


def settings_named(lines: list[JournalLine]) -> list[tuple[str, str, JournalLine]]:
    """KEY=VALUE (or KEY='VALUE') pairs the lines name: a setting the unit complains of."""
    out = []
    for line in lines:
        for match in _SETTING.finditer(line.message):
            out.append((match.group(1), match.group(2), line))
    return out


NO_SPACE = re.compile(r"no space left on device|ENOSPC|disk (?:is )?full", re.I)
#: What a process says when it ran out of something, by the resource (leads: each is
#: checked against the present by a read tool before anything is decided from it).
EXHAUSTED: dict[str, re.Pattern[str]] = {
    "disk": re.compile(r"no space left on device|ENOSPC|disk quota exceeded|EDQUOT", re.I),
    "descriptors": re.compile(r"too many open files|\bEMFILE\b|\bENFILE\b", re.I),
    "tasks": re.compile(
        r"can't start new thread|pthread_create|fork: retry|fork failed|"
        r"cannot fork|resource temporarily unavailable.*(?:fork|thread|clone)",
        re.I,
    ),
    "memory": re.compile(r"cannot allocate memory|\bENOMEM\b|\bMemoryError\b", re.I),
    "read_only": re.compile(r"read-only file ?system|\bEROFS\b", re.I),
}


def exhausted(lines: list[JournalLine]) -> dict[str, tuple[JournalLine, int]]:
    """Each resource ``lines`` say ran out: the last line saying so, and how many did."""
    found: dict[str, tuple[JournalLine, int]] = {}
    for line in lines:
        for resource, pattern in EXHAUSTED.items():
            if pattern.search(line.message):
                count = found[resource][1] + 1 if resource in found else 1
                found[resource] = (line, count)
    return found


#: A TLS peer's certificate refused: OpenSSL's, Python's, Go's, curl's and nginx's words.
#: A lead for read_certificates, which must find the expired file.
CERT_REFUSED = re.compile(
    r"certificate (?:has )?expired|certificate is not yet valid|CERT_HAS_EXPIRED|"
    r"certificate verify failed|SSL certificate (?:problem|verify error)",
    re.I,
)

NO_SUCH_FILE = re.compile(r"no such file or directory|ENOENT|does not exist|not found", re.I)
_ABSOLUTE = re.compile(r"(/[\w.@+\-]+(?:/[\w.@+\-]+)+)")


def paths_named(lines: list[JournalLine]) -> list[str]:
    """Absolute paths that lines about a missing file name (leads a file's facts check)."""
    out: dict[str, None] = {}
    for line in lines:
        if NO_SUCH_FILE.search(line.message):
            for match in _ABSOLUTE.finditer(line.message):
                out.setdefault(match.group(1).rstrip(".:,;'\""), None)
    return list(out)
