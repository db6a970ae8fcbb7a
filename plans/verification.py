"""After the steps: whether the service came back, and what opsbot's plans already did.

A plan whose steps all ran is APPLIED and gets a marker in ``verify/`` (state directory),
which opsbot-verify.path watches: opsbot-verify.service (the diagnose user, with the read
tools and loopback; the apply unit has no network) asks for the plans awaiting
verification (``pending``), watches their units and health targets for
``[executor] settle_seconds`` after the last step, and reports each (``verify``): the
plan becomes VERIFIED or UNRESOLVED, with what was seen. A forged report can only
mislabel a plan: nothing here runs anything.

The same history bounds what a new plan may do (checked at submit):

* the restart budget: once opsbot's plans have started or restarted a unit
  ``restart_budget`` times within ``restart_budget_minutes``, no plan may do so again;
* a plan whose steps (tool and unit, in order) are those of a plan that ended UNRESOLVED
  within that window is refused: it was tried and did not fix it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from plans.errors import PlanError, PlanNotFound
from plans.records import StatusRecord
from plans.states import TransitionRefused, transition
from plans.store import PlanStore
from shared_io.errors import UnitStateError
from shared_io.files import write_atomic
from shared_io.unit_show import UnitProperties, parse_timestamp, show
from shared_schema import (
    AwaitingPlan,
    AwaitingStep,
    ExecutorPolicy,
    FieldError,
    Plan,
    PlanState,
    Recorded,
    Reject,
    ReportVerification,
    Verification,
    write_tools,
)
from shared_schema.plan import RESTART_BUDGET, TRIED_BEFORE
from shared_schema.units import is_valid_plan_id

__all__ = [
    "UnitReader",
    "VERIFY_HORIZON",
    "history_errors",
    "mark_applied",
    "pending",
    "read_plan_units",
    "record_report",
    "unbelievable",
]

log = structlog.get_logger("opsbot.executor.verify")

#: Tools that bring a unit (back) up: what the restart budget counts.
RESTARTS = frozenset({"start_unit", "restart_unit"})
#: States of a plan whose steps (some of them) ran.
RAN = frozenset(
    {
        PlanState.APPLYING,
        PlanState.INTERRUPTED,
        PlanState.APPLIED,
        PlanState.VERIFIED,
        PlanState.UNRESOLVED,
        PlanState.FAILED,
    }
)
#: Plans whose steps ran cleanly and did not fix it: not accepted again within the
#: window. A FAILED plan is not among them: a step that failed (a job timeout, a
#: dependency not up yet) may pass the next time, and a restart that failed still spends
#: the restart budget, which bounds the retries (docs/security.md, known limits).
NOT_FIXED = frozenset({PlanState.UNRESOLVED})
#: A plan applied longer ago than this is not offered for verification any more (it
#: stays APPLIED: not verified); what the service does now says nothing about that fix.
VERIFY_HORIZON = timedelta(hours=1)


def mark_applied(store: PlanStore, plan_id: str) -> None:
    """Tell opsbot-verify.path that ``plan_id`` waits for verification."""
    write_atomic(store.verify / plan_id, b"")


def sweep_unmarked(store: PlanStore, now: datetime, submitted_since: datetime) -> list[str]:
    """Mark again the APPLIED plans applied within VERIFY_HORIZON whose marker is missing
    (the apply killed between the transition and the marker): their ids. Only plans
    submitted since ``submitted_since`` are read (known from their ids)."""
    cut = submitted_since.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    marked = set(_named_in(store.verify))
    again = []
    for plan_id in [i for i in store.ids() if i >= cut and i not in marked]:
        try:
            status = store.status(plan_id)
        except PlanError:
            continue
        at = _applied_at(status)
        if status.state is PlanState.APPLIED and at is not None and now - at <= VERIFY_HORIZON:
            mark_applied(store, plan_id)
            again.append(plan_id)
    return again


def _unmark(store: PlanStore, plan_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(store.verify / plan_id)


def _applied_at(status: StatusRecord) -> datetime | None:
    for t in reversed(status.history):
        if t.state is PlanState.APPLIED:
            return t.at
    return None


def _recent(store: PlanStore, policy: ExecutorPolicy, now: datetime) -> Iterator[str]:
    """Ids of plans that may have run within the budget window (a plan runs within
    plan_ttl_seconds of its submission, and its id starts with that time)."""
    horizon = now - timedelta(
        minutes=policy.restart_budget_minutes, seconds=policy.plan_ttl_seconds
    )
    oldest = f"{horizon:%Y%m%d-%H%M%S}"
    # Only a plan whose approval was consumed has run: the consumed markers name them,
    # so a submit reads the few plans that ran lately, not the whole store.
    for plan_id in _named_in(store.consumed, ".json"):
        if plan_id >= oldest:
            yield plan_id


def _named_in(directory: Path, suffix: str = "") -> list[str]:
    """The plan ids that files in ``directory`` are named for, sorted (none if it is
    missing)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    ids = (n[: len(n) - len(suffix)] if suffix else n for n in names if n.endswith(suffix))
    return sorted(i for i in ids if is_valid_plan_id(i))


