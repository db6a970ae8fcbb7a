"""The states a stored plan moves through. Which transitions happen is the executor's code."""

from enum import StrEnum


class PlanState(StrEnum):
    PROPOSED = "PROPOSED"
    APPROVED = "APPROVED"
    APPLYING = "APPLYING"
    APPLIED = "APPLIED"
    FAILED = "FAILED"
    STALE = "STALE"
    EXPIRED = "EXPIRED"
    REJECTED = "REJECTED"
    INTERRUPTED = "INTERRUPTED"

    @property
    def is_final(self) -> bool:
        return self not in (PlanState.PROPOSED, PlanState.APPROVED, PlanState.APPLYING)
