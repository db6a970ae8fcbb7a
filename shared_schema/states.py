"""The states a stored plan moves through. Which transitions happen is the executor's code."""

from enum import StrEnum

__all__ = ["PlanState"]


class PlanState(StrEnum):
    PROPOSED = "PROPOSED"
    APPROVED = "APPROVED"
    APPLYING = "APPLYING"
    APPLIED = "APPLIED"  # every step ran; opsbot-verify has not said yet if it worked
    VERIFIED = "VERIFIED"  # ... and the service came back and held for the settle window
    UNRESOLVED = "UNRESOLVED"  # ... and the service is still down (or failed again)
    FAILED = "FAILED"
    STALE = "STALE"
    EXPIRED = "EXPIRED"
    REJECTED = "REJECTED"
    INTERRUPTED = "INTERRUPTED"

    @property
    def is_final(self) -> bool:
        """No step will run any more (APPLIED may still be verified)."""
        return self not in (PlanState.PROPOSED, PlanState.APPROVED, PlanState.APPLYING)

    @property
    def is_failure(self) -> bool:
        """For scripts: the plan did not fix what it was for."""
        return self in (
            PlanState.FAILED,
            PlanState.UNRESOLVED,
            PlanState.STALE,
            PlanState.EXPIRED,
            PlanState.INTERRUPTED,
        )