def pending(store: PlanStore, now: datetime) -> list[AwaitingPlan]:
    """The APPLIED plans no verification has been recorded for, applied within
    VERIFY_HORIZON, oldest first: those with a marker in ``verify/`` (mark_applied). A
    marker no verification will ever take (its plan unreadable, not APPLIED, or applied
    before the horizon) is removed: opsbot-verify.path starts the service again while
    the directory holds one (DirectoryNotEmpty=), so that a plan applied while a run
    ends is not missed."""
    out = []
    for plan_id in _named_in(store.verify):
        try:
            record = store.load(plan_id)
            status = store.status(plan_id, record)
            if status.state is not PlanState.APPLIED:
                _unmark(store, plan_id)
                continue
            plan = store.verified_plan(record)
        except PlanError as exc:
            log.warning("plan.unreadable", plan_id=plan_id, error=exc.message)
            _unmark(store, plan_id)
            continue
        at = _applied_at(status)
        if at is None or now - at > VERIFY_HORIZON:
            _unmark(store, plan_id)
            continue
        steps = [AwaitingStep(tool=s.tool, unit=s.args.unit) for s in plan.steps]
        out.append(
            AwaitingPlan(
                plan_id=plan_id,
                sha256=record.sha256,
                steps=steps,
                applied_at=at,
                symptom=plan.symptom,
                incident=record.incident_id,
            )
        )
    return out


UnitReader = Callable[[list[str]], list[UnitProperties]]


def read_plan_units(units: list[str]) -> list[UnitProperties]:
    """The plan's units as a VERIFIED report is checked against (systemctl show)."""
    return show(units, ("Id", "ActiveState", "SubState", "Result", "Type", *_STARTED))


_STARTED = ("ExecMainStartTimestamp",)
#: A main process begun this long after the last step was not started by the plan.
STARTED_BY_PLAN = timedelta(seconds=0.5)


def unbelievable(
    plan: Plan,
    applied_at: datetime,
    report: ReportVerification,
    now: datetime,
    settle_seconds: float,
    read_units: UnitReader,
) -> str:
    """Why a VERIFIED ``report`` cannot be true now ("" when it can): it comes before the
    window ended or after the horizon, it did not judge every health target of the
    plan's symptom (or named others), or a unit of the plan is failed, not up, or was
    started again after the last step. The health answers remain the diagnose user's
    word; the units' states are read here."""
    since = (now - applied_at).total_seconds()
    if since < settle_seconds:
        return (
            f"a verification {since:.1f} s after the last step, before its "
            f"{settle_seconds:g} s window ended"
        )
    if now - applied_at > VERIFY_HORIZON:
        return "a verification after the horizon: the plan is no longer verified"
    carried = sorted(plan.symptom.health) if plan.symptom else []
    if sorted(report.targets) != carried:
        return (
            f"the report judged targets {', '.join(report.targets) or 'none'}; the plan's "
            f"symptom is {', '.join(carried) or 'no target'}"
        )
    wanted = write_tools.expected_states([(s.tool, s.args.unit) for s in plan.steps])
    try:
        shown = read_units(list(wanted))
    except UnitStateError as exc:
        return f"the plan's units cannot be read: {exc.message}"
    for props in shown:
        unit = props.get("Id", "")
        leaves = wanted.get(unit, "not-failed")
        state = props.get("ActiveState", "")
        if state == "failed":
            return f"{unit} is failed"
        if leaves != "active":
            continue
        oneshot_done = (
            props.get("Type") == "oneshot"
            and state == "inactive"
            and props.get("Result") == "success"
        )
        if state != "active" and not oneshot_done:
            return f"{unit} is {state}/{props.get('SubState', '')}, not active"
        began = parse_timestamp(props.get("ExecMainStartTimestamp", ""))
        if began is not None and began > applied_at + STARTED_BY_PLAN and not oneshot_done:
            later = (began - applied_at).total_seconds()
            return f"{unit} was started again {later:.1f} s after the last step"
    return ""


