"""What the executor keeps on disk, per plan: the record (immutable) and its status."""

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from shared_schema import PlanState, StepRecord, Verification
from shared_schema._model import Model
from shared_schema.executor_socket import WindowWait
from shared_schema.units import PlanId, Sha256Hex

if TYPE_CHECKING:
    from shared_schema.config import ExecutorPolicy

__all__ = ["PlanRecord", "Provenance", "StatusRecord", "Transition", "plan_expiry"]


class Provenance(Model):
    """Who submitted a plan, as the kernel told us (SO_PEERCRED), not as the client said."""

    uid: int
    user: str
    pid: int
    run_id: str | None = None
    symptom: str | None = None
    #: What diagnosis said it saw (SubmitPlan.evidence): words for the approver, not proof.
    evidence: list[str] = []


class PlanRecord(Model):
    """plans/<id>.json: the exact bytes that were fingerprinted, and where they came from.

    ``plan`` holds the canonical JSON text; ``sha256`` is its fingerprint. Reading a
    record re-hashes ``plan``, so an edited file is caught (TamperedPlan).
    """

    v: Literal[1] = 1
    plan_id: PlanId
    sha256: Sha256Hex
    plan: str
    submitted_at: datetime
    submitted_by: Provenance
    #: The incident this plan belongs to, set by the executor (plans/incidents.py): the
    #: first plan's id for a follow-up; None for a first plan, whose own id it is.
    incident: PlanId | None = None

    @property
    def incident_id(self) -> str:
        return self.incident or self.plan_id


class Transition(Model):
    state: PlanState
    at: datetime
    by: str
    reason: str = ""


class StatusRecord(Model):
    """status/<id>.json: where a plan is in its life, and what each step did."""

    v: Literal[1] = 1
    plan_id: PlanId
    state: PlanState
    history: list[Transition] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    approved_by: str = ""
    #: The standing approval rule that approved it ([[approve.rule]]), never in
    #: ``approved_by``: a rule named like a person is not one.
    approved_by_rule: str = ""
    #: The sha256 of that rule as it stood when it approved (shared_schema.standing).
    rule_sha256: str = ""
    refusal: str = ""
    #: What opsbot-verify saw after the last step (VERIFIED / UNRESOLVED).
    verification: Verification | None = None
    #: An APPROVED plan outside its apply window: when the window opens (the apply
    #: writes it when that changes; ``opsbot show`` and ``opsbot plans`` say it).
    waits_for_window: WindowWait | None = None

    @property
    def reason(self) -> str:
        return self.history[-1].reason if self.history else ""


def plan_expiry(record: PlanRecord, policy: "ExecutorPolicy") -> datetime:
    """When a stored plan stops waiting for approval (``plan_ttl_seconds`` after it was
    submitted)."""
    return record.submitted_at + timedelta(seconds=policy.plan_ttl_seconds)
