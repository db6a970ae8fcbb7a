"""A standing rule's refusals as the operator reads them (every tool, unit and cause the
rule names, cut where the list is long), the calendar the rule's and the executor's
windows are read with, and a unit's history at its edges: the plan asked about, a plan of
another unit listed first, a plan that never ran, a damaged plan's own words, an approval
exactly a period ago."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from plans import PlanStore
from plans.records import StatusRecord, Transition
from plans.standing import (
    ForHumans,
    RuleApproves,
    StoreIndex,
    UnreadableHistory,
    decide,
    recent_errors,
    unit_history,
)
from shared_schema import ExecutorPolicy, Plan, PlanState
from shared_schema.standing import ApproveRule
from tests.unit.plans.helpers import (
    NOW,
    POLICY,
    edit_record,
    plan_of,
    root_reads_failed,
    step,
    submitted,
)

#: The precondition diagnosis writes for a unit it found failed (a rule needs one).
DOWN = {"active_state": ["failed"]}
NIGHT = ApproveRule(name="night-restarts", tools=["restart_unit"], units=["worker@*.service"])
WORKER = plan_of(
    step("restart_unit", "worker@1.service", expect=DOWN), goal="bring the worker back"
)
#: "*-*-* 02:00" for four hours, in the host's local time.
AT_TWO = {"start": "*-*-* 02:00", "duration": "4h"}

Analyzer = Callable[[str, datetime, int], list[datetime]]


def utc_calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze for "*-*-* 02:00" on a host whose zone is UTC."""
    return _daily(expression, base, iterations, hour=2)


