"""Root's two decisions about a stored plan: approve it, or reject it.

:func:`approve` and :func:`reject` are what root's ``opsbot approve`` / ``reject`` and
root's opsbot-approver (a click on the approval page) do: under the apply lock, so that
no apply reads a half-made decision. The executor's uid owns the store, so root believes
neither its plan file nor its status file alone: ``approve`` binds only the sha256 the
operator reviewed (a prefix of at least 12 hex digits, or the whole one they confirmed on
a terminal), and only if the executor's own ``plan.accepted`` journal entry for that id
names the same sha256 (:class:`plans.witness.Accepted`). ``reject`` removes the approval
file before it reads anything the executor owns, and leaves a root-owned rejection that
the gate (plans.gate.decide) and ``approve`` both honour. With the approval goes the polkit
grant of an ``approve --now`` (plans.grants): a rejected plan's verbs are refused by polkit
outside the apply windows at once, not when a sweep comes by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from plans.approvals import (
    rejection_reason,
    remove_approval,
    write_approval,
    write_rejection,
)
from plans.errors import ApprovalRefused, PlanRefused, StoreError, UsageError
from plans.gate import window_wait
from plans.grants import end_grant
from plans.polkit import RULE_PATH
from plans.records import PlanRecord, StatusRecord
from plans.states import TransitionRefused, transition
from plans.store import PlanStore
from plans.windows import Analyzer, WindowState, approval_expiry, systemd_analyze, window_state
from plans.witness import Accepted
from shared_schema import Approval, Plan, PlanState, is_valid_plan_id
from shared_schema.config import ApplyWindow

__all__ = [
    "SHA256_PREFIX_MIN",
    "Approved",
    "Reviewed",
    "approve",
    "is_sha256_prefix",
    "reject",
    "review",
]

log = structlog.get_logger("opsbot.executor.gate")

#: The shortest sha256 prefix ``opsbot approve --sha256`` takes: 48 bits, so that nobody
#: finds another valid plan with the same prefix in the minutes between review and approval.
SHA256_PREFIX_MIN = 12
_HEX = frozenset("0123456789abcdef")


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
    if status.state in RAN:
        raise _ran(plan_id, status)
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
        if accepted.sha256s == {record.sha256}:
            # The stored plan is the one the executor logged, and the digits are not its:
            # mistyped, or copied from another plan; the plan did not change.
            raise ApprovalRefused(
                f"plan {plan_id} does not match what you reviewed: nothing was approved",
                hint=f"`opsbot show {plan_id}` prints its sha256, which starts "
                f"{record.sha256[:16]}, not {sha256_prefix[:16]}: compare the digits you "
                "passed to --sha256",
            )
        raise ApprovalRefused(
            f"plan {plan_id} has sha256 {_short(record.sha256)}, not the {sha256_prefix} you "
            "reviewed: it changed since; nothing was approved",
            hint=f"`opsbot show {plan_id}` shows it as it is now; approve only what you reviewed",
        )
    _check_accepted(record, accepted)
    return Reviewed(record, plan, status)


#: The states of a plan whose steps ran, or run now: it was approved and applied once.
RAN = frozenset(
    {
        PlanState.APPLYING,
        PlanState.APPLIED,
        PlanState.VERIFIED,
        PlanState.UNRESOLVED,
        PlanState.FAILED,
    }
)


def _ran(plan_id: str, status: StatusRecord) -> PlanRefused:
    """A plan whose steps ran (or run now) is not approved again: when it was applied, and
    where its story is told (not "diagnose again": it was the plan that ran)."""
    audit = f"see `opsbot audit {plan_id}` for what ran and what came of it; nothing was approved"
    if status.state is PlanState.APPLYING:
        began = [t.at for t in status.history if t.state is PlanState.APPLYING]
        since = f" since {_utc(began[-1])}" if began else ""
        return PlanRefused(
            f"plan {plan_id} is being applied now{since}", hint=f"{audit} (it was approved)"
        )
    ended = [t.at for t in status.history if t.state in (PlanState.APPLIED, PlanState.FAILED)]
    at = f" at {_utc(ended[-1])}" if ended else ""
    return PlanRefused(
        f"plan {plan_id} was applied{at} ({status.state})",
        hint=f"{audit} (a plan is approved and applied once)",
    )


def _utc(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def review(
    store: PlanStore,
    approvals_dir: Path,
    plan_id: str,
    accepted: Accepted,
    sha256_prefix: str | None = None,
) -> Reviewed:
    """Every check :func:`approve` makes, and the sha256 reviewed where one is given:
    without one, what a terminal shows before it asks. (``approve`` makes them all
    again, under the lock.)"""
    return _reviewable(store, approvals_dir, plan_id, accepted, sha256_prefix)


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
    rule: tuple[str, str] | None = None,
) -> Approved:
    """Write the approval of ``plan_id`` bound to its sha256, and mark it APPROVED.

    ``renew`` False (a click relayed by opsbot-approver): only a PROPOSED plan, judged
    under the lock, so that a click never rewrites an approval root made meanwhile.

    Only a PROPOSED plan (or an APPROVED one, whose approval is renewed) that root did not
    reject, whose sha256 starts with ``sha256_prefix`` (what the operator reviewed: see
    :func:`is_sha256_prefix`) and is the one ``accepted`` says the executor logged.

    It holds for ``ttl_seconds``; outside the apply ``windows``, until the end of the next
    one (plans.windows.approval_expiry: NoApplyWindow if none opens within 7 days)
    unless ``override_window`` (``opsbot approve --now``), which lets it run at once and
    is recorded in the approval and the journal.

    ``rule``: (name, sha256) of the standing rule that approves it (root's approver,
    approver_svc.rules), recorded as ``approved_by_rule`` and never as ``approver``;
    only with ``renew`` False and without ``override_window``.
    """
    if rule is not None and (renew or override_window or approver):
        raise UsageError("a rule approves only a PROPOSED plan, in its windows, in no one's name")
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
            rule=rule,
        )
        if status.state is PlanState.PROPOSED:
            try:
                status = transition(
                    status,
                    PlanState.APPROVED,
                    by=approval.by,
                    at=now,
                    approved_by=approver,
                    approved_by_rule=rule[0] if rule else "",
                    rule_sha256=rule[1] if rule else "",
                    waits_for_window=waits,
                )
            except TransitionRefused as exc:
                remove_approval(approvals_dir, plan_id)
                raise UsageError(exc.message) from exc
            try:
                store.save_status(status)
            except BaseException:
                # Not APPROVED in the store: the approval must not stand either, uncounted.
                remove_approval(approvals_dir, plan_id)
                raise
        elif (
            status.refusal
            or status.waits_for_window != waits
            or status.approved_by_rule
            or (approver and status.approved_by != approver)
        ):
            # A renewed approval is news to the apply: the last refusal was of the old one
            # (and `approve --wait` ends on the next refusal, the same words or not). The
            # renewed approval is the renewer's (its file and the journal name them): so
            # does the status, also where a rule's approval becomes root's.
            update: dict[str, object] = {"refusal": "", "waits_for_window": waits}
            if approver:
                update.update(approved_by=approver, approved_by_rule="", rule_sha256="")
            store.save_status(status.model_copy(update=update))
    log.info(
        "plan.approved",
        plan_id=plan_id,
        sha256=record.sha256,
        approver=approver or None,
        approved_by_rule=rule[0] if rule else None,
        rule_sha256=rule[1] if rule else None,
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
    grants_dir: Path = RULE_PATH.parent,
) -> StatusRecord:
    """Mark ``plan_id`` REJECTED: it will never run.

    Its approval file goes first, and its ``--now`` polkit grant (in ``grants_dir``) with
    it, before the lock or anything else the executor's uid owns is touched, so that no
    planted lock or status file can keep either valid; then root writes a rejection, which
    ``decide`` honours whatever the status file says later, and looks for a grant once
    more (an ``approve --now`` that finished meanwhile may have written one). A grant that
    cannot be removed is said (StoreError) once the rejection is written.
    """
    if not is_valid_plan_id(plan_id):
        raise UsageError(f"{plan_id[:80]!r} is not a plan id")
    removed = remove_approval(approvals_dir, plan_id)
    if removed:
        log.info("approval.removed", plan_id=plan_id, by=by)
    try:
        if end_grant(plan_id, grants_dir):
            log.info("grant.removed", plan_id=plan_id, by=by, reason="the plan was rejected")
    except StoreError as exc:  # the rejection first; the second look below says it
        log.warning("grant.remove_failed", plan_id=plan_id, error=exc.message)
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
    if end_grant(plan_id, grants_dir):
        log.info("grant.removed", plan_id=plan_id, by=by, reason="the plan was rejected")
    return status
