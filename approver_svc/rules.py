"""The standing rules at work in root's approver: each PROPOSED plan is asked about once.

For every plan that waits (PROPOSED, not expired, not rejected, its bytes verified, the
executor's ``plan.accepted`` entry naming its sha256) and that the rules were not asked
about before, oldest first, plans.standing decides twice: among the ``enforce`` rules,
then among the ``shadow`` ones. An enforce rule that approves takes the road a human's
approval takes (plans.road: bound to the sha256 read here, single use, for at most
:data:`RULE_APPROVAL_TTL_SECONDS`), recorded as ``approved_by_rule`` with the rule's
sha256 and never as an approver, and the apply is started; the approvers are told with the
next ``announce``. A shadow rule only leaves a record. While the policy is paused
(``opsbot policy pause``) nothing is approved and each plan's record says so.

Each decision is kept in the approver's state (approver_svc.state: bounded, oldest
dropped first) for ``opsbot policy report``, and journaled.
"""

from __future__ import annotations

import functools
from collections import Counter
from datetime import datetime, timedelta

import structlog

from approver_svc import news
from approver_svc.desk import Desk
from approver_svc.state import ApproverState
from approver_svc.view import plan_brief
from plans import PlanError, Request, Rule, new_plan_id, plan_expiry, rejection_reason
from plans.preconditions import expectation_mismatch
from plans.readings import ProbesSpent, Reading, RunProbes, UnitReading
from plans.rule_facts import Kept
from plans.standing import (
    ForHumans,
    RuleApproves,
    StoreIndex,
    UnitHistory,
    decide,
    out_of_reach,
    recent_errors,
)
from shared_io.errors import OpsbotError
from shared_schema import Plan, PlanState
from shared_schema.approver_socket import (
    Pause,
    PolicyReported,
    RuleDecision,
    RuleNotice,
    RuleSummary,
)
from shared_schema.standing import ApproveRule

log = structlog.get_logger("opsbot.approver")

#: A rule's approval holds this long at most (less where approval_ttl_seconds is less):
#: it is written for an apply that starts now.
RULE_APPROVAL_TTL_SECONDS = 600
#: Plans asked about per request: a flood is taken in turns, oldest first (those some
#: rule reaches before those none does).
MAX_PER_RUN = 50
#: A record's reasons: the first rules' (in the order asked), each cut to a line.
MAX_REFUSED = 8
MAX_LINE = 300
MAX_UNITS = 16
#: Reasons listed per rule in the report (the most frequent).
MAX_REASONS = 10
#: Decisions the report lists one by one.
MAX_RECENT = 50
#: The bytes of records one report sends at most (a page; the reply's limit is twice it).
PAGE_BYTES = 512 * 1024


def apply_rules(desk: Desk, state: ApproverState, now: datetime) -> list[RuleDecision]:
    """Ask the rules about each waiting plan not asked about before; what they decided.
    Each approval is saved in ``state`` as soon as it is written."""
    rules = desk.config.approve.rule
    if not rules:
        return []
    oldest = new_plan_id(now - timedelta(seconds=desk.policy.plan_ttl_seconds))[:15]
    waiting = [
        plan_id
        for plan_id in desk.store.ids()
        if plan_id[:15] >= oldest and plan_id not in state.ruled and plan_id > state.ruled_floor
    ]
    decided: list[RuleDecision] = []
    index: StoreIndex | None = None
    probes = RunProbes()
    for plan_id in sorted(waiting, key=functools.partial(_in_turn, desk, rules)):
        if len(decided) >= MAX_PER_RUN:
            break
        if index is None:  # read once per run, and only when a plan may be decided
            index = StoreIndex.read(desk.store)
        try:
            decision = _decide(desk, state, index, plan_id, rules, now, probes)
        except ProbesSpent as exc:  # the others wait for the next run, undecided
            log.info("rules.probes_spent", plan_id=plan_id, reason=str(exc))
            break
        except Exception:  # one plan's failure must not keep the rules from the others
            log.exception("rules.crashed", plan_id=plan_id)
            continue
        if decision is None:
            continue
        state.record_rule(decision)
        decided.append(decision)
        if decision.outcome == "approved":
            index.reread(desk.store, plan_id)
            desk.state.save(state)  # root's count of the rule's approvals, at once
    return decided


def _in_turn(desk: Desk, rules: list[ApproveRule], plan_id: str) -> tuple[bool, str]:
    """Where a plan comes in a run: those some rule reaches first, then those none does
    (plans.standing.out_of_reach), each oldest first; a flood of plans no rule reaches
    never keeps one it would fix waiting, and gets its records in turns."""
    try:
        plan = desk.store.verified_plan(desk.store.load(plan_id))
    except OpsbotError:
        return (False, plan_id)  # skipped in its turn (rules.skipped says why)
    return (all(out_of_reach(plan, rule, desk.policy) for rule in rules), plan_id)


