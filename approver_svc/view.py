"""A stored plan as the approval page and the notification show it (PlanView): each
step's argv exactly as it runs, its precondition in words beside the unit's live state,
what diagnosis saw, the full sha256, and the times that matter to the approver. After a
decision, what it was about (PlanBrief) and where the plan is now (Followed)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from plans import (
    Analyzer,
    PlanError,
    PlanRecord,
    StatusRecord,
    approval_expiry,
    expect_words,
    plan_expiry,
    runs_when,
    step_argv,
    systemd_analyze,
)
from shared_io.errors import UnitStateError
from shared_io.unit_show import read_unit_state
from shared_schema import ExecutorPolicy, Plan, PlanState
from shared_schema.approver_socket import Decision, Followed, PlanBrief, PlanView, StepView

#: A unit's live state in words, or why it could not be read (never an error).
ReadState = Callable[[str], str]
LINE = 2000
EVIDENCE_LINES = 2
EVIDENCE_CHARS = 300


def live_state(unit: str) -> str:
    """``app.service is failed/failed (load: loaded)``, as systemd says now; where it
    cannot say, ``live state unknown: WHY`` (never shown as a state)."""
    try:
        return read_unit_state(unit, timeout=5).describe()
    except UnitStateError as exc:
        return f"live state unknown: {' '.join(exc.message.split())}"[:LINE]


def when_approved(
    policy: ExecutorPolicy, now: datetime, analyze: Analyzer = systemd_analyze
) -> tuple[datetime, str]:
    """When an approval made ``now`` would expire (what ``gate.approve`` writes) and when
    the plan would then run, in words (plans.windows). A window that cannot be
    computed is said in the words, not raised: the page still shows the plan."""
    try:
        expires = approval_expiry(
            policy.apply_window, now, policy.approval_ttl_seconds, analyze=analyze
        )
        runs = runs_when(policy.apply_window, now, analyze=analyze)
    except PlanError as exc:
        return now + timedelta(seconds=policy.approval_ttl_seconds), exc.message[:LINE]
    return expires, runs


def evidence(record: PlanRecord) -> list[str]:
    """What diagnosis saw, in two lines at most: the evidence it sent with the plan, else
    the symptom it was asked about."""
    lines = list(record.submitted_by.evidence) or (
        [record.submitted_by.symptom] if record.submitted_by.symptom else []
    )
    return [line[:EVIDENCE_CHARS] for line in lines[:EVIDENCE_LINES]]


def plan_view(
    record: PlanRecord,
    status: StatusRecord,
    plan: Plan,
    *,
    policy: ExecutorPolicy,
    now: datetime,
    host: str,
    read_state: ReadState = live_state,
    analyze: Analyzer = systemd_analyze,
    earlier: Plan | None = None,
    number: int = 1,
) -> PlanView:
    """``plan`` (verified from ``record``) as the page shows it, read now; for a
    follow-up, ``earlier`` is the plan it follows and ``number`` its place in the
    incident."""
    states: dict[str, str] = {}
    steps = []
    for step, argv in zip(plan.steps, step_argv(plan), strict=True):
        unit = step.args.unit
        if unit not in states:
            states[unit] = read_state(unit)[:LINE]
        steps.append(
            StepView(
                unit=unit,
                argv=argv,
                precondition=[w[:LINE] for w in expect_words(unit, step.expect)],
                live=states[unit],
                reason=(step.reason or "")[:LINE],
            )
        )
    approval_expires_at, runs = when_approved(policy, now, analyze)
    return PlanView(
        plan_id=record.plan_id,
        sha256=record.sha256,
        host=host,
        state=state_words(status),
        goal=plan.goal[:LINE],
        units=list(plan.units()),
        steps=steps,
        evidence=evidence(record),
        submitted_at=record.submitted_at,
        plan_expires_at=plan_expiry(record, policy),
        approval_expires_at=approval_expires_at,
        runs=runs,
        attempt=attempt_words(plan, earlier, number)[:LINE],
    )


def state_words(status: StatusRecord) -> str:
    """The plan's state as the page says it, and the rule where a standing rule approved
    it, said as a rule and never as if a person: ``APPROVED by rule night-restarts``,
    ``VERIFIED (approved by rule night-restarts)``."""
    rule = status.approved_by_rule
    if not rule:
        return str(status.state)
    if status.state is PlanState.APPROVED:
        return f"APPROVED by rule {rule}"
    return f"{status.state} (approved by rule {rule})"


def plan_brief(record: PlanRecord, plan: Plan, host: str) -> PlanBrief:
    """What a decision on ``plan`` (verified from ``record``) was about."""
    return PlanBrief(
        plan_id=record.plan_id,
        sha256=record.sha256,
        host=host,
        goal=plan.goal[:LINE],
        units=list(plan.units()),
        argv=step_argv(plan),
    )


def followed(
    brief: PlanBrief,
    status: StatusRecord,
    *,
    decision: Decision | None = None,
    approver: str | None = None,
    at: datetime | None = None,
    approved_by: str = "",
    approved_at: datetime | None = None,
) -> Followed:
    """Where the plan is now, by its ``status``: the one ``approver`` decided
    (``decision``, at ``at``) with a link, or the one a status link shows (no decision:
    ``approved_by`` says who approved it)."""
    last = status.history[-1] if status.history else None
    seen = status.verification.evidence if status.verification else []
    window = status.waits_for_window
    return Followed(
        plan=brief,
        decision=decision,
        approver=approver,
        decided_at=at,
        approved_by=approved_by[:LINE],
        approved_at=approved_at,
        state=status.state,
        since=last.at if last else None,
        reason=(last.reason if last else "")[:LINE],
        verification=[line[:LINE] for line in seen[:EVIDENCE_LINES]],
        window_opens_at=window.opens_at if window else None,
    )


ORDINALS = ("first", "second", "third", "fourth", "fifth")


def attempt_words(plan: Plan, earlier: Plan | None, number: int) -> str:
    """ "second attempt for web.service (health target web failing): the first, plan
    ID (start_unit ledger.service), did not cure it"; "" for a first plan."""
    if plan.follows is None:
        return ""
    nth = ORDINALS[number - 1] if 0 < number <= len(ORDINALS) else f"#{number}"
    about = plan.symptom.unit if plan.symptom else "the same symptom"
    if plan.symptom and plan.symptom.health:
        about += f" (health target {', '.join(plan.symptom.health)} failing)"
    ran = ", ".join(f"{s.tool} {s.args.unit}" for s in earlier.steps) if earlier else "?"
    return f"{nth} attempt for {about}: plan {plan.follows} ({ran}) did not cure it"
