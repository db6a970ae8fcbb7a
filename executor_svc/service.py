"""What the executor answers to each request, independent of sockets.

submit: envelope checked, plan validated (REVISE with field errors), checked against
policy and opsbot's own recent history (REVISE: the restart budget, steps already tried),
stored durably, then ACCEPT. list/show: summaries and detail, with each step as the argv
it will run. pending/verify: opsbot-verify's (plans.verification).
"""

import bisect
import shlex
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import structlog

from executor_svc.peer import ALLOWED_OPS, Peer
from plans import (
    PlanRecord,
    PlanStore,
    Provenance,
    StatusRecord,
    TamperedPlan,
    TooManyWaiting,
    UnitReader,
    WaitingCaps,
    follow_up,
    history_errors,
    pending,
    policy_errors,
    read_plan_units,
    record_report,
    step_argv,
)
from shared_io.errors import OpsbotError, StoreError
from shared_schema import (
    Accept,
    ExecutorPolicy,
    FieldError,
    ListPlans,
    Pending,
    PendingVerification,
    Plan,
    PlanDetail,
    PlanList,
    PlanState,
    PlanSummary,
    Recorded,
    Reject,
    ReplyModel,
    ReportVerification,
    RequestModel,
    Revise,
    SubmitPlan,
    parse_plan,
)
from shared_schema.config_state import ConfigState
from shared_schema.executor_socket import ConfigReply, ShowConfig

__all__ = ["ExecutorService"]

log = structlog.get_logger("opsbot.executor")

Reply = ReplyModel

# A REVISE answers a request of at most 64 KiB and must itself fit in one reply line of
# 64 KiB (shared_schema.parse_reply): a plan with thousands of unknown keys, or one 60 KB
# key, would otherwise be answered with hundreds of kilobytes no client can read.
MAX_REVISE_ERRORS = 20
MAX_FIELD_TEXT = 200


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FIELD_TEXT else text[: MAX_FIELD_TEXT - 3] + "..."


def bounded_revise(errors: list[FieldError]) -> Revise:
    """REVISE with the first MAX_REVISE_ERRORS errors, each cut to MAX_FIELD_TEXT
    characters, and a last one saying how many more there were."""
    shown = [FieldError(path=_cut(e.path), message=_cut(e.message)) for e in errors]
    if len(shown) > MAX_REVISE_ERRORS:
        more = len(shown) - MAX_REVISE_ERRORS
        shown = shown[:MAX_REVISE_ERRORS] + [
            FieldError(path="", message=f"... and {more} more errors")
        ]
    return Revise(errors=shown)


def summary(record: PlanRecord, status: StatusRecord, plan: Plan | None) -> PlanSummary:
    return PlanSummary(
        plan_id=record.plan_id,
        state=status.state,
        sha256=record.sha256,
        goal=plan.goal if plan else "(unreadable plan)",
        units=plan.units() if plan else [],
        submitted_at=record.submitted_at,
        submitted_by=record.submitted_by.user,
        reason=status.refusal or status.reason,
        verification=status.verification,
        waits_for_window=status.waits_for_window if status.state is PlanState.APPROVED else None,
        incident=record.incident_id,
        approved_by=status.approved_by,
        approved_by_rule=status.approved_by_rule,
        rule_sha256=status.rule_sha256,
    )


Stamps = tuple[tuple[int, ...] | None, tuple[int, ...] | None]


class Summaries:
    """Plan summaries as a listing last read them, each kept with the stamps of the
    plan's record and status files (PlanStore.stamp) and read again once either changed:
    a listing of the same newest plans reads no file but their names and stamps. At most
    :attr:`limit` are kept, the least recently listed dropped first."""

    limit = 1024

    def __init__(self, store: PlanStore) -> None:
        self.store = store
        self._kept: dict[str, tuple[Stamps, PlanSummary]] = {}
        self._lock = threading.Lock()

    def get(self, plan_id: str, read: Callable[[str], PlanSummary]) -> PlanSummary:
        """``plan_id``'s summary: the one kept if its files are as they were read, else
        ``read(plan_id)`` (whose OpsbotError is the caller's), kept."""
        # Before the read: a change while it goes on makes the next stamp differ.
        stamps = self.store.stamp(plan_id)
        with self._lock:
            kept = self._kept.pop(plan_id, None)
            if kept is not None and kept[0] == stamps:
                self._kept[plan_id] = kept
                return kept[1]
        fresh = read(plan_id)
        with self._lock:
            self._kept[plan_id] = (stamps, fresh)
            while len(self._kept) > self.limit:
                del self._kept[next(iter(self._kept))]
        return fresh


