"""The gate: whether a stored plan may run now, decided once.

:func:`decide` is the one decision, made the same way by the apply that runs plans
(executor_svc.apply) and by ``opsbot apply --dry-run`` that only says what it would do
(plans.preview). It returns one of a few small types, each matched once by each of them:

* :class:`Skip`: the plan is final already;
* :class:`Interrupted`: an apply died in it (APPLYING): it becomes INTERRUPTED, never
  resumed;
* :class:`Expire`: too old (``plan_ttl_seconds``), or its approval ran out;
* :class:`AwaitApproval`: PROPOSED, nobody approved it yet;
* :class:`Refuse`: its stored bytes no longer hash to its fingerprint, root rejected it,
  or its approval failed a check (plans.approvals, its lifetime included): it keeps its
  state and never runs on that approval;
* :class:`Stale`: today's policy, or the restart budget, refuses a step;
* :class:`AwaitWindow`: approved, outside every ``[executor.apply_window]`` (and not
  approved with ``--now``): it waits in APPROVED, and the apply in the window decides
  again;
* :class:`Run`: it may run, with this approval.

Right before the steps, :func:`precondition_mismatch` checks each step's ``expect``
against the live state. Root's own decisions (approve, reject) are plans.decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from plans.apply_queue import WAITS_FOR_APPROVAL
from plans.approvals import CheckedApproval, check_approval, rejection_reason
from plans.errors import ApprovalExpired, ApprovalRefused, TamperedPlan
from plans.policy import policy_errors, step_argv
from plans.preconditions import expectation_mismatch
from plans.records import PlanRecord, StatusRecord, plan_expiry
from plans.store import PlanStore
from plans.verification import history_errors
from plans.windows import (
    Analyzer,
    WindowState,
    lifetime_ceiling,
    span_text,
    systemd_analyze,
    window_state,
)
from shared_io.errors import UnitStateError
from shared_io.unit_show import UnitState
from shared_schema import Approval, ExecutorPolicy, Plan, PlanState
from shared_schema.executor_socket import WindowWait

__all__ = [
    "INTERRUPTED_REASON",
    "AwaitApproval",
    "AwaitWindow",
    "Decision",
    "Expire",
    "Interrupted",
    "NotFinal",
    "Refuse",
    "Run",
    "Skip",
    "Stale",
    "decide",
    "precondition_mismatch",
    "waits_text",
    "window_wait",
]

INTERRUPTED_REASON = "an earlier apply stopped half-way; it is never resumed: diagnose again"


@dataclass(frozen=True)
class Skip:
    """Final already: nothing to do."""

    kind: ClassVar[str] = "skip"


@dataclass(frozen=True)
class Interrupted:
    """An apply died while it ran this plan's steps."""

    kind: ClassVar[str] = "interrupt"
    reason: str = INTERRUPTED_REASON


@dataclass(frozen=True)
class _Judged:
    """A decision about a plan whose bytes were read: the plan and each step's argv
    (None and [] where the plan could not be read)."""

    reason: str
    plan: Plan | None = None
    argv: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class Expire(_Judged):
    """Too old, or its approval ran out: it becomes EXPIRED."""

    kind: ClassVar[str] = "expire"


@dataclass(frozen=True)
class Refuse(_Judged):
    """An approval or the stored bytes failed a check, or root rejected it: it keeps its
    state and does not run."""

    kind: ClassVar[str] = "refuse"


@dataclass(frozen=True)
class Stale(_Judged):
    """Today's policy or the restart budget refuses a step: it becomes STALE."""

    kind: ClassVar[str] = "stale"


@dataclass(frozen=True)
class AwaitApproval:
    """PROPOSED: it waits for someone to approve it."""

    kind: ClassVar[str] = "wait"
    plan: Plan
    argv: list[list[str]]
    reason: str = WAITS_FOR_APPROVAL


@dataclass(frozen=True)
class AwaitWindow:
    """Approved, and no apply window is open: it waits in APPROVED until one is."""

    kind: ClassVar[str] = "wait"
    plan: Plan
    argv: list[list[str]]
    window: WindowState
    reason: str


