"""Logging, configured once per process and the same on every unit: structlog events to
journald, with fields an operator can filter on and a ``MESSAGE_ID`` per event name.

Events are named verbs (``plan.accepted``, ``step.finished``, ``diagnose.step``); their
keys become upper-case journal fields, with these names on every unit:

    plan_id -> PLAN_ID     sha256 -> PLAN_SHA256    run_id -> RUN_ID     step -> STEP
    argv -> ARGV           exit_status -> EXIT_STATUS    event -> EVENT

so that ``journalctl PLAN_ID=<id>`` tells a plan's story across units and
``journalctl RUN_ID=<id>`` one diagnosis's. A list of strings (an argv) is written
shell-quoted, for copy and paste. ``SYSLOG_IDENTIFIER`` names the unit that logs
(``opsbot-executor``, ``opsbot-apply``, ``opsbot-diagnose``, ``opsbot`` for the console).

Without a journal (a developer's shell, or ``OPSBOT_NO_JOURNAL=1``), events go to stderr
as ``identifier: level: event key=value ...`` lines.
"""

from __future__ import annotations

import functools
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

JOURNAL_SOCKET = "/run/systemd/journal/socket"
#: Keys whose journal field is not simply their upper-case name.
FIELD_NAMES = {"sha256": "PLAN_SHA256", "event": "EVENT"}
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}
_BAD_FIELD_CHARS = re.compile(r"[^A-Z0-9_]")
_NOT_FIELDS = ("event", "level", "timestamp")


@functools.lru_cache(maxsize=512)
def message_id(event: str) -> str:
    """The journal MESSAGE_ID of an event name: a stable 128-bit id derived from it, so
    ``journalctl MESSAGE_ID=...`` selects one kind of event."""
    return uuid.UUID(bytes=hashlib.sha256(f"opsbot:{event}".encode()).digest()[:16]).hex


def field_name(key: str) -> str:
    """The journal field a key becomes: A-Z, 0-9 and _, never starting with _."""
    name = FIELD_NAMES.get(key) or _BAD_FIELD_CHARS.sub("_", key.upper())
    return name.lstrip("_") or "FIELD"


def field_value(value: Any) -> str:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return str(value)


def journal_fields(event_dict: MutableMapping[str, Any], identifier: str) -> dict[str, str]:
    """The journal fields one event becomes."""
    event = str(event_dict.get("event", ""))
    level = str(event_dict.get("level", "info"))
    rest = {k: v for k, v in event_dict.items() if k not in _NOT_FIELDS and v is not None}
    summary = " ".join(f"{k}={field_value(v)}" for k, v in rest.items())
    fields = {
        "MESSAGE": f"{event} {summary}".strip(),
        "MESSAGE_ID": message_id(event),
        "PRIORITY": str(_PRIORITY.get(level, 6)),
        "SYSLOG_IDENTIFIER": identifier,
        "EVENT": event,
    }
    for key, value in rest.items():
        fields[field_name(key)] = field_value(value)
    return fields


#: Where every entry is sent from, said once: python-systemd otherwise reads it off the
#: stack for each entry (a stat of each source file on it), which is always this sink.
SENT_FROM = {"CODE_FILE": __file__, "CODE_FUNC": "JournaldSink.__call__"}


class JournaldSink:
    """The last processor: send the event to journald (an entry about a plan chained,
    shared_io.audit_chain, when this process writes a chain), or render a stderr line."""

    def __init__(self, identifier: str, use_journal: bool) -> None:
        self.identifier = identifier
        self._send: Any = None
        self._chain: Any = None
        if use_journal:
            from systemd import journal

            from shared_io.audit_chain import writer_chain

            self._send = journal.send
            self._chain = writer_chain(identifier)

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        if self._send is not None:
            fields = journal_fields(event_dict, self.identifier)
            if self._chain is not None and "PLAN_ID" in fields:
                with self._chain.link(fields):
                    self._send(fields.pop("MESSAGE"), **(SENT_FROM | fields))
            else:
                self._send(fields.pop("MESSAGE"), **(SENT_FROM | fields))
            raise structlog.DropEvent
        rest = " ".join(
            f"{k}={field_value(v)}"
            for k, v in event_dict.items()
            if k not in _NOT_FIELDS and v is not None
        )
        level = event_dict.get("level", "info")
        return f"{self.identifier}: {level}: {event_dict.get('event')} {rest}".rstrip()


def journal_available() -> bool:
    return os.path.exists(JOURNAL_SOCKET) and not os.environ.get("OPSBOT_NO_JOURNAL")


def configure(identifier: str, *, verbose: bool = False, journal: bool | None = None) -> None:
    """Configure structlog for this process, logging as ``identifier``.

    ``journal=None`` means: to journald if one is running here.
    """
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            JournaldSink(identifier, journal_available() if journal is None else journal),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.INFO
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str, identifier: str) -> Any:
    """structlog's logger ``name`` for a process that loads structlog only when it has
    something to log (``opsbot apply`` with nothing approved, ``opsbot archive-approvals``
    with nothing to move, load none of it): logging is configured here, as
    ``identifier``, unless the process configured it already."""
    if not structlog.is_configured():
        configure(identifier)
    return structlog.get_logger(name)
