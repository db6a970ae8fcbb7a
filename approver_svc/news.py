"""What the approvers are told that asks nothing of them: how a plan that ran turned out,
and a status link with each piece of news.

With each ``announce``, besides the plans that wait, the approver hands out once:

- ``unresolved``: a plan whose verification found the symptom still there, with what
  opsbot-verify saw and what comes next (a follow-up plan, whose link comes the usual
  way, or a human, once the incident has had its plans);
- ``ended``: the incident of a plan that VERIFIED is over; one that FAILED or was
  INTERRUPTED ends with a human to look (neither is ever resumed by itself).

Only outcomes of the last :data:`OUTCOME_HORIZON` are told: a notify that was down for a
day, or an approver just configured, does not flood the approvers with old news. Each is
marked told in the approver's state before it is handed out (at most once, even if the
message then fails: the journal keeps the failure).

A status link (``<link_base>/p/TOKEN/status``) is a token of its own kind, kept apart
from the decision tokens: the page's ``view`` and ``decide`` look tokens up only among
those, so a status link can show where its plan is, for :data:`WATCH_TTL`, and never
decide anything.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

import structlog

from approver_svc import tokens
from approver_svc.desk import Desk
from approver_svc.state import ApproverState, WatchRecord
from approver_svc.view import plan_brief
from plans import PlanStore, members, new_plan_id
from plans.records import StatusRecord
from plans.verification import VERIFY_HORIZON
from shared_io.errors import OpsbotError
from shared_schema import PlanState
from shared_schema.approver_socket import OutcomeKind, OutcomeNotice

log = structlog.get_logger("opsbot.approver")

#: How long a status link shows its plan.
WATCH_TTL = timedelta(hours=24)
#: An outcome older than this is not told.
OUTCOME_HORIZON = timedelta(hours=1)
#: Outcomes handed out per announce; the rest come with the next.
MAX_OUTCOMES = 20
LINE = 300

#: The state a plan that ran ends in, and the news it makes.
OUTCOMES: dict[PlanState, OutcomeKind] = {
    PlanState.UNRESOLVED: "unresolved",
    PlanState.VERIFIED: "ended",
    PlanState.FAILED: "ended",
    PlanState.INTERRUPTED: "ended",
}


def watch(state: ApproverState, plan_id: str, sha256: str, now: datetime) -> str:
    """A new status link token for ``plan_id`` (only its sha256 is kept)."""
    token = secrets.token_urlsafe(tokens.TOKEN_BYTES)
    state.watch(
        tokens.digest(token),
        WatchRecord(plan_id=plan_id, sha256=sha256, expires_at=now + WATCH_TTL),
    )
    return token


def watched(state: ApproverState, token: str, now: datetime) -> WatchRecord | None:
    """The plan a live status link shows (None: ``token`` is no status link)."""
    record = state.watches.get(tokens.digest(token))
    if record is None or now >= record.expires_at:
        return None
    return record


def approved_by(status: StatusRecord) -> tuple[str, datetime | None]:
    """Who approved the plan, in words, and when ("" and None: it was not approved)."""
    at = next((t.at for t in status.history if t.state is PlanState.APPROVED), None)
    if status.approved_by_rule:
        return f"rule {status.approved_by_rule}", at
    if status.approved_by:
        return status.approved_by, at
    return ("root on the host" if at is not None else ""), at


def outcomes(desk: Desk, state: ApproverState, now: datetime) -> list[OutcomeNotice]:
    """Each outcome of the last OUTCOME_HORIZON the approvers were not told of (each is
    marked told), newest first, at most MAX_OUTCOMES."""
    store = desk.store
    approvers = sorted(desk.config.approvers)
    # A plan runs before it expires and is verified within VERIFY_HORIZON: ids begin with
    # their submission time, so older plans are passed over without reading them.
    since = now - timedelta(seconds=desk.policy.plan_ttl_seconds)
    oldest = new_plan_id(since - VERIFY_HORIZON - OUTCOME_HORIZON)[:15]
    notices: list[OutcomeNotice] = []
    for plan_id in reversed(store.ids()):
        if len(notices) >= MAX_OUTCOMES or plan_id[:15] < oldest:
            break
        try:
            status = store.status(plan_id)
        except OpsbotError:
            continue
        kind = OUTCOMES.get(status.state)
        if kind is None or not status.history:
            continue
        key = f"{plan_id}:{kind}"
        at = status.history[-1].at
        if key in state.told or now - at >= OUTCOME_HORIZON:
            continue
        state.mark_told(key, at + OUTCOME_HORIZON)
        if not approvers:
            continue
        try:
            notice = _notice(desk, store, state, plan_id, kind, status, now)
        except OpsbotError as exc:
            log.warning("news.skipped", plan_id=plan_id, reason=exc.message)
            continue
        notices.append(notice.model_copy(update={"approvers": approvers}))
    if notices:
        log.info("news.outcomes", plans=" ".join(n.plan.plan_id for n in notices))
    return notices


def _notice(
    desk: Desk,
    store: PlanStore,
    state: ApproverState,
    plan_id: str,
    kind: OutcomeKind,
    status: StatusRecord,
    now: datetime,
) -> OutcomeNotice:
    record = store.load(plan_id)
    plan = store.verified_plan(record)
    status = store.status(plan_id, record)
    last = status.history[-1]
    incident = record.incident_id
    plans = members(store, incident) or [plan_id]
    started = record.submitted_at
    if incident != plan_id:
        try:
            started = store.load(incident).submitted_at
        except OpsbotError as exc:  # the news is still told, from this plan's own time
            log.warning("news.incident_unreadable", incident=incident, reason=exc.message)
    seen = status.verification.evidence if status.verification else []
    by, _ = approved_by(status)
    return OutcomeNotice(
        kind=kind,
        plan=plan_brief(record, plan, desk.host),
        state=status.state,
        at=last.at,
        reason=last.reason[:LINE],
        verification=[line[:LINE] for line in seen[:2]],
        incident=incident,
        plans=len(plans),
        started_at=started,
        approved_by=by,
        next=_next(desk, store, plan_id, status.state, plans),
        approvers=[],
        watch=watch(state, plan_id, record.sha256, now),
    )


def _next(desk: Desk, store: PlanStore, plan_id: str, state: PlanState, plans: list[str]) -> str:
    """What comes after this outcome, in words."""
    show = f"`opsbot show {plan_id}` on the host"
    if state is PlanState.VERIFIED:
        return ""
    if state is not PlanState.UNRESOLVED:
        return f"nothing runs again by itself: a human must look ({show})"
    follower = _follower(store, plan_id, plans)
    if follower:
        return f"plan {follower} follows it; its link comes as any plan's"
    cap = desk.policy.max_plans_per_incident
    if len(plans) >= cap:
        return f"the incident has had its {cap} plans: a human must look ({show})"
    return (
        "a follow-up diagnosis may propose another plan (its link comes as any plan's); "
        f"if none comes, a human must look ({show})"
    )


def _follower(store: PlanStore, plan_id: str, plans: list[str]) -> str:
    """The plan of the incident that follows ``plan_id`` ("" for none yet)."""
    for later in plans:
        if later <= plan_id:
            continue
        try:
            if store.verified_plan(store.load(later)).follows == plan_id:
                return later
        except OpsbotError:
            continue
    return ""
