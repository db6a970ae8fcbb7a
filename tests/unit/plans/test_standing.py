"""Whether a standing approval rule approves a plan (plans/standing.py): only for the
tools it names, the units it names that the allowlist also holds, inside its windows,
within the restart budget and its own limit, and never for a unit whose last fix did not
hold; otherwise the plan waits for a human, with each rule's reason."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from plans import PlanStore
from plans.readings import Reading, TargetReading, UnitReading
from plans.records import StatusRecord, Transition
from plans.standing import ForHumans, RuleApproves, decide, recent_errors, unit_history
from shared_schema import ExecutorPolicy, OpsbotConfig, Plan, PlanState, StepRecord
from shared_schema.standing import ApproveRule
from tests.unit.plans.helpers import NOW, POLICY, plan_of, step, submitted

#: The precondition diagnosis writes for a unit it found failed (a rule needs one).
DOWN = {"active_state": ["failed"]}
NIGHT = ApproveRule(name="night-restarts", tools=["restart_unit"], units=["worker@*.service"])
#: Root's reading of a unit systemd says was killed: a failure root sees itself.
KILLED = UnitReading("worker@1.service", "failed", "failed", "signal")


def root_reads(*units: UnitReading) -> Reading:
    return Reading({unit.unit: unit for unit in units})


READS_KILLED = root_reads(KILLED)


def ask(
    store: PlanStore,
    plan: Plan,
    *rules: ApproveRule,
    state: PlanState = PlanState.PROPOSED,
    policy: ExecutorPolicy = POLICY,
    now: datetime = NOW,
    read: Reading = READS_KILLED,
) -> RuleApproves | ForHumans:
    return decide(
        plan,
        state,
        rules or (NIGHT,),
        policy,
        history=lambda unit: unit_history(store, unit),
        recent=recent_errors(store, policy, now),
        now=now,
        reading=lambda: read,
        analyze=_calendar,
    )


def _calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze for "*-*-* 02:00": the next 02:00 UTC after ``base``."""
    assert expression == "*-*-* 02:00"
    first = base.replace(hour=2, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


def ended(store: PlanStore, plan: Plan, state: PlanState, at: datetime) -> str:
    """A plan of the past that ran and ended in ``state`` at ``at``."""
    record = submitted(store, plan, at - timedelta(minutes=5))
    history = [Transition(state=state, at=at, by="test")]
    store.save_status(StatusRecord(plan_id=record.plan_id, state=state, history=history))
    return record.plan_id


def reasons(decision: RuleApproves | ForHumans) -> list[str]:
    assert isinstance(decision, ForHumans), decision
    return [refused.reason for refused in decision.refused]


WORKER = plan_of(
    step("restart_unit", "worker@1.service", expect=DOWN), goal="bring the worker back"
)


def test_a_rule_approves_a_restart_of_a_unit_its_glob_and_the_allowlist_both_hold(
    store: PlanStore,
) -> None:
    """worker@1.service is allowlisted for restart_unit and matches worker@*.service: the
    rule approves its restart."""
    assert ask(store, WORKER) == RuleApproves(NIGHT)


def test_a_tool_the_rule_does_not_name_goes_to_a_human(store: PlanStore) -> None:
    """A stop is not a restart: the rule names restart_unit only, and there is no
    wildcard for tools, so the stop waits for a human with the reason."""
    stop = plan_of(step("stop_unit", "worker@1.service", expect=DOWN))
    assert reasons(ask(store, stop)) == ["stop_unit is not one of its tools (restart_unit)"]


def test_a_unit_the_glob_matches_but_the_allowlist_lacks_goes_to_a_human(
    store: PlanStore,
) -> None:
    """worker@2.service matches the rule's glob but [executor.allow] has only
    worker@1: a rule never reaches past the allowlist."""
    other = plan_of(step("restart_unit", "worker@2.service", expect=DOWN))
    assert reasons(ask(store, other)) == [
        "worker@2.service is not in [executor.allow] restart_unit"
    ]


def test_every_step_must_be_the_rules(store: PlanStore) -> None:
    """A plan of two steps, one of a unit the rule does not name: not approved."""
    both = plan_of(
        step("restart_unit", "worker@1.service", expect=DOWN),
        step("restart_unit", "app.service", expect=DOWN),
    )
    assert reasons(ask(store, both)) == ["app.service is not one of its units (worker@*.service)"]


def test_outside_its_windows_a_rule_approves_nothing(store: PlanStore) -> None:
    """A rule for the night (02:00 for 4 h) asked at 21:35: not now."""
    night = ApproveRule.model_validate(
        {**NIGHT.model_dump(), "windows": [{"start": "*-*-* 02:00", "duration": "4h"}]}
    )
    assert reasons(ask(store, WORKER, night)) == ["none of its windows is open now"]
    at_three = NOW.replace(hour=3) + timedelta(days=1)
    assert ask(store, WORKER, night, now=at_three) == RuleApproves(night)


def test_a_fix_that_did_not_hold_suspends_the_rule_until_a_human_fix_holds(
    store: PlanStore,
) -> None:
    """The last restart of worker@1 ended UNRESOLVED: no rule approves the next plan of
    it. A human approves one, it ends VERIFIED: the rule may approve again."""
    failed = ended(store, WORKER, PlanState.UNRESOLVED, NOW - timedelta(hours=3))
    assert reasons(ask(store, WORKER)) == [
        f"the last plan that ran on worker@1.service, {failed}, ended UNRESOLVED: rules are "
        "suspended for it until a plan a human approves ends VERIFIED"
    ]
    again = plan_of(
        step("restart_unit", "worker@1.service", expect=DOWN), goal="a human's second try"
    )
    ended(store, again, PlanState.VERIFIED, NOW - timedelta(hours=2))
    assert ask(store, WORKER) == RuleApproves(NIGHT)


def test_a_plan_on_its_way_comes_first(store: PlanStore) -> None:
    """A plan of worker@1 was approved and has not run: the next waits for its verdict."""
    first = submitted(store, plan_of(step("start_unit", "worker@1.service")))
    store.save_status(
        StatusRecord(
            plan_id=first.plan_id,
            state=PlanState.APPROVED,
            history=[Transition(state=PlanState.APPROVED, at=NOW, by="alice")],
        )
    )
    assert reasons(ask(store, WORKER)) == [
        f"plan {first.plan_id} of worker@1.service is on its way; its verdict comes first"
    ]


def test_a_rule_stops_at_its_limit(store: PlanStore) -> None:
    """The rule approved worker@1's restart three times within 24 h (each VERIFIED): the
    fourth plan is a human's; an approval of 25 h ago no longer counts."""
    for hours in (25, 20, 10):
        approved_by_rule(store, NIGHT, NOW - timedelta(hours=hours))
    assert ask(store, WORKER) == RuleApproves(NIGHT)
    approved_by_rule(store, NIGHT, NOW - timedelta(hours=1))
    assert reasons(ask(store, WORKER)) == [
        "the rules approved 3 plans of worker@1.service in the last 24h "
        "(max_per_unit 3, shared by every rule)"
    ]


def test_two_rules_that_reach_one_unit_share_its_budget(store: PlanStore) -> None:
    """A second rule reaching worker@1, or the first renamed, does not give the unit more
    unattended restarts: the rules approved 3 in 24 h, and each of them now refuses."""
    first = ApproveRule(name="first", tools=["restart_unit"], units=["worker@1.service"])
    other = ApproveRule(name="other", tools=["restart_unit"], units=["worker@*.service"])
    for hours in (20, 10):
        approved_by_rule(store, first, NOW - timedelta(hours=hours))
    approved_by_rule(store, other, NOW - timedelta(hours=5))
    decision = ask(store, WORKER, first, other)
    assert [r.rule for r in decision.refused] == ["first", "other"]  # type: ignore[union-attr]
    assert all("approved 3 plans" in reason for reason in reasons(decision))


def approved_by_rule(store: PlanStore, rule: ApproveRule, at: datetime) -> None:
    """A plan of worker@1 that ``rule`` approved at ``at`` and that ended VERIFIED."""
    record = submitted(
        store, plan_of(step("restart_unit", "worker@1.service", expect=DOWN), goal=f"{at}"), at
    )
    history = [
        Transition(state=PlanState.APPROVED, at=at, by=f"rule {rule.name}"),
        Transition(state=PlanState.VERIFIED, at=at + timedelta(minutes=1), by="opsbot-verify"),
    ]
    store.save_status(
        StatusRecord(
            plan_id=record.plan_id,
            state=PlanState.VERIFIED,
            history=history,
            approved_by_rule=rule.name,
        )
    )


def test_never_past_the_restart_budget(store: PlanStore) -> None:
    """worker@1 was restarted 3 times in the budget's 30 minutes (all VERIFIED): a rule
    does not approve a fourth restart, whatever its own limit."""
    for minutes in (25, 15, 5):
        at = NOW - timedelta(minutes=minutes)
        restart = plan_of(
            step("restart_unit", "worker@1.service", expect=DOWN), goal=f"restart {minutes}"
        )
        status = store.status(ended(store, restart, PlanState.VERIFIED, at))
        ran = StepRecord(
            index=0,
            tool="restart_unit",
            argv=["systemctl", "restart", "worker@1.service"],
            outcome="ok",
            started_at=at,
            finished_at=at,
            exit_status=0,
        )
        store.save_status(status.model_copy(update={"steps": [ran]}))
        assert store.consume(status.plan_id, "0" * 64, "opsbot-executor", at)  # it ran
    [reason] = reasons(ask(store, WORKER))
    assert "restarted worker@1.service 3 times" in reason


def test_a_plan_not_waiting_is_not_approved(store: PlanStore) -> None:
    """Only a PROPOSED plan is asked about: a STALE one is refused by every rule."""
    assert reasons(ask(store, WORKER, state=PlanState.STALE)) == [
        "the plan is STALE, not waiting for approval"
    ]


def test_the_first_rule_that_approves_decides_and_each_other_says_why(
    store: PlanStore,
) -> None:
    """Two rules: the first names another unit, the second approves."""
    app = ApproveRule(name="app", tools=["restart_unit"], units=["app.service"])
    assert ask(store, WORKER, app, NIGHT) == RuleApproves(NIGHT)
    none = ask(store, WORKER, app)
    assert isinstance(none, ForHumans)
    assert [r.rule for r in none.refused] == ["app"]


def test_without_rules_every_plan_is_a_humans(store: PlanStore) -> None:
    """No [[approve.rule]]: as before, every plan waits for a human."""
    assert decide(
        WORKER,
        PlanState.PROPOSED,
        (),
        POLICY,
        history=lambda unit: unit_history(store, unit),
        recent=lambda plan: [],
        now=NOW,
        reading=lambda: READS_KILLED,
    ) == ForHumans(())


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"tools": ["*"], "units": ["app.service"]}, "Input should be"),
        ({"tools": ["restart_unit"], "units": ["*"]}, "not a unit name, nor a glob"),
        ({"tools": ["restart_unit"], "units": []}, "at least 1 item"),
        ({"tools": ["restart_unit", "restart_unit"], "units": ["a.service"]}, "named twice"),
        ({"tools": ["restart_unit"], "units": ["a.service"], "period": "5min"}, "from 1h"),
        ({"tools": ["restart_unit"], "units": ["a.service"], "mode": "yes"}, "shadow"),
    ],
)
def test_a_rule_that_names_too_much_or_too_little_is_refused(
    rule: dict[str, object], message: str
) -> None:
    """No wildcard tool, no bare "*" unit, no empty list, nothing twice, no period
    shorter than an hour, no mode but shadow and enforce."""
    with pytest.raises(ValidationError) as caught:
        OpsbotConfig.model_validate({"approve": {"rule": [{"name": "r", **rule}]}})
    assert message in str(caught.value)


