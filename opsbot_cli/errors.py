"""The console's errors: one line on stderr, a hint, and an exit status.

    shared_io.errors.OpsbotError   base: .message, .hint, .exit_status
    └── ConsoleError               the console could not do what was asked (exit 1)
        └── UsageError             bad arguments, or the wrong user for the command (exit 2)

Errors of the executor (executor_svc.errors) and of the sockets (shared_io.errors) reach
the same handler in main.py with their own statuses.
"""

from shared_io.errors import OpsbotError


class ConsoleError(OpsbotError):
    exit_status = 1


class UsageError(ConsoleError):
    exit_status = 2
