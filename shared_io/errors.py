"""The base of every opsbot error: the one line an operator needs, and what to do.

    OpsbotError                 .message, .hint, .exit_status
    ├── ConfigError             opsbot.toml cannot be read or is invalid (exit 78, EX_CONFIG)
    ├── CommandFailed           a program could not start, timed out or exited non-zero
    │   └── UnitStateError      systemd could not say a unit's state (systemctl show)
    ├── StoreError              a file opsbot keeps cannot be read or written (exit 74)
    └── SocketUnavailable       a Unix socket is missing, refuses, times out or hangs up
        └── PeerProtocolError   the other end answered, but not with a message we can read

Each unit's own tree derives from ``OpsbotError``, so one top-level handler per entry
point prints ``message`` and ``hint`` and exits with ``exit_status``; tracebacks are only
for the unexpected. Exit statuses follow sysexits.h, so ``Restart=`` and scripts can tell
a bad config (not worth restarting) from a daemon that is away.
"""

from __future__ import annotations

__all__ = [
    "CommandFailed",
    "ConfigError",
    "OpsbotError",
    "PeerProtocolError",
    "SocketUnavailable",
    "StoreError",
    "UnitStateError",
]


class OpsbotError(Exception):
    """An error said for the operator: ``message`` (one line) and ``hint`` (or None)."""

    exit_status = 1

    def __init__(
        self, message: str, hint: str | None = None, *, exit_status: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or None
        if exit_status is not None:  # this one error's status, not its class's
            self.exit_status = exit_status

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class ConfigError(OpsbotError):
    """opsbot.toml cannot be read, is not TOML, or does not validate."""

    exit_status = 78  # EX_CONFIG


class CommandFailed(OpsbotError):
    """A program could not be started, timed out, or exited with a non-zero status."""

    exit_status = 70  # EX_SOFTWARE


class StoreError(OpsbotError):
    """A file opsbot keeps (a plan, a status, an approval, the approver's state) cannot be
    read or written: the message names it and says why."""

    exit_status = 74  # EX_IOERR


class UnitStateError(CommandFailed):
    """systemd could not say what a unit's state is (``systemctl show`` failed, or
    printed what opsbot cannot read): the state is unknown, never a state."""


class SocketUnavailable(OpsbotError):
    """A Unix socket is missing, refuses connections, times out or hangs up.

    ``path`` is the socket; ``reason`` one of ``missing``, ``refused``, ``permission``,
    ``busy`` (its queue of connections is full), ``timeout``, ``closed`` or ``io``, so
    that a caller can choose its own hint.
    """

    exit_status = 69  # EX_UNAVAILABLE

    def __init__(self, path: str, reason: str, what: str, hint: str | None = None) -> None:
        super().__init__(f"{path}: {what}", hint)
        self.path = path
        self.reason = reason
        self.what = what


class PeerProtocolError(SocketUnavailable):
    """The other end answered with more than a message may hold, or with a broken one."""

    exit_status = 76  # EX_PROTOCOL