def test_two_rules_of_one_name_are_refused() -> None:
    """The audit names the rule that approved: two of one name would be ambiguous."""
    rule = {"name": "same", "tools": ["restart_unit"], "units": ["a.service"]}
    with pytest.raises(ValidationError, match="same is used twice"):
        OpsbotConfig.model_validate({"approve": {"rule": [rule, rule]}})


def test_a_new_rule_is_in_shadow_unless_it_says_enforce() -> None:
    """Shadow first: a rule that does not say its mode only records what it would do."""
    assert NIGHT.mode == "shadow"
    enforcing = OpsbotConfig.model_validate(
        {
            "approve": {
                "rule": [
                    {
                        "name": "r",
                        "tools": ["start_unit"],
                        "units": ["a.service"],
                        "mode": "enforce",
                    }
                ]
            }
        }
    )
    assert enforcing.approve.rule[0].mode == "enforce"


def test_a_rule_waits_while_the_executors_apply_window_is_closed(store: PlanStore) -> None:
    """A rule's approval is for an apply now: where [executor] apply_window is closed, the
    plan waits for a human, however open the rule's own windows are (none: any time)."""
    night_only = ExecutorPolicy.model_validate(
        {**POLICY.model_dump(), "apply_window": [{"start": "*-*-* 02:00", "duration": "4h"}]}
    )
    assert reasons(ask(store, WORKER, policy=night_only)) == [
        "[executor] apply_window is closed now"
    ]
    at_three = NOW.replace(hour=3) + timedelta(days=1)
    assert ask(store, WORKER, policy=night_only, now=at_three) == RuleApproves(NIGHT)