def calendar_five_hours_east(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze for "*-*-* 02:00" on a host five hours east of UTC: 21:00 UTC."""
    return _daily(expression, base, iterations, hour=21)


def _daily(expression: str, base: datetime, iterations: int, hour: int) -> list[datetime]:
    assert expression == AT_TWO["start"]
    first = base.replace(hour=hour, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


def ask(
    store: PlanStore,
    plan: Plan,
    *rules: ApproveRule,
    policy: ExecutorPolicy = POLICY,
    now: datetime = NOW,
    analyze: Analyzer = utc_calendar,
) -> RuleApproves | ForHumans:
    return decide(
        plan,
        PlanState.PROPOSED,
        rules or (NIGHT,),
        policy,
        history=lambda unit: unit_history(store, unit),
        recent=recent_errors(store, policy, now),
        now=now,
        reading=lambda: root_reads_failed(plan.units()),
        analyze=analyze,
    )


def reasons(decision: RuleApproves | ForHumans) -> list[str]:
    assert isinstance(decision, ForHumans), decision
    return [refused.reason for refused in decision.refused]


def ended(store: PlanStore, plan: Plan, *states: tuple[PlanState, datetime]) -> str:
    """A plan of the past that went through ``states`` (each at its time), the last its
    state now."""
    record = submitted(store, plan, states[0][1] - timedelta(minutes=5))
    history = [Transition(state=state, at=at, by="test") for state, at in states]
    store.save_status(StatusRecord(plan_id=record.plan_id, state=states[-1][0], history=history))
    return record.plan_id


def rule(**fields: object) -> ApproveRule:
    return ApproveRule.model_validate({**NIGHT.model_dump(), **fields})


# -- what a refusal says ---------------------------------------------------------------


def test_a_refused_tool_is_told_with_every_tool_the_rule_names(store: PlanStore) -> None:
    """A rule for restarts and starts, asked about a stop: the refusal names both of its
    tools."""
    both = rule(tools=["restart_unit", "start_unit"])
    stop = plan_of(step("stop_unit", "worker@1.service", expect=DOWN))
    assert reasons(ask(store, stop, both)) == [
        "stop_unit is not one of its tools (restart_unit, start_unit)"
    ]


@pytest.mark.parametrize(
    ("units", "shown"),
    [
        (
            ["a.service", "b.service", "c.service", "d.service"],
            "a.service, b.service, c.service, d.service",
        ),
        (
            ["a.service", "b.service", "c.service", "d.service", "e.service"],
            "a.service, b.service, c.service, d.service, ...",
        ),
    ],
)
def test_a_refused_unit_is_told_with_the_rules_first_four_units(
    store: PlanStore, units: list[str], shown: str
) -> None:
    """A rule of four units names them all; a rule of five names the first four and
    says there are more."""
    assert reasons(ask(store, WORKER, rule(units=units))) == [
        f"worker@1.service is not one of its units ({shown})"
    ]


def test_a_refused_cause_is_told_with_every_cause_the_rule_names(store: PlanStore) -> None:
    """A rule for kills and core dumps, asked about a unit root reads exited with an
    error code (whatever the plan's symptom says): the refusal names both causes."""
    crashes = rule(causes=["signal", "core-dump"])
    says_killed = Plan.model_validate(
        {
            **WORKER.model_dump(exclude_none=True),
            "symptom": {"unit": "worker@1.service", "result": "signal"},
        }
    )
    assert reasons(ask(store, says_killed, crashes)) == [
        "worker@1.service's cause as root reads it (Result=exit-code) is not one of its "
        "causes (signal, core-dump)"
    ]


def test_a_plan_without_a_symptom_is_judged_by_roots_reading_alone(store: PlanStore) -> None:
    """A plan that carries no symptom at all: a rule narrowed to exit codes approves it,
    since root reads Result=exit-code; one narrowed to kills does not."""
    assert WORKER.symptom is None
    exits = rule(causes=["exit-code"])
    assert ask(store, WORKER, exits) == RuleApproves(exits)
    assert reasons(ask(store, WORKER, rule(causes=["signal"]))) == [
        "worker@1.service's cause as root reads it (Result=exit-code) is not one of its "
        "causes (signal)"
    ]


# -- the calendar the windows are read with ----------------------------------------------


def test_a_rules_window_is_read_with_the_hosts_calendar(store: PlanStore) -> None:
    """A rule for the night (02:00 for 4 h) on a host five hours east of UTC, asked at
    21:35 UTC (02:35 there): as the host's systemd-analyze reads it, the window is open,
    and the rule approves."""
    night = rule(windows=[AT_TWO])
    assert ask(store, WORKER, night, analyze=calendar_five_hours_east) == RuleApproves(night)


def test_the_executors_apply_window_is_read_with_the_hosts_calendar(store: PlanStore) -> None:
    """[executor] apply_window at 02:00 for 4 h on a host five hours east of UTC, asked at
    21:35 UTC: open there, so the rule's approval is for an apply now."""
    night_only = ExecutorPolicy.model_validate({**POLICY.model_dump(), "apply_window": [AT_TWO]})
    decision = ask(store, WORKER, policy=night_only, analyze=calendar_five_hours_east)
    assert decision == RuleApproves(NIGHT)


# -- a unit's history --------------------------------------------------------------------


def test_the_plan_asked_about_is_not_its_own_plan_on_the_way(store: PlanStore) -> None:
    """Asked about an approved plan of worker@1 (as `opsbot policy test ID` asks), the
    unit's history leaves that plan out: no plan of it is on its way; asked without it,
    the plan is."""
    record = submitted(store, WORKER)
    store.save_status(
        StatusRecord(
            plan_id=record.plan_id,
            state=PlanState.APPROVED,
            history=[Transition(state=PlanState.APPROVED, at=NOW, by="alice")],
        )
    )
    assert unit_history(store, "worker@1.service").in_flight == record.plan_id
    assert unit_history(store, "worker@1.service", skip=record.plan_id).in_flight is None


def test_an_unreadable_plan_is_refused_with_why_it_cannot_be_read(store: PlanStore) -> None:
    """A stored plan of worker@1 whose bytes were edited: the refusal says which plan and
    why it cannot be read, in the store's own words."""
    past = ended(store, WORKER, (PlanState.VERIFIED, NOW - timedelta(hours=1)))
    edit_record(store, past, plan=store.load(past).plan.replace("bring", "break"))
    assert reasons(ask(store, WORKER)) == [
        f"worker@1.service's history cannot be read (plan {past} cannot be read: plan {past} "
        "was modified after it was stored: its bytes no longer match its fingerprint); it "
        "waits for a human"
    ]


def test_a_plan_of_another_unit_stored_first_does_not_hide_the_units_own(
    store: PlanStore,
) -> None:
    """An older plan of app.service (VERIFIED), then a restart of worker@1 that ended
    UNRESOLVED: the rule is suspended for worker@1."""
    other = plan_of(step("restart_unit", "app.service", expect=DOWN), goal="bring app back")
    ended(store, other, (PlanState.VERIFIED, NOW - timedelta(hours=3)))
    failed = ended(store, WORKER, (PlanState.UNRESOLVED, NOW - timedelta(hours=2)))
    [reason] = reasons(ask(store, WORKER))
    assert reason.startswith(f"the last plan that ran on worker@1.service, {failed}, ended")


def test_a_plan_that_never_ran_does_not_lift_the_suspension(store: PlanStore) -> None:
    """worker@1's restart ended UNRESOLVED; a later plan of it was approved but went STALE
    (nothing ran): the fix that did not hold is still the last, and the rule stays
    suspended."""
    failed = ended(store, WORKER, (PlanState.UNRESOLVED, NOW - timedelta(hours=3)))
    later = plan_of(step("start_unit", "worker@1.service", expect=DOWN), goal="a second try")
    ended(
        store,
        later,
        (PlanState.APPROVED, NOW - timedelta(hours=2)),
        (PlanState.STALE, NOW - timedelta(hours=1)),
    )
    [reason] = reasons(ask(store, WORKER))
    assert reason.startswith(f"the last plan that ran on worker@1.service, {failed}, ended")


def test_an_approval_exactly_a_period_ago_still_counts(store: PlanStore) -> None:
    """The rule approved worker@1's restart exactly 24 h ago, 20 h ago and 10 h ago: all
    three are within its period, and the fourth plan is a human's."""
    for hours in (24, 20, 10):
        at = NOW - timedelta(hours=hours)
        record = submitted(
            store, plan_of(step("restart_unit", "worker@1.service", expect=DOWN), goal=f"{at}"), at
        )
        history = [
            Transition(state=PlanState.APPROVED, at=at, by=f"rule {NIGHT.name}"),
            Transition(state=PlanState.VERIFIED, at=at + timedelta(minutes=1), by="verify"),
        ]
        store.save_status(
            StatusRecord(
                plan_id=record.plan_id,
                state=PlanState.VERIFIED,
                history=history,
                approved_by_rule=NIGHT.name,
            )
        )
    assert reasons(ask(store, WORKER)) == [
        "the rules approved 3 plans of worker@1.service in the last 24h "
        "(max_per_unit 3, shared by every rule)"
    ]


def test_a_damaged_plan_keeps_back_the_units_its_text_still_names(store: PlanStore) -> None:
    """A plan of app.service whose text was rewritten, with a step that is not an object
    and one without arguments beside the readable one: it keeps back app.service, the
    unit it still names, and worker@1's restart is the rule's."""
    other = plan_of(step("restart_unit", "app.service", expect=DOWN), goal="bring app back")
    past = ended(store, other, (PlanState.VERIFIED, NOW - timedelta(hours=1)))
    steps = [step("restart_unit", "app.service"), "restart everything", {"tool": "stop_unit"}]
    edit_record(store, past, plan=json.dumps({"goal": "bring app back", "steps": steps}))
    assert ask(store, WORKER) == RuleApproves(NIGHT)
    app_rule = ApproveRule(name="app", tools=["restart_unit"], units=["app.service"])
    app = plan_of(step("restart_unit", "app.service", expect=DOWN))
    [reason] = reasons(ask(store, app, app_rule))
    assert "history cannot be read" in reason and past in reason


def test_a_repaired_plan_read_again_counts_as_it_says(store: PlanStore) -> None:
    """A plan of worker@1 whose bytes were edited keeps rules out; once its record is put
    back and read again, the unit's history is what that plan says: it ended VERIFIED."""
    past = ended(store, WORKER, (PlanState.VERIFIED, NOW - timedelta(hours=1)))
    original = store.load(past).plan
    edit_record(store, past, plan=original.replace("bring", "break"))
    index = StoreIndex.read(store)
    with pytest.raises(UnreadableHistory):
        index.history("worker@1.service")
    edit_record(store, past, plan=original)
    index.reread(store, past)
    assert index.history("worker@1.service").last_ran == (past, PlanState.VERIFIED)


def test_a_damaged_status_keeps_back_its_units_and_no_other(store: PlanStore) -> None:
    """A plan of app.service whose status file is not a status record any more: its unit's
    history cannot be read (a rule keeps out of app.service, saying which plan), while
    worker@1's restart is still the rule's: one damaged file does not end the rules' run."""
    past = ended(
        store,
        plan_of(step("restart_unit", "app.service", expect=DOWN), goal="bring app back"),
        (PlanState.VERIFIED, NOW - timedelta(hours=1)),
    )
    (store.status_dir / f"{past}.json").write_text("{broken")
    index = StoreIndex.read(store)
    with pytest.raises(UnreadableHistory, match=past):
        index.history("app.service")
    assert ask(store, WORKER) == RuleApproves(NIGHT)
