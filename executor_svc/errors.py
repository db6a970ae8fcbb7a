"""The executor's exceptions. Each carries the one line an operator needs.

    ExecutorError                 base: .message, .hint, .exit_status
    ├── UsageError                the command line or the caller is wrong (exit 2)
    ├── ConfigError               /etc/opsbot/opsbot.toml is unreadable or invalid (exit 78)
    ├── PlanNotFound              no stored plan with that id (exit 1)
    ├── StoreError                the state directory cannot be read or written (exit 74)
    │   └── TamperedPlan          a stored plan's bytes no longer match its fingerprint
    └── ApprovalRefused           an approval failed a check; .reason says which (exit 1)

Exit statuses follow sysexits.h so that ``Restart=`` and scripts can tell a bad config
(EX_CONFIG, not worth restarting) from an I/O failure (EX_IOERR).
"""


class ExecutorError(Exception):
    exit_status = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(ExecutorError):
    exit_status = 2


class ConfigError(ExecutorError):
    exit_status = 78


class PlanNotFound(ExecutorError):
    exit_status = 1


class StoreError(ExecutorError):
    exit_status = 74


class TamperedPlan(StoreError):
    pass


class ApprovalRefused(ExecutorError):
    pass