def test_the_last_fix_is_the_one_that_ended_last_not_the_one_proposed_last(
    store: PlanStore,
) -> None:
    """An older plan applied after a newer one: the newer ended VERIFIED at 19:00, the
    older ended UNRESOLVED at 20:00. The fix that did not hold is the last one: the rule
    is suspended."""
    older = submitted(
        store,
        plan_of(step("restart_unit", "worker@1.service", expect=DOWN), goal="older"),
        NOW - timedelta(hours=5),
    )
    newer = submitted(
        store,
        plan_of(step("start_unit", "worker@1.service"), goal="newer"),
        NOW - timedelta(hours=4),
    )
    for record, state, hour in ((newer, PlanState.VERIFIED, 19), (older, PlanState.UNRESOLVED, 20)):
        at = NOW.replace(hour=hour, minute=0)
        history = [Transition(state=state, at=at, by="test")]
        store.save_status(StatusRecord(plan_id=record.plan_id, state=state, history=history))
    [reason] = reasons(ask(store, WORKER))
    assert f"{older.plan_id}, ended UNRESOLVED" in reason


def test_a_plan_of_the_unit_that_cannot_be_read_keeps_rules_out(store: PlanStore) -> None:
    """Fail closed: a stored plan of worker@1 whose bytes were edited may be the fix that
    did not hold; no rule approves until it can be read."""
    from tests.unit.plans.helpers import edit_record

    past = ended(store, WORKER, PlanState.VERIFIED, NOW - timedelta(hours=1))
    edit_record(store, past, plan=store.load(past).plan.replace("bring", "break"))
    [reason] = reasons(ask(store, WORKER))
    assert "history cannot be read" in reason and past in reason


