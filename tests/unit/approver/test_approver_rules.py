"""Standing rules in root's approver (approver_svc/rules.py): a plan stored is put to the
rules once; an enforce rule writes the approval a human would, bound to the sha256 it
read and recorded as the rule's, never as a person's; a shadow rule only leaves a record;
a paused policy approves nothing; the approvers are told; root alone may ask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from approver_svc import state as approver_state
from plans import PlanRecord, PlanStore, approval_path
from plans.readings import ProbesSpent, Reading, UnitReading
from plans.records import StatusRecord, Transition
from shared_schema import OpsbotConfig, Plan, PlanState
from shared_schema.approver_socket import (
    ApplyRules,
    PolicyReport,
    PolicyReported,
    PolicySwitch,
    PolicySwitched,
    Refused,
    RulesApplied,
)
from shared_schema.config import ApproverSettings
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import (
    NOW,
    POLICY,
    edit_record,
    plan_of,
    root_reads_failed,
    step,
    submitted,
)

pytestmark = pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="root's requests: the test must run as root"
)

RESTARTS = {
    "name": "night-restarts",
    "tools": ["restart_unit"],
    "units": ["nginx.service", "worker@*.service"],
    "max_per_unit": 2,
    "period": "24h",
}


#: The precondition diagnosis writes for a unit it found failed (a rule needs one).
DOWN = {"active_state": ["failed"]}


def submit(b: Bench, unit: str) -> PlanRecord:
    """A restart of ``unit``, found failed, as diagnosis submits it now."""
    return b.submit(submitted(b.store, plan_of(step("restart_unit", unit, expect=DOWN)), b.clock()))


def config(*rules: dict[str, object]) -> OpsbotConfig:
    return OpsbotConfig.model_validate(
        {
            "executor": POLICY.model_dump(mode="json"),
            "approvers": {"alice": ApproverSettings().model_dump(), "bob": {}},
            "approve": {"rule": list(rules)},
        }
    )


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def enforcing(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(
        tmp_path, store, approvals_dir, config=config({**RESTARTS, "mode": "enforce"})
    ) as running:
        yield running


@pytest.fixture
def shadowing(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir, config=config(RESTARTS)) as running:
        yield running


def rules(b: Bench) -> RulesApplied:
    reply = b.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied), reply
    return reply


def report(b: Bench) -> PolicyReported:
    reply = b.as_root(PolicyReport())
    assert isinstance(reply, PolicyReported), reply
    return reply


def switch(b: Bench, paused: bool) -> PolicySwitched:
    reply = b.as_root(PolicySwitch(paused=paused, by="carol", reason="a bad night"))
    assert isinstance(reply, PolicySwitched), reply
    return reply


def ended(b: Bench, record: PlanRecord, state: PlanState, after: timedelta) -> None:
    """The plan ran and opsbot-verify judged it ``state``, ``after`` its approval."""
    status = b.store.status(record.plan_id)
    history = [*status.history, Transition(state=state, at=b.clock() + after, by="verify")]
    b.store.save_status(status.model_copy(update={"state": state, "history": history}))


def test_an_enforce_rule_writes_the_approval_a_human_would_in_the_rules_name(
    enforcing: Bench,
) -> None:
    """nginx.service failed at night: the rule approves its restart. The approval is bound
    to the plan's sha256, names the rule and the rule's sha256 and no approver, and holds
    ten minutes; the plan is APPROVED by the rule; the apply was started."""
    b = enforcing
    record = submit(b, "nginx.service")
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome, decided.rule) == (
        record.plan_id,
        "approved",
        "night-restarts",
    )
    approval = json.loads(approval_path(b.approvals_dir, record.plan_id).read_bytes())
    rule_sha = b.service.config.approve.rule[0].sha256
    assert approval["sha256"] == record.sha256
    assert (approval["approved_by_rule"], approval["rule_sha256"]) == ("night-restarts", rule_sha)
    assert "approver" not in approval
    assert approval["expires_at"] == "2026-11-29T21:45:00Z"  # NOW + 10 min
    assert approval["approved_at"] == "2026-11-29T21:35:00Z"
    status = b.store.status(record.plan_id)
    assert (status.state, status.approved_by, status.approved_by_rule) == (
        PlanState.APPROVED,
        "",
        "night-restarts",
    )
    assert status.history[-1].by == "rule night-restarts"
    assert b.applies_started == [False]
    assert rules(b).decided == []  # asked once


def test_the_approvers_are_told_once_with_no_link_to_click(enforcing: Bench) -> None:
    """The next announce carries no link for the plan the rule approved, and a notice for
    every approver of what was approved, by which rule, and why; the one after, none."""
    b = enforcing
    record = submit(b, "nginx.service")
    rules(b)
    announced = b.announce()
    assert announced.notices == []
    [told] = announced.ruled
    assert (told.plan.plan_id, told.rule, told.approvers) == (
        record.plan_id,
        "night-restarts",
        ["alice", "bob"],
    )
    assert told.plan.argv == [["systemctl", "restart", "--no-ask-password", "--", "nginx.service"]]
    assert b.announce().ruled == []


def test_a_rule_approval_older_than_an_hour_is_not_news(enforcing: Bench) -> None:
    """The rule approved a plan while no notify asked (notify was down, or no approver was
    configured then): an hour later the approvers are not told of it."""
    from approver_svc.news import OUTCOME_HORIZON

    b = enforcing
    submit(b, "nginx.service")
    rules(b)
    b.clock.advance(OUTCOME_HORIZON.total_seconds())
    assert b.announce().ruled == []


def test_announce_asks_the_rules_first_so_no_link_goes_out_for_a_plan_a_rule_approves(
    enforcing: Bench,
) -> None:
    """opsbot-notify may run before opsbot-rules: the approver asks the rules first."""
    b = enforcing
    submit(b, "nginx.service")
    announced = b.announce()
    assert announced.notices == [] and len(announced.ruled) == 1


def test_a_shadow_rule_records_what_it_would_approve_and_the_plan_waits_for_a_human(
    shadowing: Bench,
) -> None:
    """In shadow the rule writes nothing: the plan is announced with its links, and the
    report counts it as one the rule would have approved, and, once a human approved it
    and it held, how it ended."""
    b = shadowing
    record = submit(b, "nginx.service")
    [decided] = rules(b).decided
    assert (decided.outcome, decided.rule) == ("would approve", "night-restarts")
    assert not approval_path(b.approvals_dir, record.plan_id).exists()
    [notice] = b.announce().notices
    assert notice.plan.plan_id == record.plan_id and len(notice.links) == 4
    status = b.store.status(record.plan_id)
    history = [Transition(state=PlanState.VERIFIED, at=NOW + timedelta(minutes=3), by="verify")]
    b.store.save_status(status.model_copy(update={"state": PlanState.VERIFIED, "history": history}))
    [summary] = report(b).rules
    assert (summary.name, summary.mode, summary.would_approve, summary.approved) == (
        "night-restarts",
        "shadow",
        1,
        0,
    )
    assert summary.ended == {"VERIFIED": 1}


def test_what_a_rule_refuses_it_says_why_in_the_report(shadowing: Bench) -> None:
    """app.service is not one of the rule's units: the plan is for humans, and the report
    counts the reason."""
    b = shadowing
    b.submit(unit="app.service")
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    [summary] = report(b).rules
    assert summary.refused == {
        "app.service is not one of its units (nginx.service, worker@*.service)": 1
    }


def test_a_paused_policy_approves_nothing_until_resumed(enforcing: Bench) -> None:
    """`opsbot policy pause`: the next plan waits for a human, its record says the policy
    is paused and by whom; after `resume`, a new plan is approved again."""
    b = enforcing
    assert switch(b, True).pause.by == "carol"
    paused = submit(b, "nginx.service")
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    assert decided.refused == ["the policy is paused (by carol; `opsbot policy resume`)"]
    assert not approval_path(b.approvals_dir, paused.plan_id).exists()
    assert report(b).pause is not None and report(b).pause.paused  # type: ignore[union-attr]
    switch(b, False)
    b.clock.advance(1)
    fresh = b.submit(
        submitted(
            b.store, plan_of(step("restart_unit", "worker@1.service", expect=DOWN)), b.clock()
        )
    )
    [again] = rules(b).decided
    assert (again.plan_id, again.outcome) == (fresh.plan_id, "approved")


def test_a_plan_changed_after_the_rule_read_it_is_not_approved(
    enforcing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's uid rewrites the plan between the rule's decision and the approval:
    the approval is bound to the sha256 the rule read, so nothing is approved and the
    plan waits for a human."""
    b = enforcing
    record = submit(b, "nginx.service")
    import approver_svc.rules as rules_module

    real = rules_module.recent_errors

    def tampering(*args: object) -> object:
        edit_record(b.store, record.plan_id, sha256="f" * 64)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rules_module, "recent_errors", tampering)
    [decided] = rules(b).decided
    assert decided.outcome == "failed"
    assert not approval_path(b.approvals_dir, record.plan_id).exists()
    assert b.store.status(record.plan_id).state is PlanState.PROPOSED


