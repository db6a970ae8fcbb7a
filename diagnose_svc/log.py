"""Logging, configured once per process: structlog events to journald with upper-case
fields an operator can filter on (``RUN_ID``, ``STEP``, ``TOOL``, ``DECIDED_BY``,
``ARGV``, ...) and a ``MESSAGE_ID`` per event name, so that ``journalctl -u
opsbot-diagnose RUN_ID=<id>`` tells one diagnosis's whole story.

Without a journal (a developer's shell), events go to stderr as key=value lines.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import uuid
from collections.abc import MutableMapping
from typing import Any

import structlog

SYSLOG_IDENTIFIER = "opsbot-diagnose"
_JOURNAL_SOCKET = "/run/systemd/journal/socket"
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}
_BAD_FIELD_CHARS = re.compile(r"[^A-Z0-9_]")


def message_id(event: str) -> str:
    """The journal MESSAGE_ID of an event name: a stable 128-bit id derived from it."""
    return uuid.UUID(bytes=hashlib.sha256(f"opsbot:{event}".encode()).digest()[:16]).hex


def journal_fields(event_dict: MutableMapping[str, Any]) -> dict[str, str]:
    """The journal fields one event becomes."""
    event = str(event_dict.get("event", ""))
    level = str(event_dict.get("level", "info"))
    rest = {
        k: v
        for k, v in event_dict.items()
        if k not in ("event", "level", "timestamp") and v is not None
    }
    fields = {
        "MESSAGE": " ".join([event, *(f"{k}={v}" for k, v in rest.items())]),
        "MESSAGE_ID": message_id(event),
        "PRIORITY": str(_PRIORITY.get(level, 6)),
        "SYSLOG_IDENTIFIER": SYSLOG_IDENTIFIER,
        "EVENT": event,
    }
    for key, value in rest.items():
        name = _BAD_FIELD_CHARS.sub("_", key.upper()).lstrip("_") or "FIELD"
        fields[name] = str(value)
    return fields


class _Sink:
    def __init__(self, use_journal: bool) -> None:
        self._send: Any = None
        if use_journal:
            from systemd import journal

            self._send = journal.send

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        if self._send is not None:
            fields = journal_fields(event_dict)
            self._send(fields.pop("MESSAGE"), **fields)
            raise structlog.DropEvent
        rest = " ".join(
            f"{k}={v}" for k, v in event_dict.items() if k not in ("event", "level", "timestamp")
        )
        return (
            f"{SYSLOG_IDENTIFIER}: {event_dict.get('level', 'info')}: {event_dict['event']} {rest}"
        )


def configure(*, verbose: bool = False, journal: bool | None = None) -> None:
    """Configure structlog for this process. ``journal=None`` means: if one is running."""
    if journal is None:
        journal = os.path.exists(_JOURNAL_SOCKET) and not os.environ.get("OPSBOT_NO_JOURNAL")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _Sink(journal),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
