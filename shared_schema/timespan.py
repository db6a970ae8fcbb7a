"""Durations written as systemd writes them (systemd.time(7)): ``90``, ``30s``, ``30m``,
``2h``, ``1h 30min``, ``1d12h``. Strict: every part a non-negative number with a unit
systemd knows, a bare number (seconds) only on its own; anything else is ``None``, never
a guess. Pure text to a number: no clock, no I/O."""

from __future__ import annotations

import re

__all__ = ["UNIT_SECONDS", "parse_timespan"]

#: systemd.time(7)'s units, in seconds (a month and a year as systemd counts them).
UNIT_SECONDS: dict[str, float] = {
    **dict.fromkeys(("usec", "us", "µs", "μs"), 1e-6),
    **dict.fromkeys(("msec", "ms"), 1e-3),
    **dict.fromkeys(("seconds", "second", "sec", "s"), 1.0),
    **dict.fromkeys(("minutes", "minute", "min", "m"), 60.0),
    **dict.fromkeys(("hours", "hour", "hr", "h"), 3600.0),
    **dict.fromkeys(("days", "day", "d"), 86400.0),
    **dict.fromkeys(("weeks", "week", "w"), 604800.0),
    **dict.fromkeys(("months", "month", "M"), 2629800.0),
    **dict.fromkeys(("years", "year", "y"), 31557600.0),
}

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_UNIT = "|".join(sorted(map(re.escape, UNIT_SECONDS), key=len, reverse=True))
_PART = re.compile(rf"\s*{_NUMBER}\s*({_UNIT})(?![A-Za-z])", re.ASCII)
_BARE = re.compile(rf"\s*{_NUMBER}\s*", re.ASCII)


def parse_timespan(text: str) -> float | None:
    """``text`` in seconds, or None when it is not a systemd timespan."""
    bare = _BARE.fullmatch(text)
    if bare is not None:
        return float(bare.group(1))
    total, at = 0.0, 0
    while at < len(text):
        part = _PART.match(text, at)
        if part is None:
            return None if text[at:].strip() or at == 0 else total
        total += float(part.group(1)) * UNIT_SECONDS[part.group(2)]
        at = part.end()
    return total if at else None