def _holds(plan: Plan, reading: UnitReading) -> bool:
    """Whether each precondition ``plan`` puts on the unit holds as systemd said it: a
    plan that would go STALE is refused without a probe."""
    return all(
        expectation_mismatch(step.expect, reading.state()) is None
        for step in plan.steps
        if step.expect is not None and step.args.unit == reading.unit
    )


def _line(text: str) -> str:
    """One line of a record, cut to what the record holds."""
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def _decide(
    desk: Desk,
    state: ApproverState,
    index: StoreIndex,
    plan_id: str,
    rules: list[ApproveRule],
    now: datetime,
    probes: RunProbes,
) -> RuleDecision | None:
    store = desk.store
    try:
        record = store.load(plan_id)
        status = store.status(plan_id, record)
        if status.state is not PlanState.PROPOSED:
            return None  # decided before the rules were asked: nothing to record
        if now >= plan_expiry(record, desk.policy) or rejection_reason(desk.approvals_dir, plan_id):
            return None
        plan = store.verified_plan(record)
    except OpsbotError as exc:
        log.warning("rules.skipped", plan_id=plan_id, reason=exc.message)
        return None
    seen = {
        "plan_id": plan_id,
        "sha256": record.sha256,
        "at": now,
        "units": plan.units()[:MAX_UNITS],
        "tools": sorted({step.tool for step in plan.steps}),
    }
    if state.paused and state.pause is not None:
        why = f"the policy is paused (by {state.pause.by}; `opsbot policy resume`)"
        log.info("rules.paused", plan_id=plan_id)
        return RuleDecision(**seen, outcome="for humans", refused=[_line(why)])
    accepted = desk.witness(plan_id)
    if accepted.sha256s != {record.sha256}:
        # Asked again next time: the journal may not have the executor's entry yet.
        why = "no plan.accepted entry of opsbot-executor.service names its sha256"
        log.warning("rules.unwitnessed", plan_id=plan_id, sha256=record.sha256, reason=why)
        return None

    def history(unit: str) -> UnitHistory:
        """The unit's history; a rule's approvals counted from the store's statuses (the
        executor's files) and this approver's own record (root's) together, so that
        neither alone can reset a rule's limit."""
        told = index.history(unit, skip=plan_id)
        ours = state.approved_by_rules(unit)
        by_rule = {
            rule: tuple(sorted({*told.by_rule.get(rule, ()), *ours.get(rule, ())}))
            for rule in {*told.by_rule, *ours}
        }
        return UnitHistory(told.in_flight, told.last_ran, by_rule)

    read: list[Reading] = []

    def reading() -> Reading:
        """Root's reading of the plan's units, made once for both asks, and only when a
        rule's other checks hold."""
        if not read:
            read.append(desk.reading(plan.units(), functools.partial(_holds, plan), probes))
        return read[0]

    # Each answer the rules get is kept with the record: `opsbot replay --rules` asks
    # another rule again from it, never from the host (plans.rule_facts).
    kept = Kept(history, recent_errors(store, desk.policy, now), reading)
    ask = functools.partial(
        decide,
        plan,
        status.state,
        policy=desk.policy,
        history=kept.history,
        recent=kept.recent,
        now=now,
        reading=kept.reading,
        analyze=desk.analyze,
    )
    enforcing = ask([rule for rule in rules if rule.mode == "enforce"])
    shadowing = ask([rule for rule in rules if rule.mode == "shadow"])
    refused = [
        _line(f"{refusal.rule}: {refusal.reason}")
        for answer in (enforcing, shadowing)
        if isinstance(answer, ForHumans)
        for refusal in answer.refused
    ][:MAX_REFUSED]
    shadow = shadowing.rule if isinstance(shadowing, RuleApproves) else None
    seen["facts"] = kept.facts()
    if read:
        seen["read"] = [_line(read[0].of(unit).words()) for unit in plan.units()[:MAX_UNITS]]
    if isinstance(enforcing, RuleApproves):
        rule = enforcing.rule
        # Made before the approval is written: a record that cannot be made approves nothing.
        approved = RuleDecision(
            **seen,
            outcome="approved",
            rule=rule.name,
            rule_sha256=rule.sha256,
            shadow_rule=shadow.name if shadow else "",
            refused=refused,
        )
        try:
            desk.road.approve(
                Request(
                    plan_id=plan_id,
                    sha256=record.sha256,
                    by=Rule(rule.name, rule.sha256),
                    ttl_seconds=min(desk.policy.approval_ttl_seconds, RULE_APPROVAL_TTL_SECONDS),
                    now=now,
                ),
                witnessed=accepted,
            )
        except OpsbotError as exc:
            log.error("rules.approval_failed", plan_id=plan_id, rule=rule.name, error=exc.message)
            why = _line(f"{rule.name}: the approval was not written: {exc.message}")
            return approved.model_copy(
                update={"outcome": "failed", "refused": [why, *refused][:MAX_REFUSED]}
            )
        return approved
    if shadow is not None:
        log.info("rules.would_approve", plan_id=plan_id, rule=shadow.name)
        return RuleDecision(
            **seen,
            outcome="would approve",
            rule=shadow.name,
            rule_sha256=shadow.sha256,
            refused=refused,
        )
    log.info("rules.for_humans", plan_id=plan_id, refused=len(refused))
    return RuleDecision(**seen, outcome="for humans", refused=refused)