def test_a_flood_of_plans_for_one_unit_gets_one_approval(enforcing: Bench) -> None:
    """Thirty plans for worker@1 at once: the rule approves the oldest; each other waits,
    as that one is on its way."""
    b = enforcing
    records = []
    for n in range(30):
        plan = plan_of(step("restart_unit", "worker@1.service", expect=DOWN), goal=f"try {n}")
        records.append(b.submit(submitted(b.store, plan, b.clock())))
        b.clock.advance(1)
    decided = rules(b).decided
    approved = [d.plan_id for d in decided if d.outcome == "approved"]
    assert approved == [records[0].plan_id]
    assert len(decided) == 30


def test_a_rule_stops_at_its_limit_however_well_its_fixes_held(enforcing: Bench) -> None:
    """max_per_unit 2 in 24h: two restarts of nginx approved and VERIFIED; the third
    waits for a human."""
    b = enforcing
    for n in range(3):
        plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal=f"restart {n}")
        record = b.submit(submitted(b.store, plan, b.clock()))
        [decided] = rules(b).decided
        if n < 2:
            assert decided.outcome == "approved", decided
            ended(b, record, PlanState.VERIFIED, timedelta(minutes=2))
            b.clock.advance(31 * 60)  # past the restart budget
        else:
            assert decided.outcome == "for humans"
            assert "approved 2 plans of nginx.service in the last 24h" in decided.refused[0]


