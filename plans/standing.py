"""Whether a standing approval rule (``[[approve.rule]]``, shared_schema/standing.py) would
approve a plan, and why not: the one place that decides it.

A rule approves a plan only when every one of these holds, asked in this order:

1. the plan waits for approval (PROPOSED);
2. each step's tool is one the rule names;
3. each step's unit matches one of the rule's units, and is in ``[executor.allow]`` for
   that tool as the config stands now (a rule never reaches past the allowlist), and the
   step has a precondition (``expect``: the state diagnosis saw, which the executor checks
   live before it runs, so an unattended step never acts on a unit that changed since);
4. one of the rule's windows is open now (a rule without windows: any time), and the
   executor's apply windows are (a rule's approval is for an apply now);
5. opsbot's recent plans allow the steps (plans.verification.history_errors: the
   restart budget, and never the very steps of a plan that ended UNRESOLVED);
6. each unit's history: no plan of it is in flight (approved, applying, or applied and
   not yet judged), and the newest that ran ended VERIFIED (or none ran). An UNRESOLVED,
   FAILED or INTERRUPTED one suspends every rule for that unit until a later plan, which
   a human approves, ends VERIFIED;
7. the rules together approved fewer than the rule's ``max_per_unit`` plans of each unit
   within its ``period``: the budget is the unit's, shared by every rule that reaches it
   (two rules do not give it twice the restarts; a renamed rule does not reset it);
8. root's own reading of each step's unit, now (plans.readings), never the plan's words:
   the unit shows a failure (systemd says it failed, or one of its own health targets
   fails as root probes it), its precondition holds as root reads it (a step that would
   go STALE at once does not spend the unit's budget), and, where the rule names
   ``causes``, its Result= as systemd says it now is one of them.

The first rule that approves decides (:class:`RuleApproves`); otherwise the plan is for
humans (:class:`ForHumans`), with each rule's first reason. A rule's ``mode`` does not
change the decision, only what is done with it (shadow: recorded, never written).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from plans.errors import PlanError
from plans.preconditions import expectation_mismatch
from plans.readings import Reading
from plans.records import PlanRecord, StatusRecord
from plans.store import PlanStore
from plans.verification import history_errors
from plans.windows import Analyzer, systemd_analyze, window_state
from shared_io.errors import OpsbotError
from shared_schema import ExecutorPolicy, Plan, PlanState
from shared_schema.standing import ApproveRule

#: A plan of the unit is on its way: approved, running, or ran and not yet judged.
IN_FLIGHT = frozenset({PlanState.APPROVED, PlanState.APPLYING, PlanState.APPLIED})
#: The ends of a plan that ran and did not fix what it was for.
NOT_FIXED = frozenset({PlanState.UNRESOLVED, PlanState.FAILED, PlanState.INTERRUPTED})


@dataclass(frozen=True)
class RuleApproves:
    """``rule`` approves the plan (in its mode)."""

    rule: ApproveRule


@dataclass(frozen=True)
class Refused:
    """Why one rule does not approve the plan."""

    rule: str
    reason: str


@dataclass(frozen=True)
class ForHumans:
    """No rule approves the plan: it waits for a human, as without rules."""

    refused: tuple[Refused, ...]


Decision = RuleApproves | ForHumans


@dataclass(frozen=True)
class UnitHistory:
    """A unit as opsbot's stored plans tell it: a plan of it in flight, how the newest
    that ran ended (None: none ran), and when each rule approved a plan of it."""

    in_flight: str | None
    last_ran: tuple[str, PlanState] | None
    by_rule: dict[str, tuple[datetime, ...]] = field(default_factory=dict)

    def approvals(self, since: datetime) -> int:
        """How many plans of the unit the rules, any of them, approved since ``since``."""
        return sum(1 for ats in self.by_rule.values() for at in ats if at >= since)


@dataclass
class StoreIndex:
    """Every retained plan's units and status, read once (one run of the rules asks about
    many plans and units: each reads this, not the store). A plan that cannot be read is
    kept by id with why: every history fails closed while there is one."""

    entries: dict[str, tuple[frozenset[str], StatusRecord]] = field(default_factory=dict)
    #: plan id -> (why it cannot be read, the units its stored text names: empty where
    #: even that cannot be read, and then it keeps every unit back).
    unreadable: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, store: PlanStore) -> StoreIndex:
        index = cls()
        for plan_id in store.ids():
            index.reread(store, plan_id)
        return index

    def reread(self, store: PlanStore, plan_id: str) -> None:
        """Read ``plan_id`` again (after a rule approved it)."""
        record = None
        try:
            record = store.load(plan_id)
            units = frozenset(store.verified_plan(record).units())
            self.entries[plan_id] = (units, store.status(plan_id, record))
            self.unreadable.pop(plan_id, None)
        except OpsbotError as exc:  # its plan or its status cannot be read or believed
            self.entries.pop(plan_id, None)
            self.unreadable[plan_id] = (exc.message, _named_units(record))

    def history(self, unit: str, skip: str = "") -> UnitHistory:
        """``unit``'s history (``skip``: the plan asked about)."""
        bad = sorted(
            plan_id
            for plan_id, (_, units) in self.unreadable.items()
            if plan_id != skip and (not units or unit in units)
        )
        if bad:
            # Fail closed: a plan of the unit that cannot be read may be the fix that did
            # not hold (one that names no unit readably may be of any).
            why = self.unreadable[bad[0]][0]
            raise UnreadableHistory(f"plan {bad[0]} cannot be read: {why}")
        in_flight: str | None = None
        ends: list[tuple[datetime, str, PlanState]] = []
        by_rule: dict[str, list[datetime]] = {}
        for plan_id, (units, status) in self.entries.items():
            if plan_id == skip or unit not in units:
                continue
            state = status.state
            if state in IN_FLIGHT and (in_flight is None or plan_id > in_flight):
                in_flight = plan_id
            if (state is PlanState.VERIFIED or state in NOT_FIXED) and status.history:
                ends.append((status.history[-1].at, plan_id, state))  # newest by its end
            if status.approved_by_rule:
                approved = [t.at for t in status.history if t.state is PlanState.APPROVED]
                by_rule.setdefault(status.approved_by_rule, []).extend(approved[-1:])
        last = max(ends)[1:] if ends else None
        return UnitHistory(in_flight, last, {rule: tuple(at) for rule, at in by_rule.items()})


