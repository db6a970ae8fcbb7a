"""The console's errors: one line on stderr, a hint, and an exit status.

    shared_io.errors.OpsbotError   base: .message, .hint, .exit_status
    └── ConsoleError               the console could not do what was asked (exit 1)
        └── UsageError             bad arguments, or the wrong user for the command (exit 2)
            └── RootRequired       a root-only command run by another user; main.py's
                                   hint repeats the command line with sudo

Errors of the executor (plans.errors) and of the sockets (shared_io.errors) reach
the same handler in main.py with their own statuses. What comes from outside that tree
(``PermissionError`` and other ``OSError`` on the files a command reads, an unexpected
exception) is translated there, at the boundary, by :func:`from_os_error` and
:func:`internal_error`.
"""

from __future__ import annotations

import os
import shlex

from shared_io.errors import OpsbotError


class ConsoleError(OpsbotError):
    exit_status = 1


class UsageError(ConsoleError):
    exit_status = 2


class RootRequired(UsageError):
    """A root-only command run by another user."""


def again_as_root(argv: list[str]) -> str:
    """The command line the user typed, as root: ``sudo opsbot ARGV``."""
    return shlex.join(["sudo", "opsbot", *argv])


def from_os_error(exc: OSError, argv: list[str]) -> ConsoleError:
    """``exc`` raised while running ``opsbot ARGV``, said as what to do about it.

    Permission denied to anyone but root: run the same command as root (the files of the
    executor, the approvals and the polkit rules are root's or the daemons' alone; group
    opsbot-operators grants the sockets, not the files). Otherwise: which file, and why.
    """
    where = str(exc.filename) if exc.filename is not None else "a file opsbot needs"
    what = exc.strerror or type(exc).__name__
    again = again_as_root(argv)
    look = f"`ls -ld {shlex.quote(where)}`" if exc.filename is not None else "its paths"
    if isinstance(exc, PermissionError):
        if os.geteuid() != 0:
            return ConsoleError(f"permission denied: {where}", hint=f"run it as root: {again}")
        return ConsoleError(
            f"permission denied, even to root: {where}",
            hint=f"is it on a read-only file system, or immutable? check {look}",
        )
    return ConsoleError(
        f"cannot use {where}: {what}",
        hint=f"is it what opsbot expects there? check {look}",
    )


def internal_error(exc: Exception) -> ConsoleError:
    """An exception nobody foresaw: one line naming it, and how to see the traceback."""
    text = " ".join(str(exc).split())[:200]
    said = "".join(c if c.isprintable() else "?" for c in text) or "(no message)"
    return ConsoleError(
        f"internal error: {type(exc).__name__}: {said}",
        hint="a bug in opsbot: OPSBOT_DEBUG=1 shows the traceback for a report",
    )