def test_a_damaged_plan_of_another_unit_keeps_only_that_unit_back(store: PlanStore) -> None:
    """An edited plan of app.service keeps rules back for app.service only: worker@1's
    restart is still the rule's; a plan whose text names no unit readably keeps back all."""
    from tests.unit.plans.helpers import edit_record

    other = plan_of(step("restart_unit", "app.service", expect=DOWN), goal="bring app back")
    past = ended(store, other, PlanState.VERIFIED, NOW - timedelta(hours=1))
    edit_record(store, past, plan=store.load(past).plan.replace("bring", "break"))
    assert ask(store, WORKER) == RuleApproves(NIGHT)
    edit_record(store, past, plan="not json")
    [reason] = reasons(ask(store, WORKER))
    assert "history cannot be read" in reason and past in reason


def test_a_rule_narrowed_to_kills_approves_only_a_unit_root_reads_killed(
    store: PlanStore,
) -> None:
    """causes = ["signal"]: a restart of worker@1 is approved where root reads its
    Result=signal now; where root reads exit-code it waits for a human, whatever Result=
    the plan's symptom claims (the proposer's words)."""
    kills = ApproveRule.model_validate({**NIGHT.model_dump(), "causes": ["signal"]})
    claimed = {"unit": "worker@1.service", "result": "signal"}
    says_killed = Plan.model_validate({**WORKER.model_dump(exclude_none=True), "symptom": claimed})
    assert ask(store, says_killed, kills) == RuleApproves(kills)
    exited = UnitReading("worker@1.service", "failed", "failed", "exit-code")
    assert reasons(ask(store, says_killed, kills, read=root_reads(exited))) == [
        "worker@1.service's cause as root reads it (Result=exit-code) is not one of its "
        "causes (signal)"
    ]


