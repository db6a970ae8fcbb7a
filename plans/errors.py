"""What goes wrong with a stored plan, said for the operator. Each error carries the one
line an operator needs.

    shared_io.errors.OpsbotError  base: .message, .hint, .exit_status
    ├── shared_io.errors.StoreError   the state directory cannot be read or written (exit 74)
    └── PlanError                 a plan's own
        ├── UsageError            the command line or the caller is wrong (exit 2)
        ├── PlanNotFound          no stored plan with that id (exit 1)
        ├── TamperedPlan          a stored plan's bytes no longer match its fingerprint (exit 5)
        ├── PlanRefused           the plan's state or a rejection forbids it (exit 5)
        │   └── TooManyWaiting    too many plans wait for approval to store one more
        ├── CalendarError         systemd-analyze refused an apply window's calendar (exit 78)
        └── ApprovalRefused       an approval failed a check; the message says which (exit 5)
            ├── ApprovalExpired   it did, but its time is over: the plan expires with it
            └── NoApplyWindow     no apply window opens within 7 days: nothing to approve for

A bad config is shared_io.errors.ConfigError (exit 78). The console's statuses are
shared_io/exit_codes.py; the daemons' own follow sysexits.h, so that ``Restart=`` and
scripts can tell a bad config (EX_CONFIG, not worth restarting) from an I/O failure
(EX_IOERR). Who reads the store catches ``OpsbotError``: a plan refused and a disk that
failed are both said, never raised past the operator.
"""

from shared_io.errors import OpsbotError, StoreError
from shared_io.exit_codes import REFUSED

__all__ = [
    "ApprovalExpired",
    "ApprovalRefused",
    "CalendarError",
    "NoApplyWindow",
    "PlanError",
    "PlanNotFound",
    "PlanRefused",
    "StoreError",
    "TamperedPlan",
    "TooManyWaiting",
    "UsageError",
]


class PlanError(OpsbotError):
    exit_status = 1


class UsageError(PlanError):
    exit_status = 2


class PlanNotFound(PlanError):
    exit_status = 1


class TamperedPlan(PlanError):
    exit_status = REFUSED  # the plan is refused, the store itself is fine


class PlanRefused(PlanError):
    exit_status = REFUSED


class TooManyWaiting(PlanRefused):
    """The store holds as many plans waiting for approval as the policy allows (from
    this submitter, or in all): one more is refused until some are decided or expire."""


class ApprovalRefused(PlanError):
    exit_status = REFUSED


class ApprovalExpired(ApprovalRefused):
    pass


class CalendarError(PlanError):
    exit_status = 78  # EX_CONFIG: [executor.apply_window] is wrong


class NoApplyWindow(ApprovalRefused):
    pass
