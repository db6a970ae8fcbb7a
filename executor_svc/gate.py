"""The gate: whether a stored plan may run now, and the two ways root changes that.

:func:`decide` is the one decision, made the same way by the apply that runs plans and by
``opsbot apply --dry-run`` that only says what it would do: a plan left APPLYING by a
dead apply is INTERRUPTED; an old one EXPIRED; a PROPOSED one waits; an APPROVED one runs
only if its stored bytes still hash to its fingerprint, root has not rejected it, its
approval passes every check (executor_svc.approvals, its lifetime included) and today's
policy still allows every step; and then, where ``[executor.apply_window]`` is set, only
inside an apply window (executor_svc.windows) unless root approved it with ``--now``:
outside, it waits in APPROVED, and the apply that runs in the window decides again.
Right before the steps, :func:`precondition_mismatch` checks each step's ``expect``
against the live state.

:func:`approve` and :func:`reject` are what root's ``opsbot approve`` / ``reject`` do:
under the apply lock, so that no apply reads a half-made decision. The executor's uid
owns the store, so root believes neither its plan file nor its status file alone:
``approve`` binds only the sha256 the operator reviewed (a prefix of at least 12 hex
digits, or the whole one they confirmed on a terminal), and only if the executor's own
``plan.accepted`` journal entry for that id names the same sha256 (:class:`Accepted`,
read from the journal by the console). ``reject`` removes the approval file before it
reads anything the executor owns, and leaves a root-owned rejection that ``decide`` and
``approve`` both honour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import structlog

from executor_svc.approvals import (
    CheckedApproval,
    check_approval,
    rejection_reason,
    remove_approval,
    write_approval,
    write_rejection,
)
from executor_svc.errors import (
    ApprovalExpired,
    ApprovalRefused,
    PlanRefused,
    TamperedPlan,
    UsageError,
)
from executor_svc.policy import policy_errors, step_argv
from executor_svc.records import PlanRecord, StatusRecord
from executor_svc.states import TransitionRefused, transition
from executor_svc.store import PlanStore
from executor_svc.unit_state import UnitState, UnitStateError, expectation_mismatch
from executor_svc.verification import history_errors
from executor_svc.windows import (
    Analyzer,
    WindowState,
    approval_expiry,
    lifetime_ceiling,
    span_text,
    systemd_analyze,
    window_state,
)
from shared_schema import Approval, ExecutorPolicy, Plan, PlanState, is_valid_plan_id
from shared_schema.config import ApplyWindow
from shared_schema.executor_socket import WindowWait

log = structlog.get_logger("opsbot.executor.gate")

Action = Literal["skip", "interrupt", "expire", "wait", "refuse", "stale", "run"]
INTERRUPTED_REASON = "an earlier apply stopped half-way; it is never resumed: diagnose again"


@dataclass(frozen=True)
class Decision:
    """What today's checks say about one stored plan.

    ``skip``: final already; ``interrupt``: an apply died in it; ``expire``: too old or its
    approval ran out; ``wait``: not approved, or approved and outside its apply window
    (``window`` says when the next opens); ``refuse``: an approval or the stored bytes
    failed a check, or root rejected it (the plan keeps its state); ``stale``: today's
    policy refuses a step; ``run``: it may run, with this approval.
    """

    action: Action
    reason: str = ""
    plan: Plan | None = None
    argv: list[list[str]] = field(default_factory=list)
    approval: CheckedApproval | None = None
    window: WindowState | None = None


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
    rejected = rejection_reason(approvals_dir, record.plan_id)
    if rejected:
        return Decision("refuse", f"{rejected}; it never runs", plan, argv)
    windows = policy.apply_window
    ttl = policy.approval_ttl_seconds

    def ceiling(approval: Approval) -> float:
        return lifetime_ceiling(
            windows,
            approval.approved_at,
            ttl,
            override=approval.override_window,
            analyze=analyze,
        )

    try:
        checked = check_approval(
            approvals_dir,
            record,
            store,
            now,
            ttl_ceiling_seconds=ttl,
            lifetime_ceiling=ceiling if windows else None,
        )
    except ApprovalExpired as exc:
        return Decision("expire", exc.message, plan, argv)
    except ApprovalRefused as exc:
        return Decision("refuse", exc.message, plan, argv)
    errors = policy_errors(plan, policy)
    if errors:
        reason = "today's policy refuses it: " + "; ".join(str(e) for e in errors)
        return Decision("stale", reason, plan, argv)
    if windows and not checked.approval.override_window:
        state = window_state(windows, now, analyze=analyze)
        if not state.open:
            # The budget is judged when it may run: it may have recovered by then.
            return Decision("wait", waits_text(state), plan, argv, window=state)
    # The budget again, now: plans approved together (or since this one was submitted)
    # may have spent it meanwhile.
    spent = history_errors(plan, store, policy, now)
    if spent:
        return Decision("stale", "; ".join(e.message for e in spent), plan, argv)
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

#: The shortest sha256 prefix ``opsbot approve --sha256`` takes: 48 bits, so that nobody
#: finds another valid plan with the same prefix in the minutes between review and approval.
SHA256_PREFIX_MIN = 12
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Accepted:
    """What the journal says opsbot-executor.service stored under one plan id: the sha256
    of each of its trusted ``plan.accepted`` entries for that id (from that unit, as the
    executor's user or root), and when the journal begins (None: it holds nothing)."""

    sha256s: frozenset[str]
    journal_begins: datetime | None = None


@dataclass(frozen=True)
class Reviewed:
    """A plan that passed every check of :func:`approve` but the operator's sha256."""

    record: PlanRecord
    plan: Plan
    status: StatusRecord


@dataclass(frozen=True)
class Approved:
    """What :func:`approve` wrote; ``window``: the apply windows as they stood then (open
    where none is configured or root overrode them)."""

    record: PlanRecord
    plan: Plan
    approval: Approval
    window: WindowState = WindowState(True, None, None)


def _short(sha: str) -> str:
    return f"{sha[:16]}..."


def is_sha256_prefix(value: str) -> bool:
    """At least SHA256_PREFIX_MIN and at most 64 lower-case hex digits."""
    return SHA256_PREFIX_MIN <= len(value) <= 64 and set(value) <= _HEX


def _check_accepted(record: PlanRecord, accepted: Accepted) -> None:
    """The stored plan is the one the executor logged when it stored it, or refuse.

    No trusted entry at all (the journal was rotated or vacuumed, or the plan never went
    through the executor) refuses too, with no flag to go without: a fresh diagnosis gives
    a plan with a fresh entry, and such a flag would be one that anyone able to flood the
    journal until it rotates could make operators learn to type.
    """
    plan_id = record.plan_id
    hint = "diagnose again for a new plan; approve binds only a sha256 the executor logged"
    if not accepted.sha256s:
        begins = accepted.journal_begins
        if begins is None or begins > record.submitted_at:
            since = f"it begins at {begins.isoformat()}" if begins else "it is empty"
            raise ApprovalRefused(
                f"no plan.accepted entry of opsbot-executor.service for plan {plan_id} in the "
                f"journal: {since}, after the plan was submitted "
                f"({record.submitted_at.isoformat()}); it was rotated or vacuumed",
                hint=hint,
            )
        raise ApprovalRefused(
            f"no plan.accepted entry of opsbot-executor.service for plan {plan_id} in the "
            "journal: the executor never logged storing it",
            hint=hint,
        )
    if accepted.sha256s != {record.sha256}:
        logged = ", ".join(_short(s) for s in sorted(accepted.sha256s))
        raise ApprovalRefused(
            f"plan {plan_id} on disk has sha256 {_short(record.sha256)}, but "
            f"opsbot-executor.service logged accepting {logged}: the stored plan was "
            "rewritten after it was accepted; nothing was approved",
            hint=hint + "; and find out who wrote /var/lib/opsbot/plans",
        )


def _reviewable(
    store: PlanStore,
    approvals_dir: Path,
    plan_id: str,
    accepted: Accepted,
    sha256_prefix: str | None,
) -> Reviewed:
    record = store.load(plan_id)
    plan = store.verified_plan(record)
    status = store.status(plan_id, record)
    if status.state not in (PlanState.PROPOSED, PlanState.APPROVED):
        raise PlanRefused(
            f"plan {plan_id} is {status.state}; only PROPOSED plans can be approved",
            hint="diagnose again for a new plan",
        )
    rejected = rejection_reason(approvals_dir, plan_id)
    if rejected:
        raise PlanRefused(
            f"plan {plan_id} was {rejected}; a rejected plan is never approved",
            hint="diagnose again for a new plan",
        )
    if sha256_prefix is not None and not record.sha256.startswith(sha256_prefix):
        raise ApprovalRefused(
            f"plan {plan_id} has sha256 {_short(record.sha256)}, not the {sha256_prefix} you "
            "reviewed: it changed since; nothing was approved",
            hint=f"`opsbot show {plan_id}` shows it as it is now; approve only what you reviewed",
        )
    _check_accepted(record, accepted)
    return Reviewed(record, plan, status)


def review(store: PlanStore, approvals_dir: Path, plan_id: str, accepted: Accepted) -> Reviewed:
    """Every check :func:`approve` makes but the operator's sha256: what a terminal shows
    before it asks. (``approve`` makes them all again, under the lock.)"""
    return _reviewable(store, approvals_dir, plan_id, accepted, None)


def approve(
    store: PlanStore,
    approvals_dir: Path,
    plan_id: str,
    *,
    sha256_prefix: str,
    accepted: Accepted,
    approver: str,
    now: datetime,
    ttl_seconds: int,
    windows: Sequence[ApplyWindow] = (),
    override_window: bool = False,
    analyze: Analyzer = systemd_analyze,
    renew: bool = True,
) -> Approved:
    """Write the approval of ``plan_id`` bound to its sha256, and mark it APPROVED.

    ``renew`` False (a click relayed by opsbot-approver): only a PROPOSED plan, judged
    under the lock, so that a click never rewrites an approval root made meanwhile.

    Only a PROPOSED plan (or an APPROVED one, whose approval is renewed) that root did not
    reject, whose sha256 starts with ``sha256_prefix`` (what the operator reviewed: see
    :func:`is_sha256_prefix`) and is the one ``accepted`` says the executor logged.

    It holds for ``ttl_seconds``; outside the apply ``windows``, until the end of the next
    one (executor_svc.windows.approval_expiry: NoApplyWindow if none opens within 7 days)
    unless ``override_window`` (``opsbot approve --now``), which lets it run at once and
    is recorded in the approval and the journal.
    """
    if not is_sha256_prefix(sha256_prefix):
        raise UsageError(
            f"{sha256_prefix[:80]!r} is not a sha256 prefix: give at least "
            f"{SHA256_PREFIX_MIN} lower-case hex digits"
        )
    with store.apply_lock():
        checked = _reviewable(store, approvals_dir, plan_id, accepted, sha256_prefix)
        record, status = checked.record, checked.status
        if not renew and status.state is not PlanState.PROPOSED:
            by = f" by {status.approved_by}" if status.approved_by else ""
            raise PlanRefused(
                f"plan {plan_id} was approved already{by}; nothing was changed",
                hint=f"root renews an approval with `opsbot approve {plan_id}`",
            )
        expires_at = approval_expiry(
            windows, now, ttl_seconds, override=override_window, analyze=analyze
        )
        window = WindowState(True, None, None)
        if windows and not override_window:
            window = window_state(windows, now, analyze=analyze)
        waits = window_wait(window)
        approval = write_approval(
            approvals_dir,
            record,
            approver,
            now,
            ttl_seconds,
            expires_at=expires_at,
            override_window=override_window,
        )
        if status.state is PlanState.PROPOSED:
            try:
                status = transition(
                    status,
                    PlanState.APPROVED,
                    by=approver,
                    at=now,
                    approved_by=approver,
                    waits_for_window=waits,
                )
            except TransitionRefused as exc:
                raise UsageError(exc.message) from exc
            store.save_status(status)
        elif status.refusal or status.waits_for_window != waits:
            # A renewed approval is news to the apply: the last refusal was of the old one
            # (and `approve --wait` ends on the next refusal, the same words or not).
            update = {"refusal": "", "waits_for_window": waits}
            store.save_status(status.model_copy(update=update))
    log.info(
        "plan.approved",
        plan_id=plan_id,
        sha256=record.sha256,
        approver=approver,
        expires_at=approval.expires_at.isoformat(),
        override_window=True if override_window else None,
        window_opens_at=waits.opens_at.isoformat() if waits and waits.opens_at else None,
    )
    return Approved(record, checked.plan, approval, window)


def reject(
    store: PlanStore,
    approvals_dir: Path,
    plan_id: str,
    *,
    by: str,
    now: datetime,
    reason: str | None,
) -> StatusRecord:
    """Mark ``plan_id`` REJECTED: it will never run.

    Its approval file goes first, before the lock or anything else the executor's uid owns
    is touched, so that no planted lock or status file can keep it valid; then root writes
    a rejection, which ``decide`` honours whatever the status file says later.
    """
    if not is_valid_plan_id(plan_id):
        raise UsageError(f"{plan_id[:80]!r} is not a plan id")
    removed = remove_approval(approvals_dir, plan_id)
    if removed:
        log.info("approval.removed", plan_id=plan_id, by=by)
    with store.apply_lock():
        record = store.load(plan_id)
        status = store.status(plan_id, record)
        why = reason or "rejected by operator"
        try:
            status = transition(status, PlanState.REJECTED, by=by, at=now, reason=why)
        except TransitionRefused as exc:
            hint = "its approval file was removed" if removed else None
            raise PlanRefused(exc.message, hint=hint) from exc
        write_rejection(approvals_dir, record, by, now, why)
        store.save_status(status)
    log.info("plan.rejected", plan_id=plan_id, sha256=record.sha256, approver=by, reason=reason)
    return status