def test_a_healthy_unit_is_not_a_rules_to_restart_whatever_the_plan_says(
    store: PlanStore,
) -> None:
    """The attack: the diagnose user proposes a restart of a worker that runs, with a
    precondition that holds (active) and a symptom that says it was killed. Root reads it
    active/running with no health target of its own: the plan waits for a human. Root's
    probe of the worker's own target failing is what lets a rule restart a running one."""
    running = {"active_state": ["active"]}
    bait = plan_of(step("restart_unit", "worker@1.service", expect=running), goal="bait")
    bait = Plan.model_validate(
        {
            **bait.model_dump(exclude_none=True),
            "symptom": {"unit": "worker@1.service", "result": "signal"},
        }
    )
    healthy = UnitReading("worker@1.service", "active", "running", "success")
    [reason] = reasons(ask(store, bait, read=root_reads(healthy)))
    assert reason.startswith("root reads no failure of worker@1.service now")
    assert "active/running" in reason and "no health target of its own" in reason
    answering = replace(healthy, targets=(TargetReading("worker", "ok"),))
    assert reasons(ask(store, bait, read=root_reads(answering)))[0].startswith("root reads no")
    failing = replace(healthy, targets=(TargetReading("worker", "unexpected_status"),))
    assert ask(store, bait, read=root_reads(failing)) == RuleApproves(NIGHT)
    unreachable = replace(healthy, targets=(TargetReading("worker", "connection_error", "EPERM"),))
    assert reasons(ask(store, bait, read=root_reads(unreachable)))[0].startswith("root reads no")


def test_a_unit_systemd_cannot_say_or_that_stopped_cleanly_waits_for_a_human(
    store: PlanStore,
) -> None:
    """Root could not read the unit, or reads it stopped with Result=success (an operator
    stopped it): neither is a failure root sees."""
    down = {"active_state": ["failed", "inactive", "activating"]}
    either = plan_of(step("restart_unit", "worker@1.service", expect=down), goal="either")
    unknown = UnitReading("worker@1.service", error="cannot read the state")
    stopped = UnitReading("worker@1.service", "inactive", "dead", "success")
    for read in (unknown, stopped):
        assert reasons(ask(store, either, read=root_reads(read)))[0].startswith("root reads no")
    restarting = UnitReading("worker@1.service", "activating", "auto-restart", "exit-code")
    assert ask(store, either, read=root_reads(restarting)) == RuleApproves(NIGHT)


def test_a_cause_systemd_never_says_is_a_typo_in_the_rule() -> None:
    """causes = ["sigkill"]: not one of systemd's Result= values; the config says so."""
    with pytest.raises(ValidationError, match="signal"):
        ApproveRule.model_validate({**NIGHT.model_dump(), "causes": ["sigkill"]})


def test_a_step_without_a_precondition_waits_for_a_human(store: PlanStore) -> None:
    """Unattended, a restart runs only against the state diagnosis saw: a plan whose step
    carries no expect (which the executor would check live) is not a rule's to approve."""
    bare = plan_of(step("restart_unit", "worker@1.service"))
    assert reasons(ask(store, bare)) == [
        "its step on worker@1.service has no precondition (expect) to check before it runs"
    ]


def test_a_step_whose_precondition_root_reads_false_spends_no_budget(store: PlanStore) -> None:
    """A bait expecting worker@1 active while root reads it failed would go STALE at once
    and still count against the unit's max_per_unit: no rule approves it, and the real
    fault's plan (expecting it failed) keeps the budget."""
    running = {"active_state": ["active"]}
    bait = plan_of(step("restart_unit", "worker@1.service", expect=running), goal="bait")
    [reason] = reasons(ask(store, bait))
    assert reason == (
        "its precondition on worker@1.service does not hold as root reads it "
        "(worker@1.service is failed/failed (load: loaded); the plan expected active "
        "state active): it would go STALE without running"
    )
    assert ask(store, WORKER) == RuleApproves(NIGHT)


def test_a_rule_narrowed_by_cause_says_when_root_read_no_result(store: PlanStore) -> None:
    """A unit whose own health target fails while systemd prints no Result= for it: a rule
    narrowed to kills refuses, and says no Result= was read."""
    kills = ApproveRule.model_validate({**NIGHT.model_dump(), "causes": ["signal"]})
    running = {"active_state": ["active"]}
    hung = plan_of(step("restart_unit", "worker@1.service", expect=running), goal="hung")
    failing = UnitReading(
        "worker@1.service", "active", "running", "", targets=(TargetReading("w", "timeout"),)
    )
    assert reasons(ask(store, hung, kills, read=root_reads(failing))) == [
        "worker@1.service's cause as root reads it (no Result= read) is not one of its "
        "causes (signal)"
    ]