def untold(desk: Desk, state: ApproverState, now: datetime) -> list[RuleNotice]:
    """What to tell the approvers: each plan a rule approved in the last
    news.OUTCOME_HORIZON that they were not told of (each is marked told)."""
    approvers = sorted(desk.config.approvers)
    notices = []
    for plan_id, decision in sorted(state.ruled.items()):
        if decision.outcome != "approved" or decision.told:
            continue
        state.ruled[plan_id] = decision.model_copy(update={"told": True})
        if not approvers or now - decision.at >= news.OUTCOME_HORIZON:
            continue  # no one to tell; or old news (approvers configured since)
        try:
            record = desk.store.load(plan_id)
            plan = desk.store.verified_plan(record)
            status = desk.store.status(plan_id, record)
        except OpsbotError as exc:
            log.warning("rules.untold", plan_id=plan_id, reason=exc.message)
            continue
        view = desk.plan_view(record, status, plan, now)
        notices.append(
            RuleNotice(
                plan=plan_brief(record, plan, desk.host),
                rule=decision.rule,
                rule_sha256=decision.rule_sha256,
                why=view.evidence[:2],
                approved_at=decision.at,
                runs="" if status.waits_for_window is None else view.runs,
                approvers=approvers,
                watch=news.watch(state, plan_id, record.sha256, now),
            )
        )
    return notices


def switch(state: ApproverState, paused: bool, by: str, reason: str, now: datetime) -> Pause:
    """Pause or resume every rule; journaled."""
    state.pause = Pause(paused=paused, by=by, at=now, reason=reason)
    event = "policy.paused" if paused else "policy.resumed"
    log.warning(event, by=by, reason=reason or None)
    return state.pause


def report(
    desk: Desk, state: ApproverState, since: datetime | None = None, after: str = ""
) -> PolicyReported:
    """Per rule: how many plans it approved, would have approved (and how each of those
    ended), and why it did not approve the others; with ``since``, a page of the records
    of the plans decided since then, after plan id ``after`` (:func:`records_page`)."""
    modes: dict[str, str] = {rule.name: rule.mode for rule in desk.config.approve.rule}
    approved: Counter[str] = Counter()
    would: Counter[str] = Counter()
    ended: dict[str, Counter[str]] = {}
    reasons: dict[str, Counter[str]] = {}
    for decision in state.ruled.values():
        if decision.outcome == "approved":
            approved[decision.rule] += 1
        elif decision.outcome == "would approve":
            would[decision.rule] += 1
            ended.setdefault(decision.rule, Counter())[_now_state(desk, decision.plan_id)] += 1
        if decision.rule:
            modes.setdefault(decision.rule, "removed")
        for line in decision.refused:
            name, _, reason = line.partition(": ")
            if name in modes:
                reasons.setdefault(name, Counter())[reason] += 1
    rules = [
        RuleSummary(
            name=name,
            mode=mode,
            approved=approved[name],
            would_approve=would[name],
            ended=dict(ended.get(name, Counter()).most_common()),
            refused=dict(reasons.get(name, Counter()).most_common(MAX_REASONS)),
        )
        for name, mode in modes.items()
    ]
    newest = sorted(state.ruled.values(), key=lambda d: d.plan_id, reverse=True)[:MAX_RECENT]
    # The facts go only in a page of records (records_page): the reply keeps its bytes.
    recent = [d.model_copy(update={"facts": None}) for d in newest]
    sent, more = records_page(state, since, after) if since is not None else ([], False)
    return PolicyReported(
        rules=rules,
        records=len(state.ruled),
        dropped=state.ruled_dropped,
        recent=recent,
        pause=state.pause,
        records_sent=sent,
        more=more,
    )


def records_page(
    state: ApproverState, since: datetime, after: str
) -> tuple[list[RuleDecision], bool]:
    """The records of plans decided at or after ``since`` whose id sorts after ``after``,
    oldest first, as many as :data:`PAGE_BYTES` hold (one at least); and whether more
    are left."""
    due = sorted(
        (d for d in state.ruled.values() if d.at >= since and d.plan_id > after),
        key=lambda d: d.plan_id,
    )
    page: list[RuleDecision] = []
    size = 0
    for decision in due:
        size += len(decision.model_dump_json())
        if page and size > PAGE_BYTES:
            return page, True
        page.append(decision)
    return page, False


def _now_state(desk: Desk, plan_id: str) -> str:
    """The plan's state now, as the report counts it (a human approved it, or not)."""
    try:
        status = desk.store.status(plan_id)
    except PlanError:
        return "gone"
    except OpsbotError:
        return "unreadable"
    return str(status.state)


__all__ = ["RULE_APPROVAL_TTL_SECONDS", "apply_rules", "report", "switch", "untold"]
