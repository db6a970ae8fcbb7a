"""What a unit's journal says about why it is down, read the way an operator reads it.

Only the current *episode* counts: the lines newer than systemd's last success message
for the unit ("Started ...", "Reloaded ...", "Finished ..."). A process's own complaints
come after systemd's "Started" for it (for Type=simple units), so they are inside; an
error that a later successful start or reload superseded is outside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from diagnose_svc.tools import JournalLine, JournalTail
from shared_schema.text import printable

CauseKind = Literal[
    "address_in_use", "permission_denied", "missing_file", "config_error", "setup_failure"
]

# systemd's own messages (source "systemd") that end an episode, and those that matter.
_SUCCESS = re.compile(r"^(?:Started|Reloaded|Finished) ")
_RELOAD_FAILED = re.compile(r"^Reload failed for ")
_START_LIMIT = re.compile(r"Start request repeated too quickly")
_ATTEMPT_FAILED = re.compile(r"Main process exited|Failed with result")


@dataclass(frozen=True)
class Cause:
    """A line that shows a restart cannot help, and what a human must do instead."""

    kind: CauseKind
    line: JournalLine
    advice: str


# The causes a restart cannot fix, most specific first: an nginx "[emerg] bind() ...
# (98: Address already in use)" is a port conflict before it is a configuration error.
# Each advice is said to the operator; {unit} is the unit the line is about.
_RULES: tuple[tuple[CauseKind, re.Pattern[str], str], ...] = (
    # Another process holds the port: the service cannot bind until it is gone.
    (
        "address_in_use",
        re.compile(r"Address already in use"),
        "Another process holds an address {unit} needs. A human must find it (ss -ltnp) and "
        "stop it or change the port, then start {unit}.",
    ),
    # A file the service (or its ExecStart) needs is not readable or executable for it.
    (
        "permission_denied",
        re.compile(r"Permission denied"),
        "{unit} cannot access a file or directory it needs. A human must fix the permissions "
        "(or User=/Group= of the unit), then start {unit}.",
    ),
    # A missing program, EnvironmentFile= or included file: exec or configuration fails.
    (
        "missing_file",
        re.compile(r"No such file or directory|Failed to load environment files"),
        "A program or file {unit} needs is missing. A human must restore it or fix the path "
        "(ExecStart=, EnvironmentFile= or the configuration; systemctl daemon-reload after "
        "changing the unit), then start {unit}.",
    ),
    # The service's own configuration does not parse (nginx "[emerg]", "unknown directive",
    # "syntax error", "invalid ... directive/option/value" and the like).
    (
        "config_error",
        re.compile(
            r"\[emerg\]|(?i:syntax error|unknown directive|configuration file \S+ test failed)"
            r"|(?i:\binvalid\b.*\b(?:directive|config\w*|option|setting|parameter|argument"
            r"|value|key)\b)|(?i:\bconfig\w*\b.*\binvalid\b)"
        ),
        "The configuration of {unit} is invalid. A human must fix what that line names "
        "(for nginx, nginx -t shows it), then restart {unit}.",
    ),
    # systemd could not set the process up (exit statuses 200-243, systemd.exec(5)).
    (
        "setup_failure",
        re.compile(r"status=2(?:[0-3][0-9]|4[0-3])/[A-Z_]+"),
        "systemd could not set up the process of {unit} (see 'Process exit codes' in "
        "systemd.exec(5)). A human must fix the unit's settings, then start {unit}.",
    ),
)


def episode(tail: JournalTail) -> list[JournalLine]:
    """The lines of the current episode, newest first."""
    out: list[JournalLine] = []
    for line in reversed(tail.lines):
        if line.source == "systemd" and _SUCCESS.match(line.message):
            break
        out.append(line)
    return out


def unfixable_cause(tail: JournalTail) -> Cause | None:
    """The newest line of the episode that shows a cause a restart cannot fix, if any."""
    lines = episode(tail)
    for kind, pattern, advice in _RULES:
        for line in lines:
            if pattern.search(line.message):
                return Cause(kind=kind, line=line, advice=advice.format(unit=tail.unit))
    return None


def reload_failure(tail: JournalTail) -> JournalLine | None:
    """systemd's "Reload failed for ..." line, if the episode has one."""
    for line in episode(tail):
        if line.source == "systemd" and _RELOAD_FAILED.match(line.message):
            return line
    return None


def start_limit_line(tail: JournalTail) -> JournalLine | None:
    """systemd's "Start request repeated too quickly" line, if the episode has one.

    A unit whose automatic restarts hit the start limit keeps Result=exit-code (or
    signal); only this line tells, and start jobs are refused until reset-failed.
    """
    for line in episode(tail):
        if line.source == "systemd" and _START_LIMIT.search(line.message):
            return line
    return None


def repeated_failure(tail: JournalTail) -> JournalLine | None:
    """The service's own line that each of several failed attempts ended with, if any.

    Only meaningful together with a start limit: a process that says the same thing every
    time it is started and dies fails deterministically (a bad setting, a bad environment),
    so another start would only say it again. Looks at the whole tail, not the episode:
    each attempt is an episode of its own.
    """
    attempts: list[str] = []
    last_own: str | None = None
    newest: dict[str, JournalLine] = {}
    for line in tail.lines:
        if line.source == "systemd":
            if _ATTEMPT_FAILED.search(line.message) and last_own is not None:
                attempts.append(last_own)
                last_own = None
            continue
        last_own = line.message
        newest[line.message] = line
    for message in reversed(attempts):
        if attempts.count(message) >= 2:
            return newest[message]
    return None


def repeated_own_line(tail: JournalTail) -> JournalLine | None:
    """In a tail of the unit's own output: the newest line said more than once."""
    own = [line for line in tail.lines if line.source != "systemd"]
    messages = [line.message for line in own]
    for line in reversed(own):
        if messages.count(line.message) >= 2:
            return line
    return None


def quote(line: JournalLine, limit: int = 240) -> str:
    """A journal line as quoted in a note: message, who said it, when."""
    message = printable(line.message)
    if len(message) > limit:
        message = message[: limit - 1] + "…"
    return f'"{message}" ({line.source}, {line.time})'
