"""The diagnosis service's exceptions: what went wrong, said for the operator.

Every exception carries ``.message`` (one line saying what is wrong) and ``.hint`` (what
to do about it, or None). Foreign exceptions are translated where they occur, with
``raise ... from exc``, so a traceback is only ever shown for the unexpected.

::

    DiagnoseError                  base of everything below
    ├── UsageError                 the unit or symptom a run was asked about is not acceptable
    ├── ConfigError                opsbot.toml cannot be read or does not validate; the message
    │                              names the key path ("diagnose.health.web.url: ...")
    ├── ToolError                  a read tool could not answer (bad arguments, unit not found,
    │   │                          journal unreadable); the loop turns it into an error
    │   │                          observation for the policy, never an exception out of the loop
    │   └── CommandFailed          a subprocess could not start, timed out or exited non-zero
    ├── PolicyError                the policy could not propose an action (model endpoint down,
    │                              unusable answer); the run ends with a note of the evidence
    └── ExecutorError              the executor could not be asked
        ├── ExecutorUnavailable    its socket is missing, refuses, times out or hangs up
        └── ExecutorProtocolError  it answered, but not with a reply to a submission

``exit_status`` is what a command-line entry point exits with (sysexits.h), chosen so that
``Restart=on-failure`` retries what may pass (the executor being away) and an operator sees
the rest.
"""

from __future__ import annotations


class DiagnoseError(Exception):
    """Base of the diagnosis service's errors: ``message`` for the operator, ``hint``."""

    exit_status = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message} ({self.hint})"


class UsageError(DiagnoseError):
    """The unit or symptom given to a run is not acceptable."""

    exit_status = 64  # EX_USAGE


class ConfigError(DiagnoseError):
    """opsbot.toml cannot be read, is not TOML, or does not validate."""

    exit_status = 78  # EX_CONFIG


class ToolError(DiagnoseError):
    """A read tool could not answer; becomes an error observation for the policy."""

    exit_status = 70  # EX_SOFTWARE


class CommandFailed(ToolError):
    """A subprocess could not be started, timed out, or exited with a non-zero status."""


class PolicyError(DiagnoseError):
    """The policy could not propose an action (for example its model endpoint is down)."""

    exit_status = 69  # EX_UNAVAILABLE


class ExecutorError(DiagnoseError):
    """The executor could not be asked to take a plan."""

    exit_status = 69  # EX_UNAVAILABLE


class ExecutorUnavailable(ExecutorError):
    """The executor's socket is missing, refuses connections, times out or hangs up."""


class ExecutorProtocolError(ExecutorError):
    """The executor answered with something that is not a reply to a submission."""

    exit_status = 76  # EX_PROTOCOL
