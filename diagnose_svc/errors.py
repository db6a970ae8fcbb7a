"""The diagnosis service's exceptions: what went wrong, said for the operator.

Every exception carries ``.message`` (one line saying what is wrong) and ``.hint`` (what
to do about it, or None). Foreign exceptions are translated where they occur, with
``raise ... from exc``, so a traceback is only ever shown for the unexpected.

::

    shared_io.errors.OpsbotError   base of every opsbot error
    ├── ConfigError                opsbot.toml cannot be read or does not validate; the message
    │                              names the file and the key path (shared_io.errors)
    ├── CommandFailed              a subprocess could not start, timed out or exited non-zero
    │                              (shared_io.errors; a read tool's failure, like ToolError)
    └── DiagnoseError              base of the service's own
        ├── UsageError             the unit or symptom a run was asked about is not acceptable
        ├── ToolError              a read tool could not answer (bad arguments, unit not found,
        │                          journal unreadable); the loop turns it into an error
        │                          observation for the policy, never an exception out of the loop
        ├── PolicyError            the policy could not propose an action (model endpoint down,
        │                          unusable answer); the run ends with a note of the evidence
        └── ExecutorError          the executor could not be asked
            ├── ExecutorUnavailable    its socket is missing, refuses, times out or hangs up
            └── ExecutorProtocolError  it answered, but not with a reply to a submission

``exit_status`` is what a command-line entry point exits with (sysexits.h), chosen so that
``Restart=on-failure`` retries what may pass (the executor being away) and an operator sees
the rest.
"""

from __future__ import annotations

from shared_io.errors import CommandFailed, ConfigError, OpsbotError

__all__ = [
    "CommandFailed",
    "ConfigError",
    "DiagnoseError",
    "ExecutorError",
    "ExecutorProtocolError",
    "ExecutorUnavailable",
    "PolicyError",
    "ToolError",
    "UsageError",
]


class DiagnoseError(OpsbotError):
    """Base of the diagnosis service's own errors."""

    exit_status = 1


class UsageError(DiagnoseError):
    """The unit or symptom given to a run is not acceptable."""

    exit_status = 64  # EX_USAGE


class ToolError(DiagnoseError):
    """A read tool could not answer; becomes an error observation for the policy."""

    exit_status = 70  # EX_SOFTWARE


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
