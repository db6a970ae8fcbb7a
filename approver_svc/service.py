"""What the approver does for each request (the daemon has already decided that the
peer's uid may ask it): ``announce``, ``view``, ``decide`` and ``follow``.

Every request that names a token looks it up first, before reading anything else: an
unknown, used or expired token costs one hash and a dictionary lookup. ``decide`` then
checks the approver's TOTP code (each code once; wrong ones bounded) and the link's
confirmation (the code was typed for this link's decision), and that the stored record
still has the sha256 the token was minted for. The rest is the road every approval
takes (plans.road, as ``opsbot approve`` and the standing rules take it): the
executor's own ``plan.accepted`` journal entry must name that sha256, the plan must
still wait (PROPOSED, not expired: a click never rewrites root's approval) and pass the
road's checks; only then is the token used up (and its sibling with it), and the
approval written, bound to that full sha256. A reject goes through plans.reject, as
``opsbot reject`` does. ``follow`` only reads: the state of the
plan a used token decided, for as long as the token is remembered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from approver_svc import news, rules, tokens, totp
from approver_svc.desk import Desk
from approver_svc.errors import Refusal
from approver_svc.state import ApproverState
from approver_svc.view import followed, plan_brief
from plans import (
    Person,
    PlanRecord,
    Request,
    TamperedPlan,
    new_plan_id,
    plan_expiry,
    reject,
    rejection_reason,
)
from shared_io.errors import OpsbotError, StoreError
from shared_schema import PlanState
from shared_schema.approver_socket import (
    Announce,
    Announced,
    ApplyRules,
    Decide,
    Decided,
    Follow,
    Followed,
    Link,
    Notice,
    PolicyReport,
    PolicyReported,
    PolicySwitch,
    PolicySwitched,
    RulesApplied,
    View,
    Viewed,
)

__all__ = ["ApproverService"]

log = structlog.get_logger("opsbot.approver")

#: At most this many plans per announce (the rest wait for the next one, older ones
#: last), so that the reply stays far under MAX_APPROVER_REPLY_BYTES.
MAX_NOTICES = 20
#: Links live at once (unused, unexpired): no more are minted past it. With the
#: executor's cap on waiting plans this is never reached by an honest host.
MAX_LIVE_TOKENS = 2000


@dataclass
class ApproverService(Desk):
    """The approver's requests, against the desk's store, approvals directory and config."""

    # -- announce ---------------------------------------------------------------------

    def announce(self, request: Announce) -> Announced:
        """Links for every plan that waits and was not announced: PROPOSED, not expired,
        its bytes verified, the executor's journal entry naming its sha256. The standing
        rules are asked first (a plan a rule approves gets no links), and the plans they
        approved since the last announce are told."""
        now = self.now()
        state = self.state.load()
        state.prune(now, totp.MEMORY_SECONDS)
        rules.apply_rules(self, state, now)
        ruled = rules.untold(self, state, now)
        outcomes = news.outcomes(self, state, now)
        approvers = sorted(self.config.approvers)
        if not approvers:
            self.state.save(state)
            log.warning("announce.no_approvers", hint="add [approvers.NAME] to opsbot.toml")
            return Announced(notices=[])
        notices: list[Notice] = []
        # Only plans young enough to wait: ids begin with their submission time, so the
        # old ones are passed over without reading them (a store of years stays cheap).
        oldest = new_plan_id(now - _seconds(self.policy.plan_ttl_seconds))[:15]
        # Newest first: the plan just stored is the one an approver waits to hear of; a
        # backlog (a host where approvers were just configured) follows in later batches.
        live = state.live_tokens()
        for plan_id in reversed(self.store.ids()):
            if len(notices) >= MAX_NOTICES or plan_id[:15] < oldest:
                break
            if plan_id in state.announced:
                continue
            if live + 2 * len(approvers) > MAX_LIVE_TOKENS:
                log.warning(
                    "announce.backlog",
                    reason=f"{MAX_LIVE_TOKENS} links are live; older plans wait until "
                    "links are used or expire",
                    plan_id=plan_id,
                )
                break
            notice = self._notice(state, plan_id, approvers, now)
            if notice is not None:
                notices.append(notice)
                live += len(notice.links)
        self.state.save(state)
        if notices:
            log.info("plans.announced", plans=" ".join(n.plan.plan_id for n in notices))
        return Announced(notices=notices, ruled=ruled, outcomes=outcomes)

    # -- standing rules ---------------------------------------------------------------

    def apply_rules(self, request: ApplyRules) -> RulesApplied:
        """Ask the rules about each plan that waits (approver_svc.rules)."""
        now = self.now()
        state = self.state.load()
        decided = rules.apply_rules(self, state, now)
        self.state.save(state)
        return RulesApplied(decided=decided, paused=state.paused)

    def policy_report(self, request: PolicyReport) -> PolicyReported:
        return rules.report(self, self.state.load(), request.records_since, request.after)

    def policy_switch(self, request: PolicySwitch) -> PolicySwitched:
        state = self.state.load()
        pause = rules.switch(state, request.paused, request.by, request.reason, self.now())
        self.state.save(state)
        return PolicySwitched(pause=pause)

    def _notice(
        self, state: ApproverState, plan_id: str, approvers: list[str], now: datetime
    ) -> Notice | None:
        try:
            record = self.store.load(plan_id)
            status = self.store.status(plan_id, record)
            if status.state is not PlanState.PROPOSED:
                return None
            expires = plan_expiry(record, self.policy)
            if now >= expires or rejection_reason(self.approvals_dir, plan_id):
                return None
            plan = self.store.verified_plan(record)
        except OpsbotError as exc:
            log.warning("announce.skipped", plan_id=plan_id, reason=exc.message)
            return None
        accepted = self.witness(plan_id)
        if accepted.sha256s != {record.sha256}:
            log.warning(
                "announce.unwitnessed",
                plan_id=plan_id,
                sha256=record.sha256,
                reason="no plan.accepted entry of opsbot-executor.service names this sha256",
            )
            return None
        view = self.plan_view(record, status, plan, now)
        until = min(now + _seconds(self.policy.approval_ttl_seconds), expires)
        links = []
        for name in approvers:
            for decision in ("approve", "reject"):
                token, confirm = tokens.mint(
                    state,
                    plan_id=plan_id,
                    sha256=record.sha256,
                    approver=name,
                    decision=decision,
                    expires_at=until,
                )
                links.append(
                    Link(
                        approver=name,
                        decision=decision,
                        token=token,
                        confirm=confirm,
                        expires_at=until,
                    )
                )
        state.announced[plan_id] = expires
        return Notice(plan=view, links=links)

    # -- view -------------------------------------------------------------------------

    def view(self, request: View) -> Viewed:
        """What a token is for, read now; changes nothing (no attempt counted, no save)."""
        now = self.now()
        state = self.state.load()
        _, token = tokens.lookup(state, request.token, now)
        record = self._record(token.plan_id, token.sha256)
        try:
            plan = self.store.verified_plan(record)
            status = self.store.status(record.plan_id, record)
        except OpsbotError as exc:
            raise Refusal("plan", exc.message) from exc
        view = self.plan_view(record, status, plan, now)
        return Viewed(
            plan=view, approver=token.approver, decision=token.decision, expires_at=token.expires_at
        )

    def _record(self, plan_id: str, sha256: str) -> PlanRecord:
        """The stored record of ``plan_id``, if it still has the sha256 of the link."""
        try:
            record = self.store.load(plan_id)
        except OpsbotError as exc:
            raise Refusal("plan", exc.message) from exc
        if record.sha256 != sha256:
            raise Refusal(
                "plan",
                f"plan {plan_id} is not the plan this link was made for: its sha256 is now "
                f"{record.sha256[:16]}..., the link's {sha256[:16]}...; nothing was approved",
                hint="find out who wrote /var/lib/opsbot/plans; diagnose again for a new plan",
            )
        return record

    def follow(self, request: Follow) -> Followed:
        """Where the plan a used token decided, or a status link shows, is now; changes
        nothing."""
        state, now = self.state.load(), self.now()
        watch = news.watched(state, request.token, now)
        if watch is not None:
            plan_id, sha256 = watch.plan_id, watch.sha256
        else:
            token, at = tokens.decided(state, request.token, now)
            plan_id, sha256 = token.plan_id, token.sha256
        record = self._record(plan_id, sha256)
        try:
            plan = self.store.verified_plan(record)
            status = self.store.status(record.plan_id, record)
        except OpsbotError as exc:
            raise Refusal("plan", exc.message) from exc
        brief = plan_brief(record, plan, self.host)
        by, approved_at = news.approved_by(status)
        if watch is not None:
            return followed(brief, status, approved_by=by, approved_at=approved_at)
        return followed(
            brief,
            status,
            decision=token.decision,
            approver=token.approver,
            at=at,
            approved_by=by,
            approved_at=approved_at,
        )

    # -- decide -----------------------------------------------------------------------

    def decide(self, request: Decide) -> Decided:
        """Token, then code, then plan; then the approval (or rejection) root writes."""
        now = self.now()
        state = self.state.load()
        state.prune(now, totp.MEMORY_SECONDS)
        key, token = tokens.lookup(state, request.token, now)
        name = token.approver
        if name not in self.config.approvers:
            raise Refusal(
                "token",
                f"{name} is no longer an approver ([approvers.{name}] is not in opsbot.toml)",
            )
        source = request.source
        if totp.source_locked(state, source, now):
            raise totp.source_refusal()
        if totp.locked(state, name, now) and totp.tainted(state, token, source, now):
            # Locked for the links and the addresses that gave wrong codes; a link no
            # one guessed at, from an address that guessed nothing, still works: one
            # who saw a message cannot lock its approver out of every plan.
            raise totp.lockout_refusal(name)
        secret = totp.read_secret(self.credentials, name)
        try:
            totp.check_code(state, key, token, secret, request.code, now, source)
            totp.check_confirm(state, key, token, request.confirm, now, source)
        finally:
            # The code is spent (or the failure counted) whatever the plan turns out to be.
            self.state.save(state)
        if token.decision == "reject":
            return self._reject(state, key, token.plan_id, token.sha256, name, request, now)
        record = self._record(token.plan_id, token.sha256)
        # Where the road got to: a refusal before the link is spent is the plan's; a
        # state that cannot be saved is the approver's own failure (internal); after it,
        # the link stays used but decided nothing.
        phase = "review"

        def spend(_reviewed: object) -> None:
            """The plan passed every check but the write: the link is used up now."""
            nonlocal phase
            phase = "spending"
            tokens.use_up(state, key, now)
            self.state.save(state)
            phase = "spent"

        try:
            granted = self.road.approve(
                Request(
                    plan_id=record.plan_id,
                    sha256=token.sha256,
                    by=Person(name, via="web"),
                    ttl_seconds=self.policy.approval_ttl_seconds,
                    now=now,
                    facts={"source": request.source, "reason": request.reason},
                ),
                commit=spend,
            )
        except OpsbotError as exc:
            if phase == "review":
                raise Refusal("plan", exc.message, hint=exc.hint) from exc
            if phase == "spending":
                raise
            self._spent(state, key)
            if _store_failure(exc):
                raise
            raise Refusal("plan", exc.message, hint=exc.hint) from exc
        approved, applies = granted.approved, granted.applies
        if not approved.window.open:
            # The road's words say when (plans.window_apply): "applies in its apply window,
            # Wed ...: opsbot-apply.timer runs it then"; the page says it of the plan.
            applies = "it runs " + applies.removeprefix("applies ")
        return Decided(
            decision="approve",
            plan_id=record.plan_id,
            sha256=record.sha256,
            approver=name,
            approval_expires_at=approved.approval.expires_at,
            applies=applies[:2000],
            plan=plan_brief(granted.reviewed.record, granted.reviewed.plan, self.host),
        )

    def _spent(self, state: ApproverState, key: str) -> None:
        """The token was used up before the decision, which then failed: it stays used
        (a link works once), but it decided nothing, so ``follow`` does not say it did."""
        tokens.decided_nothing(state, key)
        self.state.save(state)

    def _reject(
        self,
        state: ApproverState,
        key: str,
        plan_id: str,
        sha256: str,
        name: str,
        request: Decide,
        now: datetime,
    ) -> Decided:
        """A reject link: the plan never runs, whichever bytes its record holds now."""
        tokens.use_up(state, key, now)
        self.state.save(state)
        try:
            reject(
                self.store,
                self.approvals_dir,
                plan_id,
                by=name,
                now=now,
                reason=request.reason or f"rejected by {name} from the approval page",
            )
        except OpsbotError as exc:
            self._spent(state, key)
            if _store_failure(exc):
                raise
            raise Refusal("plan", exc.message, hint=exc.hint) from exc
        log.info(
            "rejection.web",
            plan_id=plan_id,
            sha256=sha256,
            approver=name,
            via="web",
            source=request.source,
            reason=request.reason,
        )
        return Decided(decision="reject", plan_id=plan_id, sha256=sha256, approver=name)


def _store_failure(exc: OpsbotError) -> bool:
    """A store that cannot be read or written is the approver's failure (``internal``),
    not the plan's; a plan whose bytes changed is the plan's."""
    return isinstance(exc, StoreError) and not isinstance(exc, TamperedPlan)


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