class ExecutorService:
    def __init__(
        self,
        store: PlanStore,
        policy: ExecutorPolicy,
        now: Callable[[], datetime],
        approvals_dir: Path,
        policies: Callable[[], ExecutorPolicy] | None = None,
        read_units: UnitReader | None = None,
        config_state: Callable[[], ConfigState] | None = None,
    ) -> None:
        """``policies``, where given, is asked for the policy as it stands before each
        request (the config file read again when it changed); ``policy`` otherwise."""
        self.store = store
        self.policy = policy
        self.policies = policies
        self.now = now
        self.approvals_dir = approvals_dir
        #: How a VERIFIED report's units are read (systemctl show; tests give theirs).
        self.read_units = read_units or read_plan_units
        #: What check-config is told of the configuration in force (None: not known).
        self.config_state = config_state
        #: Submits refused since start because too many plans waited (logged with each).
        self.refused_waiting = 0
        #: The summaries the last listings read, each with the stamps of its files.
        self._summaries = Summaries(store)

    def handle(self, request: RequestModel, peer: Peer) -> Reply:
        # One policy for the whole request, whatever the file does meanwhile.
        policy = self.policies() if self.policies is not None else self.policy
        if request.op not in ALLOWED_OPS[peer.role]:
            log.warning(
                "request.refused",
                op=request.op,
                peer_uid=peer.uid,
                peer_pid=peer.pid,
                role=peer.role.value,
            )
            return Reject(reason=f"{peer.user} ({peer.role.value}) may not {request.op}")
        if isinstance(request, SubmitPlan):
            return self.submit(request, peer, policy)
        if isinstance(request, ListPlans):
            return self.list_plans(request)
        if isinstance(request, PendingVerification):
            return Pending(
                plans=pending(self.store, self.now()), settle_seconds=policy.settle_seconds
            )
        if isinstance(request, ReportVerification):
            return self.report(request, peer, policy)
        if isinstance(request, ShowConfig):
            if self.config_state is None:
                return Reject(reason="this executor does not know its configuration's file")
            return ConfigReply(**self.config_state().model_dump())
        return self.show(request.plan_id)

    def report(
        self, request: ReportVerification, peer: Peer, policy: ExecutorPolicy | None = None
    ) -> Recorded | Reject:
        settle = (self.policy if policy is None else policy).settle_seconds
        with structlog.contextvars.bound_contextvars(peer_uid=peer.uid, peer_pid=peer.pid):
            return record_report(
                self.store, request, peer.user, self.now(), settle, self.read_units
            )

    def submit(
        self, request: SubmitPlan, peer: Peer, policy: ExecutorPolicy | None = None
    ) -> Accept | Revise | Reject:
        policy = self.policy if policy is None else policy
        bind = structlog.contextvars.bound_contextvars
        with bind(run_id=request.run_id, peer_uid=peer.uid, peer_pid=peer.pid):
            parsed = parse_plan(request.plan)
            if not isinstance(parsed, Plan):
                revise = bounded_revise(parsed)
                log.info("plan.revise", errors=len(parsed), first=str(revise.errors[0]))
                return revise
            errors = policy_errors(parsed, policy)
            errors = errors or history_errors(parsed, self.store, policy, self.now())
            incident, refused = follow_up(parsed, self.store, policy, self.now())
            errors = errors or refused
            if errors:
                revise = bounded_revise(errors)
                log.info("plan.revise", errors=len(errors), first=str(revise.errors[0]))
                return revise
            provenance = Provenance(
                uid=peer.uid,
                user=peer.user,
                pid=peer.pid,
                run_id=request.run_id,
                symptom=request.symptom,
                evidence=request.evidence,
            )
            caps = WaitingCaps(
                ttl_seconds=policy.plan_ttl_seconds,
                per_submitter=policy.max_waiting_plans_per_submitter,
                total=policy.max_waiting_plans,
            )
            try:
                plan_id, sha, duplicate = self.store.add(
                    parsed, provenance, self.now(), incident=incident, caps=caps
                )
            except TooManyWaiting as exc:
                self.refused_waiting += 1
                log.warning(
                    "plan.too_many_waiting",
                    reason=exc.message,
                    refused_since_start=self.refused_waiting,
                    goal=parsed.goal,
                )
                return Reject(reason=f"{exc.message} ({exc.hint})")
            except StoreError as exc:
                log.error("plan.store_failed", error=exc.message)
                return Reject(reason=f"cannot store the plan: {exc.message}")
            log.info(
                "plan.accepted",
                plan_id=plan_id,
                sha256=sha,
                duplicate=duplicate,
                incident=incident or plan_id,
                follows=parsed.follows,
                goal=parsed.goal,
                steps="; ".join(shlex.join(a) for a in step_argv(parsed)),
            )
            return Accept(plan_id=plan_id, sha256=sha, duplicate=duplicate)

    def _read(self, plan_id: str) -> tuple[PlanRecord, StatusRecord, Plan | None]:
        record = self.store.load(plan_id)
        status = self.store.status(plan_id, record)
        try:
            plan: Plan | None = self.store.verified_plan(record)
        except TamperedPlan:
            plan = None
        return record, status, plan

    def list_plans(self, request: ListPlans) -> PlanList | Reject:
        """The ``limit`` newest plans (since ``since``): ids are times, so which those are
        is known from the names alone (listed again only when the store's directory
        changed), and only they are read, each again only when its files changed."""
        ids = self.store.ids()
        if request.since is not None:
            first = request.since.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
            ids = ids[bisect.bisect_left(ids, first) :]
        summaries: list[PlanSummary] = []
        for plan_id in ids[-request.limit :]:
            try:
                summaries.append(self._summaries.get(plan_id, lambda p: summary(*self._read(p))))
            except OpsbotError as exc:
                log.warning("plan.unreadable", plan_id=plan_id, error=exc.message)
        return PlanList(plans=summaries, total=len(ids))

    def show(self, plan_id: str) -> PlanDetail | Reject:
        try:
            record, status, plan = self._read(plan_id)
        except OpsbotError as exc:
            return Reject(reason=exc.message)
        if plan is None:
            return Reject(reason=f"plan {plan_id} was modified after it was stored; not shown")
        return PlanDetail(
            summary=summary(record, status, plan),
            plan=plan,
            argv=step_argv(plan),
            history=[t.model_dump(mode="json") for t in status.history],
            steps=status.steps,
        )
