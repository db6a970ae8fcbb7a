"""Facts put in words: bounded printable text, how a run ended, what a health target says."""

from __future__ import annotations

import re

from diagnose_svc.tools import HealthResult, UnitStatus
from diagnose_svc.tools.disk_usage import FULL_FREE_BYTES, Usage
from shared_schema.text import printable

#: Line breaks and tabs, as characters or as the escapes systemd and journald print
#: them as: a space in a note, which is one line of words.
_BREAKS = re.compile(r"(?:[\t\n\r\v\f]|\\x0[9abcd]|\\[nrt](?![a-z]))+", re.I)


def cut(text: str, limit: int) -> str:
    """``text`` as a note shows it: one line, other control characters visible as
    escapes, and at most ``limit`` characters, cut between words."""
    text = printable(_BREAKS.sub(" ", text))
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space].rstrip(" ,;:")
    return head + "…"


#: What systemd's Result= means when it is a timeout, said where it is shown.
_RESULT_WORDS = {
    "timeout": (
        " (systemd killed it when it did not finish starting or stopping within its "
        "timeout, TimeoutStartSec=/TimeoutStopSec=)"
    ),
    "watchdog": (
        " (it stopped answering systemd's watchdog within WatchdogSec= and systemd killed it)"
    ),
}


def ended(status: UnitStatus) -> str:
    """How its last run ended, in facts: Result= and the main process's exit."""
    words = f"Result={status.result}" + _RESULT_WORDS.get(status.result, "")
    exit_words = status.main_exit()
    return f"{words}; {exit_words}" if exit_words else words


def loop_words(status: UnitStatus) -> str:
    """A crash loop in facts: how often systemd restarted it and how its runs end."""
    return (
        f"in a crash loop ({status.active_state}/{status.sub_state}, Restart={status.restart}, "
        f"NRestarts={status.n_restarts}; its last run: {ended(status)})"
    )


def health_words(result: HealthResult) -> str:
    if result.outcome == "ok":
        return f"answers {result.status}"
    if result.outcome == "unexpected_status":
        return f"answers {result.status} (expected {result.expected_status})"
    return {
        "timeout": "does not answer (timed out)",
        "connection_refused": "refuses connections",
    }.get(result.outcome, "cannot be reached")


def full_words(usage: Usage) -> str:
    """A full filesystem in words, by what ran out: its bytes, or its inodes (room left
    but no file can be made)."""
    if usage.free_inodes == 0 and usage.free_bytes >= FULL_FREE_BYTES:
        return (
            f"the filesystem of {usage.path} ({usage.role}) has no free inodes: no file can "
            f"be made there, though {usage.free_bytes} bytes are free"
        )
    return (
        f"the filesystem of {usage.path} ({usage.role}) is full: {usage.used_percent:.0f}% "
        f"used, {usage.free_bytes} bytes free"
    )


def read_only_words(usage: Usage) -> str:
    """A directory it writes to on a filesystem mounted read-only, in words."""
    return (
        f"the filesystem of {usage.path} ({usage.role}) is mounted read-only "
        f"({usage.mount}, as systemd sees it): nothing can be written there"
    )
