"""The plan state machine. Which transitions exist is decided here, and only here.

    PROPOSED -> APPROVED -> APPLYING -> APPLIED | FAILED | INTERRUPTED
    APPLIED -> VERIFIED | UNRESOLVED      (opsbot-verify: did the service come back?)
    PROPOSED -> EXPIRED | REJECTED
    APPROVED -> STALE | EXPIRED | REJECTED

INTERRUPTED (an apply died half-way) is final: it is never resumed by itself; the
operator needs a new diagnosis and a new approval.
"""

from datetime import datetime

from plans.records import StatusRecord, Transition
from shared_schema import PlanState

__all__ = ["ALLOWED", "TransitionRefused", "transition"]

S = PlanState
ALLOWED: dict[PlanState, frozenset[PlanState]] = {
    S.PROPOSED: frozenset({S.APPROVED, S.EXPIRED, S.REJECTED}),
    S.APPROVED: frozenset({S.APPLYING, S.STALE, S.EXPIRED, S.REJECTED}),
    S.APPLYING: frozenset({S.APPLIED, S.FAILED, S.INTERRUPTED}),
    S.APPLIED: frozenset({S.VERIFIED, S.UNRESOLVED}),
}


class TransitionRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def transition(
    status: StatusRecord,
    new: PlanState,
    *,
    by: str,
    at: datetime,
    reason: str = "",
    **update: object,
) -> StatusRecord:
    """``status`` moved to ``new``; TransitionRefused if the machine has no such edge."""
    if new not in ALLOWED.get(status.state, frozenset()):
        raise TransitionRefused(f"plan {status.plan_id} is {status.state}; it cannot become {new}")
    history = [*status.history, Transition(state=new, at=at, by=by, reason=reason)]
    return status.model_copy(update={"state": new, "history": history, "refusal": "", **update})
