"""Logging, configured once per process: structlog events to journald with fields an
operator can filter on (``PLAN_ID``, ``PLAN_SHA256``, ``STEP``, ``ARGV``, ``EXIT_STATUS``)
and a ``MESSAGE_ID`` per event type, so that ``journalctl -u opsbot-executor
PLAN_ID=<id>`` tells a plan's whole story.

Without a journal (a developer's shell), events go to stderr as key=value lines.
"""

import hashlib
import logging
import os
import re
import shlex
import sys
import uuid
from collections.abc import MutableMapping
from typing import Any

import structlog

SYSLOG_IDENTIFIER = "opsbot"
_JOURNAL_SOCKET = "/run/systemd/journal/socket"
_FIELD_RENAMES = {"sha256": "PLAN_SHA256", "event": "EVENT"}
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}
_BAD_FIELD_CHARS = re.compile(r"[^A-Z0-9_]")


def message_id(event: str) -> str:
    """The journal MESSAGE_ID of an event type: a stable 128-bit id derived from its name.

    ``journalctl MESSAGE_ID=$(python -c ...)`` or ``opsbot audit`` can select one type.
    """
    digest = hashlib.sha256(f"opsbot:{event}".encode()).digest()[:16]
    return uuid.UUID(bytes=digest).hex


def _field(key: str) -> str:
    name = _FIELD_RENAMES.get(key) or _BAD_FIELD_CHARS.sub("_", key.upper())
    return name.lstrip("_") or "FIELD"


def _value(value: Any) -> str:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return str(value)


def journal_fields(event_dict: MutableMapping[str, Any]) -> dict[str, str]:
    """The journal fields one event becomes (exposed for tests)."""
    event = str(event_dict.get("event", ""))
    level = str(event_dict.get("level", "info"))
    rest = {
        k: v
        for k, v in event_dict.items()
        if k not in ("event", "level", "timestamp") and v is not None
    }
    summary = " ".join(f"{k}={_value(v)}" for k, v in rest.items())
    fields = {
        "MESSAGE": f"{event} {summary}".strip(),
        "MESSAGE_ID": message_id(event),
        "PRIORITY": str(_PRIORITY.get(level, 6)),
        "SYSLOG_IDENTIFIER": SYSLOG_IDENTIFIER,
        "EVENT": event,
    }
    for key, value in rest.items():
        fields[_field(key)] = _value(value)
    return fields


class JournaldSink:
    """Final processor: send the event to journald, or hand a line to stderr without one."""

    def __init__(self, use_journal: bool) -> None:
        self._send: Any = None
        if use_journal:
            from systemd import journal

            self._send = journal.send

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        if self._send is not None:
            fields = journal_fields(event_dict)
            message = fields.pop("MESSAGE")
            self._send(message, **fields)
            raise structlog.DropEvent
        rest = " ".join(
            f"{k}={_value(v)}" for k, v in event_dict.items() if k not in ("event", "level")
        )
        return f"opsbot: {event_dict.get('level', 'info')}: {event_dict.get('event')} {rest}"


def configure(*, verbose: bool = False, journal: bool | None = None) -> None:
    """Configure structlog for this process. ``journal=None`` means: if one is running."""
    if journal is None:
        journal = os.path.exists(_JOURNAL_SOCKET) and not os.environ.get("OPSBOT_NO_JOURNAL")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            JournaldSink(journal),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