@dataclass(frozen=True)
class Run:
    """It may run now, with this approval."""

    kind: ClassVar[str] = "run"
    plan: Plan
    argv: list[list[str]]
    approval: CheckedApproval
    reason: str = ""


#: Every decision about a plan that is not final yet.
NotFinal = Interrupted | Expire | Refuse | Stale | AwaitApproval | AwaitWindow | Run
Decision = Skip | NotFinal


def window_wait(state: WindowState) -> WindowWait | None:
    """What the status record keeps of a closed window (None: it is open)."""
    return None if state.open else WindowWait(opens_at=state.opens_at, closes_at=state.closes_at)


def waits_text(state: WindowState) -> str:
    """Why an approved plan does not run now, its window closed."""
    if state.opens_at is None or state.closes_at is None:
        return (
            "approved; waits for its apply window, but none opens within 7 days: approve it "
            "with `opsbot approve --now`, or change [executor.apply_window]"
        )
    return (
        f"approved; waits for its apply window, {span_text(state.opens_at, state.closes_at)} "
        "(its preconditions are checked then)"
    )


def decide(
    store: PlanStore,
    record: PlanRecord,
    status: StatusRecord,
    *,
    approvals_dir: Path,
    policy: ExecutorPolicy,
    now: datetime,
    analyze: Analyzer = systemd_analyze,
) -> Decision:
    """May the plan of ``record`` run now? (See the module docstring.) ``analyze``
    evaluates the apply windows' calendar expressions (systemd-analyze)."""
    if status.state is PlanState.APPLYING:
        return Interrupted()
    if status.state.is_final:
        return Skip()
    if now >= plan_expiry(record, policy):  # the instant every other guard calls expired
        return Expire(f"older than plan_ttl_seconds={policy.plan_ttl_seconds}")
    try:
        plan = store.verified_plan(record)
    except TamperedPlan as exc:
        return Refuse(exc.message)
    argv = step_argv(plan)
    if status.state is PlanState.PROPOSED:
        return AwaitApproval(plan, argv)
    rejected = rejection_reason(approvals_dir, record.plan_id)
    if rejected:
        return Refuse(f"{rejected}; it never runs", plan, argv)
    try:
        checked = _approval(store, record, approvals_dir, policy, now, analyze)
    except ApprovalExpired as exc:
        return Expire(exc.message, plan, argv)
    except ApprovalRefused as exc:
        return Refuse(exc.message, plan, argv)
    errors = policy_errors(plan, policy)
    if errors:
        reason = "today's policy refuses it: " + "; ".join(str(e) for e in errors)
        return Stale(reason, plan, argv)
    if policy.apply_window and not checked.approval.override_window:
        state = window_state(policy.apply_window, now, analyze=analyze)
        if not state.open:
            # The budget is judged when it may run: it may have recovered by then.
            return AwaitWindow(plan, argv, state, waits_text(state))
    # The budget again, now: plans approved together (or since this one was submitted)
    # may have spent it meanwhile.
    spent = history_errors(plan, store, policy, now)
    if spent:
        return Stale("; ".join(e.message for e in spent), plan, argv)
    return Run(plan, argv, checked)


def _approval(
    store: PlanStore,
    record: PlanRecord,
    approvals_dir: Path,
    policy: ExecutorPolicy,
    now: datetime,
    analyze: Analyzer,
) -> CheckedApproval:
    """The approval of ``record`` if it passes every check (plans.approvals), its
    lifetime bounded by the apply windows where they are set."""
    windows = policy.apply_window
    ttl = policy.approval_ttl_seconds

    def ceiling(approval: Approval) -> float:
        return lifetime_ceiling(
            windows, approval.approved_at, ttl, override=approval.override_window, analyze=analyze
        )

    return check_approval(
        approvals_dir,
        record,
        store,
        now,
        ttl_ceiling_seconds=ttl,
        lifetime_ceiling=ceiling if windows else None,
    )


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
