"""The gate: whether a stored plan may run now, and the two ways root changes that.

:func:`decide` is the one decision, made the same way by the apply that runs plans and by
``opsbot apply --dry-run`` that only says what it would do: a plan left APPLYING by a
dead apply is INTERRUPTED; an old one EXPIRED; a PROPOSED one waits; an APPROVED one runs
only if its stored bytes still hash to its fingerprint, its approval passes every check
(executor_svc.approvals) and today's policy still allows every step. Right before the
steps, :func:`precondition_mismatch` checks each step's ``expect`` against the live state.

:func:`approve` and :func:`reject` are what root's ``opsbot approve`` / ``reject`` do:
under the apply lock, so that no apply reads a half-made decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import structlog

from executor_svc.approvals import CheckedApproval, check_approval, write_approval
from executor_svc.errors import ApprovalExpired, ApprovalRefused, TamperedPlan, UsageError
from executor_svc.policy import policy_errors, step_argv
from executor_svc.records import PlanRecord, StatusRecord
from executor_svc.states import TransitionRefused, transition
from executor_svc.store import PlanStore
from executor_svc.unit_state import UnitState, UnitStateError, expectation_mismatch
from shared_schema import Approval, ExecutorPolicy, Plan, PlanState

log = structlog.get_logger("opsbot.executor.gate")

Action = Literal["skip", "interrupt", "expire", "wait", "refuse", "stale", "run"]
INTERRUPTED_REASON = "an earlier apply stopped half-way; it is never resumed: diagnose again"


@dataclass(frozen=True)
class Decision:
    """What today's checks say about one stored plan.

    ``skip``: final already; ``interrupt``: an apply died in it; ``expire``: too old or its
    approval ran out; ``wait``: not approved; ``refuse``: an approval or the stored bytes
    failed a check (the plan keeps its state); ``stale``: today's policy refuses a step;
    ``run``: it may run, with this approval.
    """

    action: Action
    reason: str = ""
    plan: Plan | None = None
    argv: list[list[str]] = field(default_factory=list)
    approval: CheckedApproval | None = None


def decide(
    store: PlanStore,
    record: PlanRecord,
    status: StatusRecord,
    *,
    approvals_dir: Path,
    policy: ExecutorPolicy,
    now: datetime,
) -> Decision:
    """May the plan of ``record`` run now? (See the module docstring.)"""
    if status.state is PlanState.APPLYING:
        return Decision("interrupt", INTERRUPTED_REASON)
    if status.state.is_final:
        return Decision("skip")
    if now - record.submitted_at > timedelta(seconds=policy.plan_ttl_seconds):
        return Decision("expire", f"older than plan_ttl_seconds={policy.plan_ttl_seconds}")
    try:
        plan = store.verified_plan(record)
    except TamperedPlan as exc:
        return Decision("refuse", exc.message)
    argv = step_argv(plan)
    if status.state is PlanState.PROPOSED:
        return Decision("wait", "waiting for approval", plan, argv)
    try:
        checked = check_approval(approvals_dir, record, store, now)
    except ApprovalExpired as exc:
        return Decision("expire", exc.message, plan, argv)
    except ApprovalRefused as exc:
        return Decision("refuse", exc.message, plan, argv)
    errors = policy_errors(plan, policy)
    if errors:
        reason = "today's policy refuses it: " + "; ".join(str(e) for e in errors)
        return Decision("stale", reason, plan, argv)
    return Decision("run", "", plan, argv, checked)


def precondition_mismatch(plan: Plan, read_state: Callable[[str], UnitState]) -> str | None:
    """Why the live state does not meet a step's ``expect``, or None when every step's does."""
    for index, step in enumerate(plan.steps):
        if step.expect is None:
            continue
        try:
            state = read_state(step.args.unit)
        except UnitStateError as exc:
            return f"step {index + 1}: {exc.message}"
        mismatch = expectation_mismatch(step.expect, state)
        if mismatch:
            return f"step {index + 1}: {mismatch}"
    return None


# -- root's decisions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Approved:
    record: PlanRecord
    plan: Plan
    approval: Approval


def approve(
    store: PlanStore,
    approvals_dir: Path,
    plan_id: str,
    *,
    approver: str,
    now: datetime,
    ttl_seconds: int,
) -> Approved:
    """Write the approval of ``plan_id`` bound to its sha256, and mark it APPROVED.

    Only a PROPOSED plan (or an APPROVED one, whose approval is renewed) can be approved.
    """
    with store.apply_lock():
        record = store.load(plan_id)
        plan = store.verified_plan(record)
        status = store.status(plan_id, record)
        if status.state not in (PlanState.PROPOSED, PlanState.APPROVED):
            raise UsageError(
                f"plan {plan_id} is {status.state}; only PROPOSED plans can be approved",
                hint="diagnose again for a new plan",
            )
        approval = write_approval(approvals_dir, record, approver, now, ttl_seconds)
        if status.state is PlanState.PROPOSED:
            try:
                status = transition(
                    status, PlanState.APPROVED, by=approver, at=now, approved_by=approver
                )
            except TransitionRefused as exc:
                raise UsageError(exc.message) from exc
            store.save_status(status)
    log.info(
        "plan.approved",
        plan_id=plan_id,
        sha256=record.sha256,
        approver=approver,
        expires_at=approval.expires_at.isoformat(),
    )
    return Approved(record, plan, approval)


def reject(
    store: PlanStore, plan_id: str, *, by: str, now: datetime, reason: str | None
) -> StatusRecord:
    """Mark ``plan_id`` REJECTED: it will never run."""
    with store.apply_lock():
        record = store.load(plan_id)
        status = store.status(plan_id, record)
        try:
            status = transition(
                status, PlanState.REJECTED, by=by, at=now, reason=reason or "rejected by operator"
            )
        except TransitionRefused as exc:
            raise UsageError(exc.message) from exc
        store.save_status(status)
    log.info("plan.rejected", plan_id=plan_id, sha256=record.sha256, approver=by, reason=reason)
    return status