def _named_units(record: PlanRecord | None) -> frozenset[str]:
    """The units a stored plan's text names, read without trusting it (its bytes no longer
    verify); none where it cannot be read at all."""
    if record is None:
        return frozenset()
    try:
        steps = json.loads(record.plan).get("steps")
        return frozenset(
            step["args"]["unit"]
            for step in steps
            if isinstance(step, dict) and isinstance(step.get("args", {}).get("unit"), str)
        )
    except (ValueError, AttributeError, TypeError, KeyError):
        return frozenset()


def unit_history(store: PlanStore, unit: str, skip: str = "") -> UnitHistory:
    """``unit``'s history in ``store`` (every retained plan; ``skip`` the one asked about)."""
    return StoreIndex.read(store).history(unit, skip)


class UnreadableHistory(PlanError):
    """A stored plan of the unit cannot be read: no rule approves until it can."""


def reach(rule: ApproveRule, policy: ExecutorPolicy) -> dict[str, list[str]]:
    """Per tool of ``rule``, the units of ``[executor.allow]`` its patterns match."""
    return {
        tool: [
            unit
            for unit in policy.allow.get(tool, [])
            if policy.allows(tool, unit)
            and any(fnmatch.fnmatchcase(unit, pattern) for pattern in rule.units)
        ]
        for tool in rule.tools
    }


def decide(
    plan: Plan,
    state: PlanState,
    rules: Sequence[ApproveRule],
    policy: ExecutorPolicy,
    history: Callable[[str], UnitHistory],
    recent: Callable[[Plan], list[str]],
    now: datetime,
    reading: Callable[[], Reading],
    analyze: Analyzer = systemd_analyze,
) -> Decision:
    """The first of ``rules`` that approves ``plan`` (in ``state``), or why none does.
    ``history`` reads a unit's history (:func:`unit_history`), ``recent`` says what
    opsbot's recent plans forbid the plan (:func:`recent_errors`), ``reading`` is root's
    reading of the plan's units (plans.readings.read_units; asked at most once, and only
    when every other check holds: it may probe)."""
    if not rules:
        return ForHumans(())
    refused = []
    read = _once(reading)
    for rule in rules:
        reason = _refusal(plan, state, rule, policy, history, recent, now, read, analyze)
        if reason is None:
            return RuleApproves(rule)
        refused.append(Refused(rule.name, reason))
    return ForHumans(tuple(refused))