def test_a_relay_may_not_ask_the_rules_nor_pause_them(enforcing: Bench) -> None:
    """opsbot-notify's and opsbot-web's uids ask what they may, never root's requests."""
    b = enforcing
    submit(b, "nginx.service")
    for path in (b.notify_socket, b.web_socket):
        for request in (ApplyRules(), PolicySwitch(paused=False, by="x"), PolicyReport()):
            reply = b.ask(path, request)
            assert isinstance(reply, Refused) and reply.kind == "request", reply
    assert b.store.status(b.store.ids()[0]).state is PlanState.PROPOSED


def test_the_record_is_bounded_and_what_was_dropped_is_counted(
    shadowing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of plans cannot grow the approver's state: past the bound the oldest
    records go, and the report says how many."""
    monkeypatch.setattr(approver_state, "MAX_RULE_RECORDS", 5)
    b = shadowing
    for n in range(8):
        b.submit(
            submitted(
                b.store, plan_of(step("restart_unit", f"app{n}.service", expect=DOWN)), b.clock()
            )
        )
        b.clock.advance(1)
    rules(b)
    shown = report(b)
    assert (shown.records, shown.dropped) == (5, 3)


def test_a_stale_status_record_is_not_a_verdict(enforcing: Bench) -> None:
    """(Guard of the suspension through the approver) the last restart of nginx ended
    UNRESOLVED: the next plan waits for a human."""
    b = enforcing
    first = submit(b, "nginx.service")
    rules(b)
    status: StatusRecord = b.store.status(first.plan_id)
    assert status.state is PlanState.APPROVED
    ended(b, first, PlanState.UNRESOLVED, timedelta(minutes=2))
    b.clock.advance(31 * 60)
    plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal="again")
    b.submit(submitted(b.store, plan, b.clock()))
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    assert "ended UNRESOLVED" in decided.refused[0]


def test_erasing_the_rule_from_the_statuses_does_not_reset_its_limit(enforcing: Bench) -> None:
    """The executor's uid owns the status files: it blanks approved_by_rule in the two
    plans the rule approved. The approver counts from its own record too, so the third
    restart of nginx in 24h still waits for a human."""
    b = enforcing
    for n in range(3):
        plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal=f"restart {n}")
        record = b.submit(submitted(b.store, plan, b.clock()))
        [decided] = rules(b).decided
        if n == 2:
            assert decided.outcome == "for humans"
            assert "approved 2 plans of nginx.service in the last 24h" in decided.refused[0]
            break
        assert decided.outcome == "approved"
        ended(b, record, PlanState.VERIFIED, timedelta(minutes=2))
        status = b.store.status(record.plan_id)
        b.store.save_status(status.model_copy(update={"approved_by_rule": ""}))
        b.clock.advance(31 * 60)


def test_a_flood_of_other_plans_does_not_push_an_approval_out_of_the_record(
    enforcing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for 5 records, an approval of nginx and then 10 plans for units no rule
    names: the approval is what the record keeps."""
    monkeypatch.setattr(approver_state, "MAX_RULE_RECORDS", 5)
    b = enforcing
    first = submit(b, "nginx.service")
    rules(b)
    for n in range(10):
        b.clock.advance(1)
        b.submit(
            submitted(
                b.store, plan_of(step("restart_unit", f"app{n}.service", expect=DOWN)), b.clock()
            )
        )
    rules(b)
    shown = report(b)
    assert (shown.records, shown.dropped) == (5, 6)
    assert first.plan_id in {d.plan_id for d in shown.recent}


def test_root_renewing_a_rules_approval_makes_it_roots(enforcing: Bench) -> None:
    """The rule approved nginx's restart; root renews the approval with `opsbot approve`:
    the approval in force is root's, and the plan's status says so, not the rule."""
    import plans

    b = enforcing
    record = submit(b, "nginx.service")
    rules(b)
    plans.approve(
        b.store,
        b.approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256,
        accepted=b.witness(record.plan_id),
        approver="root",
        now=b.clock(),
        ttl_seconds=3600,
    )
    status = b.store.status(record.plan_id)
    assert (status.approved_by, status.approved_by_rule, status.rule_sha256) == ("root", "", "")
    approval = json.loads(approval_path(b.approvals_dir, record.plan_id).read_bytes())
    assert approval["approver"] == "root" and "approved_by_rule" not in approval


def test_a_rule_of_many_units_still_records_and_tells(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """A rule naming 64 units refuses a plan for one it lacks with a reason that lists a
    few of them, not all: the record holds it, and the next plan it names is approved,
    recorded and told."""
    many = {
        **RESTARTS,
        "mode": "enforce",
        "units": [f"unit-{n:03d}-{'x' * 60}.service" for n in range(63)] + ["nginx.service"],
    }
    with bench(tmp_path, store, approvals_dir, config=config(many)) as b:
        lacked = submit(b, "app.service")
        b.clock.advance(1)
        approved = submit(b, "nginx.service")
        outcomes = {d.plan_id: d.outcome for d in rules(b).decided}
        assert outcomes == {lacked.plan_id: "for humans", approved.plan_id: "approved"}
        [told] = b.announce().ruled
        assert told.plan.plan_id == approved.plan_id


def test_a_status_that_cannot_be_written_leaves_no_approval(
    enforcing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses the APPROVED status (a full disk): the approval file the rule
    wrote is removed, so nothing runs on an approval no status and no count knows."""
    from shared_io.errors import StoreError

    b = enforcing
    record = submit(b, "nginx.service")

    def full(status: object) -> None:
        raise StoreError("no space left on device")

    monkeypatch.setattr(b.store, "save_status", full)
    [decided] = rules(b).decided
    assert decided.outcome == "failed"
    assert "no space left on device" in decided.refused[0]
    assert not approval_path(b.approvals_dir, record.plan_id).exists()


def test_the_rules_history_never_takes_the_state_past_its_bytes(
    shadowing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the state file bounded to 64 KiB, 300 plans the rules refused: the file stays
    under the bound (the oldest records dropped, counted) and the approver still answers."""
    monkeypatch.setattr(approver_state, "MAX_STATE_BYTES", 64 * 1024)
    b = shadowing
    for n in range(300):
        b.submit(submitted(b.store, plan_of(step("restart_unit", f"app{n}.service")), b.clock()))
        b.clock.advance(1)
    while rules(b).decided:
        pass
    assert len(b.state_bytes()) <= 64 * 1024
    shown = report(b)
    assert shown.dropped > 0 and shown.records + shown.dropped == 300


def test_a_plan_the_journal_does_not_vouch_for_yet_is_asked_about_again(
    enforcing: Bench,
) -> None:
    """The rules run before journald has the executor's plan.accepted entry: nothing is
    approved or recorded; once the entry is there, the next run approves it."""
    b = enforcing
    record = submitted(
        b.store, plan_of(step("restart_unit", "nginx.service", expect=DOWN)), b.clock()
    )
    assert rules(b).decided == []
    assert not approval_path(b.approvals_dir, record.plan_id).exists()
    b.submit(record)  # the journal entry arrives
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (record.plan_id, "approved")


def test_a_plan_stored_while_the_trigger_runs_is_decided_in_that_run(enforcing: Bench) -> None:
    """systemd merges a plan stored during a run of opsbot-rules.service into that run:
    the run looks once more after a quiet second, so the plan stored meanwhile is decided
    by it, not a minute later by the timer."""
    from approver_svc import trigger

    b = enforcing
    first = submit(b, "nginx.service")
    later: list[PlanRecord] = []

    def meanwhile(seconds: float) -> None:
        assert seconds == trigger.QUIET_SECONDS
        if not later:
            b.clock.advance(1)
            later.append(submit(b, "worker@1.service"))

    assert trigger.apply_rules(b.root_socket, sleep=meanwhile) == 0
    for record in (first, later[0]):
        assert b.store.status(record.plan_id).state is PlanState.APPROVED


def test_a_rule_restarts_only_what_root_reads_failing_and_records_what_it_read(
    enforcing: Bench,
) -> None:
    """The diagnose user submits a restart of nginx.service, which runs, with a
    precondition that holds and a symptom that says it was killed. Root's approver reads
    it active/running with nothing of its own failing: no approval is written and the plan
    waits for a human; the record says what root read. Once root reads it failed, the
    rule approves, and the record says that too."""
    b = enforcing
    running = {"active_state": ["active"]}
    bait = plan_of(step("restart_unit", "nginx.service", expect=running), goal="bait")
    claimed = {"unit": "nginx.service", "result": "signal"}
    bait = Plan.model_validate({**bait.model_dump(exclude_none=True), "symptom": claimed})
    healthy = UnitReading("nginx.service", "active", "running", "success")
    b.service.read_units = lambda units: Reading({"nginx.service": healthy})
    record = b.submit(submitted(b.store, bait, b.clock()))
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    assert decided.read == [
        "nginx.service is active/running (Result=success), no health target of its own"
    ]
    assert "root reads no failure of nginx.service now" in decided.refused[0]
    assert not approval_path(b.approvals_dir, record.plan_id).exists()
    assert b.store.status(record.plan_id).state is PlanState.PROPOSED
    b.service.read_units = root_reads_failed
    again = submit(b, "nginx.service")
    [approved] = rules(b).decided
    assert (approved.plan_id, approved.outcome) == (again.plan_id, "approved")
    assert approved.read == ["nginx.service is failed/failed (Result=exit-code)"]


def test_a_plan_left_when_the_runs_probes_are_spent_is_asked_about_next_run(
    enforcing: Bench,
) -> None:
    """The run's seconds of probing are spent before nginx's plan is read: it is not
    decided (no record, no approval) and the next run decides it."""
    b = enforcing
    record = submit(b, "nginx.service")

    def spent(units: list[str]) -> Reading:
        raise ProbesSpent("10.0 s of probes spent in this run")

    b.service.read_units = spent
    assert rules(b).decided == []
    assert b.store.status(record.plan_id).state is PlanState.PROPOSED
    b.service.read_units = root_reads_failed
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (record.plan_id, "approved")