def record_report(
    store: PlanStore,
    report: ReportVerification,
    by: str,
    now: datetime,
    settle_seconds: float = 0.0,
    read_units: UnitReader = read_plan_units,
) -> Recorded | Reject:
    """Take ``report``: the plan, APPLIED and with that fingerprint, becomes VERIFIED (if
    it can be true now: :func:`unbelievable`) or UNRESOLVED."""
    new = PlanState.VERIFIED if report.result == "verified" else PlanState.UNRESOLVED
    with store.apply_lock():
        try:
            record = store.load(report.plan_id)
        except PlanNotFound as exc:
            return Reject(reason=exc.message)
        if record.sha256 != report.sha256:
            return Reject(reason=f"plan {report.plan_id} has another fingerprint")
        status = store.status(report.plan_id, record)
        applied_at = _applied_at(status)
        if new is PlanState.VERIFIED and status.state is PlanState.APPLIED:
            why = unbelievable(
                store.verified_plan(record),
                applied_at or now,
                report,
                now,
                settle_seconds,
                read_units,
            )
            if why:
                log.warning("plan.verification_refused", plan_id=report.plan_id, reason=why)
                return Reject(reason=f"VERIFIED refused for plan {report.plan_id}: {why}")
        evidence = [e for e in report.evidence if e][:20]
        verification = Verification(
            result=report.result, evidence=evidence, seconds=report.seconds, at=now, by=by
        )
        reason = "; ".join(evidence)[:500] or report.result
        try:
            moved = transition(status, new, by=by, at=now, reason=reason, verification=verification)
        except TransitionRefused as exc:
            return Reject(reason=exc.message)
        store.save_status(moved)
    _unmark(store, report.plan_id)
    log.info(
        f"plan.{new.lower()}",
        plan_id=report.plan_id,
        sha256=record.sha256,
        seconds=report.seconds,
        evidence=reason,
    )
    return Recorded(plan_id=report.plan_id, state=new)


@dataclass(frozen=True)
class _Ran:
    """A recent plan whose steps ran: its steps, units, incident, state and when it ended."""

    plan_id: str
    steps: tuple[tuple[str, str], ...]
    incident: str
    state: PlanState
    ended: datetime | None

    @property
    def units(self) -> set[str]:
        return {unit for _, unit in self.steps}


def _cured_since(tried: _Ran, ran: list[_Ran]) -> str | None:
    """A plan that ended VERIFIED after ``tried`` ended, in its incident or on one of its
    units: the symptom was gone, or its unit seen healthy, since those steps did not help
    (the executor's own records say so). Its id, or None."""
    for other in ran:
        if (
            other.state is PlanState.VERIFIED
            and other.ended is not None
            and tried.ended is not None
            and other.ended > tried.ended
            and (other.incident == tried.incident or other.units & tried.units)
        ):
            return other.plan_id
    return None


def history_errors(
    plan: Plan, store: PlanStore, policy: ExecutorPolicy, now: datetime
) -> list[FieldError]:
    """What opsbot's recent plans forbid ``plan`` to do: a start or restart beyond the
    restart budget, or the very steps of a plan that ended UNRESOLVED (within its
    incident, and across incidents until its units were seen healthy again: a plan in
    its incident, or one on its units, ended VERIFIED since)."""
    since = now - timedelta(minutes=policy.restart_budget_minutes)
    restarts: dict[str, list[str]] = {}
    ran: list[_Ran] = []
    for plan_id in _recent(store, policy, now):
        try:
            status = store.status(plan_id)
            if status.state not in RAN:
                continue
            record = store.load(plan_id)
            done = store.verified_plan(record)
        except PlanError:
            continue
        for step_record, step in zip(status.steps, done.steps, strict=False):
            # A start or restart that was begun counts, whatever its exit: `systemctl
            # restart` that exits 1 ("Job ... failed") or times out did restart the unit.
            at = step_record.finished_at or step_record.started_at
            if step.tool in RESTARTS and at is not None and at >= since:
                restarts.setdefault(step.args.unit, []).append(plan_id)
        ended = status.history[-1].at if status.history else None
        steps = tuple((s.tool, s.args.unit) for s in done.steps)
        ran.append(_Ran(plan_id, steps, record.incident_id, status.state, ended))
    incident = _incident_of(plan, store)
    errors: list[FieldError] = []
    sequence = tuple((s.tool, s.args.unit) for s in plan.steps)
    for tried in reversed(ran):  # the latest first: its id is the one named
        if (
            tried.state not in NOT_FIXED
            or tried.steps != sequence
            or tried.ended is None
            or tried.ended < since
        ):
            continue
        if tried.incident != incident and _cured_since(tried, ran) is not None:
            continue  # a new incident since its units were healthy: the fix may fit it
        errors.append(
            FieldError(
                path="steps",
                message=f"{TRIED_BEFORE}: plan {tried.plan_id} ran these very steps within "
                f"{policy.restart_budget_minutes} min and its service did not come back "
                "(UNRESOLVED)",
            )
        )
        break
    for index, step in enumerate(plan.steps):
        done_by = restarts.get(step.args.unit, [])
        if step.tool in RESTARTS and len(done_by) >= policy.restart_budget:
            errors.append(
                FieldError(
                    path=f"steps.{index}",
                    message=f"{RESTART_BUDGET}: opsbot's plans started or restarted "
                    f"{step.args.unit} {len(done_by)} times in the last "
                    f"{policy.restart_budget_minutes} min (plans {', '.join(done_by[-3:])}; "
                    f"limit {policy.restart_budget}): restarts are not fixing it",
                )
            )
    return errors


def _incident_of(plan: Plan, store: PlanStore) -> str | None:
    """The incident ``plan`` would join: that of the plan it follows (None: it starts
    one of its own, or the plan it follows cannot be read)."""
    if plan.follows is None:
        return None
    try:
        return store.load(plan.follows).incident_id
    except PlanError:
        return None