def _refusal(
    plan: Plan,
    state: PlanState,
    rule: ApproveRule,
    policy: ExecutorPolicy,
    history: Callable[[str], UnitHistory],
    recent: Callable[[Plan], list[str]],
    now: datetime,
    reading: Callable[[], Reading],
    analyze: Analyzer,
) -> str | None:
    if state is not PlanState.PROPOSED:
        return f"the plan is {state}, not waiting for approval"
    outside = out_of_reach(plan, rule, policy)
    if outside is not None:
        return outside
    if rule.windows and not window_state(rule.windows, now, analyze=analyze).open:
        return "none of its windows is open now"
    if policy.apply_window and not window_state(policy.apply_window, now, analyze=analyze).open:
        # A rule's approval is for an apply now, never one that waits days for a window.
        return "[executor] apply_window is closed now"
    forbidden = recent(plan)
    if forbidden:
        return forbidden[0]
    since = now - timedelta(seconds=rule.period_seconds)
    for unit in plan.units():
        try:
            past = history(unit)
        except UnreadableHistory as exc:
            return f"{unit}'s history cannot be read ({exc.message}); it waits for a human"
        if past.in_flight is not None:
            return f"plan {past.in_flight} of {unit} is on its way; its verdict comes first"
        if past.last_ran is not None and past.last_ran[1] in NOT_FIXED:
            plan_id, ended = past.last_ran
            return (
                f"the last plan that ran on {unit}, {plan_id}, ended {ended}: rules are "
                "suspended for it until a plan a human approves ends VERIFIED"
            )
        count = past.approvals(since)
        if count >= rule.max_per_unit:
            return (
                f"the rules approved {count} plans of {unit} in the last {rule.period} "
                f"(max_per_unit {rule.max_per_unit}, shared by every rule)"
            )
    read = reading()
    for step in plan.steps:
        seen = read.of(step.args.unit)
        mismatch = None if step.expect is None else expectation_mismatch(step.expect, seen.state())
        if not seen.error and mismatch is not None:
            return (
                f"its precondition on {seen.unit} does not hold as root reads it ({mismatch}): "
                "it would go STALE without running"
            )
    for unit in plan.units():
        seen = read.of(unit)
        if not seen.shows_failure:
            return (
                f"root reads no failure of {unit} now ({seen.words()}): the plan's own "
                "words are not evidence; it waits for a human"
            )
        if rule.causes and seen.result not in rule.causes:
            said = f"Result={seen.result}" if seen.result else "no Result= read"
            return (
                f"{unit}'s cause as root reads it ({said}) is not one of its causes "
                f"({', '.join(rule.causes)})"
            )
    return None


def out_of_reach(plan: Plan, rule: ApproveRule, policy: ExecutorPolicy) -> str | None:
    """Checks 2 and 3, which read nothing of the host: why ``rule`` cannot reach a step of
    ``plan`` (a tool or unit not its own, a unit past the allowlist, a step without a
    precondition), or None where it reaches them all."""
    for step in plan.steps:
        unit = step.args.unit
        if step.tool not in rule.tools:
            return f"{step.tool} is not one of its tools ({', '.join(rule.tools)})"
        if not any(fnmatch.fnmatchcase(unit, pattern) for pattern in rule.units):
            shown = ", ".join(rule.units[:4]) + (", ..." if len(rule.units) > 4 else "")
            return f"{unit} is not one of its units ({shown})"
        if not policy.allows(step.tool, unit):
            return f"{unit} is not in [executor.allow] {step.tool}"
        if step.expect is None:
            # Unattended, a step runs only against the state diagnosis saw: the executor
            # checks its precondition live (a unit back by itself meanwhile: STALE).
            return f"its step on {unit} has no precondition (expect) to check before it runs"
    return None


def _once(reading: Callable[[], Reading]) -> Callable[[], Reading]:
    """``reading``, read the first time it is asked for and kept."""
    kept: list[Reading] = []

    def read() -> Reading:
        if not kept:
            kept.append(reading())
        return kept[0]

    return read


def recent_errors(
    store: PlanStore, policy: ExecutorPolicy, now: datetime
) -> Callable[[Plan], list[str]]:
    """What opsbot's recent plans in ``store`` forbid a plan, as messages."""

    def forbidden(plan: Plan) -> list[str]:
        return [error.message for error in history_errors(plan, store, policy, now)]

    return forbidden


__all__ = [
    "Decision",
    "ForHumans",
    "Refused",
    "RuleApproves",
    "StoreIndex",
    "UnitHistory",
    "UnreadableHistory",
    "decide",
    "out_of_reach",
    "reach",
    "recent_errors",
    "unit_history",
]
