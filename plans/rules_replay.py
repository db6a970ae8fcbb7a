"""``opsbot replay --rules FILE``: what each standing rule in FILE would have approved of
the plans recorded in a period, and how those plans ended.

Each rule is asked about each plan alone, by plans.standing.decide (the one place that
decides), as it stood when root's approver asked its own rules about that plan: the plan
PROPOSED, the clock at the record's time (the rule's windows), and the host's part (what
opsbot's recent plans forbade it, each unit's history, root's reading of its units) from
the facts the approver kept with its record (plans.rule_facts), never read now. The
allowlist and the apply windows are ``[executor]`` as the config stands now.

A plan is **not replayable** for a rule where the rule's decision needs a fact the record
does not hold: the approver kept no record of the plan (no rule was asked then, the
record was dropped, or the plan is older than the rules), the record is of an older
opsbot that kept no facts, the policy was paused then, or the rule gets further than the
approver's own rules got (its reading was never taken). Each is listed with why; none is
guessed. A rule that cannot reach the plan at all (a tool or unit not its own, past the
allowlist, no precondition) refuses it whether or not there is a record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plans.rule_facts import NotRecorded, Recorded
from plans.standing import ForHumans, decide, out_of_reach
from plans.store import PlanStore
from plans.windows import Analyzer, systemd_analyze
from shared_io.errors import OpsbotError
from shared_schema import ExecutorPolicy, Plan, PlanState
from shared_schema.approver_socket import RuleDecision
from shared_schema.standing import ApproveRule

__all__ = ["RecordedPlan", "RuleReplayed", "recorded", "replay_rules", "stored"]


@dataclass(frozen=True)
class RecordedPlan:
    """A plan diagnosis proposed in the period: its id, its sha256 and its steps, and how
    it ended (the executor's state, or opsbot-verify's VERIFIED/UNRESOLVED)."""

    plan_id: str
    sha256: str
    plan: Plan
    ended: str


@dataclass
class RuleReplayed:
    """One rule over the recorded plans."""

    name: str
    mode: str
    approved: list[dict[str, Any]] = field(default_factory=list)
    ended: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    not_replayable: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "would_approve": len(self.approved),
            "approved": self.approved,
            "ended": dict(self.ended.most_common()),
            "refused": dict(self.refused.most_common()),
            "not_replayable": self.not_replayable,
        }


def replay_rules(
    rules: Sequence[ApproveRule],
    policy: ExecutorPolicy,
    plans: Iterable[RecordedPlan],
    decisions: Mapping[str, RuleDecision],
    analyze: Analyzer = systemd_analyze,
) -> list[RuleReplayed]:
    """Per rule of ``rules``, what it would have approved of ``plans``, asked from the
    approver's records ``decisions`` (by plan id)."""
    replayed = [RuleReplayed(rule.name, rule.mode) for rule in rules]
    for recorded in sorted(plans, key=lambda p: p.plan_id):
        record = decisions.get(recorded.plan_id)
        for rule, said in zip(rules, replayed, strict=True):
            _ask(rule, said, recorded, record, policy, analyze)
    return replayed


def _ask(
    rule: ApproveRule,
    said: RuleReplayed,
    recorded: RecordedPlan,
    record: RuleDecision | None,
    policy: ExecutorPolicy,
    analyze: Analyzer,
) -> None:
    plan = recorded.plan
    outside = out_of_reach(plan, rule, policy)
    if outside is not None:
        said.refused[outside] += 1
        return
    why = _unreplayable(recorded, record)
    if why is not None or record is None or record.facts is None:
        said.not_replayable.append({"plan_id": recorded.plan_id, "why": why or "no record"})
        return
    facts = Recorded(record.facts, plan)
    try:
        decision = decide(
            plan,
            PlanState.PROPOSED,  # the approver records a plan only while it waits
            [rule],
            policy,
            history=facts.history,
            recent=facts.recent,
            now=record.at,
            reading=facts.reading,
            analyze=analyze,
        )
    except NotRecorded as exc:
        why = f"its decision needs {exc.what}, which the record does not hold"
        said.not_replayable.append({"plan_id": recorded.plan_id, "why": why})
        return
    if isinstance(decision, ForHumans):
        for refusal in decision.refused:
            said.refused[refusal.reason] += 1
        return
    said.approved.append(
        {
            "plan_id": recorded.plan_id,
            "at": record.at.isoformat(),
            "units": plan.units(),
            "steps": [f"{step.tool} {step.args.unit}" for step in plan.steps],
            "ended": recorded.ended,
        }
    )
    said.ended[recorded.ended] += 1


def _unreplayable(recorded: RecordedPlan, record: RuleDecision | None) -> str | None:
    """Why the approver's record cannot stand for the host then, or None."""
    if record is None:
        return "root's approver kept no record of it (no rule was asked, or it was dropped)"
    if record.sha256 != recorded.sha256:
        return "the approver's record is of other bytes than the plan recorded"
    if record.facts is None:
        paused = any("the policy is paused" in line for line in record.refused)
        if paused:
            return "the rules were paused then: none was asked"
        return (
            "the approver's record holds no facts (kept by an older opsbot, or shed to "
            "keep its state within its bytes)"
        )
    return None


def recorded(
    plan_id: str, sha256: str, plan: Plan, outcome: str | None, store: PlanStore
) -> RecordedPlan:
    """A plan as a diagnosis recorded it, and how it ended: its state in the executor's
    store (read only) where the store still holds these bytes, else the outcome
    opsbot-verify filed with the records, else ``gone``."""
    ended = outcome or "gone"
    try:
        record = store.load(plan_id)
        if record.sha256 == sha256:
            ended = str(store.status(plan_id, record).state)
    except OpsbotError:
        pass  # pruned, or not to be believed: the record's word, or gone
    return RecordedPlan(plan_id, sha256, plan, ended)


def stored(store: PlanStore, plan_id: str) -> RecordedPlan:
    """``plan_id`` as the executor's store holds it, read only (its bytes verified), and
    its state there now (as ``opsbot policy report`` says how a plan ended). Raises
    plans.PlanError (shared_io's OpsbotError) where it is gone or cannot be believed."""
    record = store.load(plan_id)
    plan = store.verified_plan(record)
    return RecordedPlan(plan_id, record.sha256, plan, str(store.status(plan_id, record).state))
