"""Standing rules in root's approver (approver_svc/rules.py), the guards around the
decision: which plans a run asks about (a plan in its last second yes, an expired or
rejected one never), that one plan's trouble keeps no other waiting, that a rule's
limit holds whichever record is lost, what each record and notice says, and what the
report counts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from approver_svc.news import OUTCOME_HORIZON
from approver_svc.rules import MAX_LINE, MAX_REASONS
from plans import PlanStore, Provenance, approval_path, write_rejection
from plans.readings import Reading, UnitReading
from plans.records import Transition
from shared_schema import PlanState
from shared_schema.approver_socket import Follow, Followed
from tests.unit.approver.bench import Bench, bench
from tests.unit.approver.test_approver_rules import (
    DOWN,
    RESTARTS,
    config,
    ended,
    report,
    rules,
    submit,
)
from tests.unit.plans.helpers import (
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

#: A second rule for nginx alone, beside RESTARTS.
NGINX_ONLY = {
    "name": "nginx-only",
    "tools": ["restart_unit"],
    "units": ["nginx.service"],
    "max_per_unit": 2,
    "period": "24h",
}


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


def approve_twice(b: Bench) -> list[str]:
    """Two restarts of nginx the rule approved, each VERIFIED, half an hour apart."""
    ids = []
    for n in range(2):
        plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal=f"restart {n}")
        record = b.submit(submitted(b.store, plan, b.clock()))
        [decided] = rules(b).decided
        assert decided.outcome == "approved", decided
        ended(b, record, PlanState.VERIFIED, timedelta(minutes=2))
        b.clock.advance(31 * 60)  # past the restart budget
        ids.append(record.plan_id)
    return ids


# -- which plans a run asks about ----------------------------------------------------


def test_a_plan_in_its_last_second_is_still_put_to_the_rules(enforcing: Bench) -> None:
    """nginx's restart was stored half a second into a second, and the rules run a tenth
    of a second before it expires (its id's second is the oldest a run still reads): the
    rule approves it."""
    b = enforcing
    b.clock.advance(0.5)
    record = submit(b, "nginx.service")
    b.clock.advance(POLICY.plan_ttl_seconds - 0.1)
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (record.plan_id, "approved")


def test_a_plan_that_expires_this_very_moment_is_not_put_to_the_rules(enforcing: Bench) -> None:
    """The rules run exactly plan_ttl_seconds after nginx's restart was stored: it has
    expired; nothing is decided or recorded about it, and nothing approved."""
    b = enforcing
    record = submit(b, "nginx.service")
    b.clock.advance(POLICY.plan_ttl_seconds)
    assert rules(b).decided == []
    assert not approval_path(b.approvals_dir, record.plan_id).exists()


def test_a_plan_root_rejected_is_not_put_to_the_rules_whatever_its_status_says(
    enforcing: Bench,
) -> None:
    """Root's `opsbot reject` wrote its rejection of nginx's restart and could not write
    the REJECTED status (a full disk; or the executor's uid put PROPOSED back since): the
    rules never ask about it, and it is approved by no rule."""
    b = enforcing
    record = submit(b, "nginx.service")
    write_rejection(b.approvals_dir, record, "root", b.clock(), "not tonight")
    assert b.store.status(record.plan_id).state is PlanState.PROPOSED
    assert rules(b).decided == []
    assert not approval_path(b.approvals_dir, record.plan_id).exists()


# -- one plan's trouble keeps no other waiting ---------------------------------------


def test_a_plan_that_crashes_the_rules_keeps_no_later_plan_waiting(enforcing: Bench) -> None:
    """Reading nginx.service fails unexpectedly (a bug, not an OpsbotError): nginx's plan
    is left undecided, and worker@1's restart, stored after it, is approved in the same
    run."""
    b = enforcing

    def broken_for_nginx(units: list[str]) -> Reading:
        if "nginx.service" in units:
            raise RuntimeError("an unexpected failure reading nginx.service")
        return root_reads_failed(units)

    b.service.read_units = broken_for_nginx
    first = submit(b, "nginx.service")
    b.clock.advance(1)
    later = submit(b, "worker@1.service")
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (later.plan_id, "approved")
    assert b.store.status(first.plan_id).state is PlanState.PROPOSED


def test_a_plan_the_journal_does_not_vouch_for_keeps_no_later_plan_waiting(
    enforcing: Bench,
) -> None:
    """nginx's plan is stored but journald has no plan.accepted entry for it yet; worker@1's,
    stored after it, has one: the run approves worker@1's and asks about nginx's again
    next time."""
    b = enforcing
    unvouched = submitted(
        b.store, plan_of(step("restart_unit", "nginx.service", expect=DOWN)), b.clock()
    )
    b.clock.advance(1)
    later = submit(b, "worker@1.service")
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (later.plan_id, "approved")
    b.submit(unvouched)  # the journal entry arrives
    [again] = rules(b).decided
    assert (again.plan_id, again.outcome) == (unvouched.plan_id, "approved")


# -- a rule's limit, whichever record is lost ----------------------------------------


def test_a_rules_limit_holds_when_roots_approver_starts_afresh(enforcing: Bench) -> None:
    """The rule approved two restarts of nginx today; then root moved the approver's state
    file away (it would not load: the approver starts afresh, as its hint says). The plans'
    statuses still count the two approvals: the third restart waits for a human."""
    b = enforcing
    approve_twice(b)
    (b.state_dir / "state.json").rename(b.state_dir.parent / "state.json.broken")
    plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal="restart 2")
    b.submit(submitted(b.store, plan, b.clock()))
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    assert "approved 2 plans of nginx.service in the last 24h" in decided.refused[0]


def test_a_plans_own_status_is_not_its_units_history(enforcing: Bench) -> None:
    """The rule approved one restart of nginx today (max_per_unit 2). The executor's uid
    writes into the next nginx plan's own status, still PROPOSED, that the rule approved it
    an hour ago: the plan asked about is no part of its unit's history, so the rule
    approves it, its second of the day."""
    b = enforcing
    plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN), goal="restart 0")
    first = b.submit(submitted(b.store, plan, b.clock()))
    assert rules(b).decided[0].outcome == "approved"
    ended(b, first, PlanState.VERIFIED, timedelta(minutes=2))
    b.clock.advance(31 * 60)
    record = submit(b, "nginx.service")
    status = b.store.status(record.plan_id)
    claimed = Transition(state=PlanState.APPROVED, at=b.clock() - timedelta(hours=1), by="x")
    b.store.save_status(
        status.model_copy(
            update={"history": [*status.history, claimed], "approved_by_rule": "night-restarts"}
        )
    )
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (record.plan_id, "approved")


def test_a_rule_with_windows_approves_while_one_is_open(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """The rule acts only between 21:00 and 23:00 UTC (systemd-analyze stood in for by a
    daily 21:00 calendar); at 21:35 nginx's restart is approved."""

    def daily_at_nine(expression: str, base: datetime, iterations: int) -> list[datetime]:
        first = base.replace(hour=21, minute=0, second=0, microsecond=0)
        if first <= base:
            first += timedelta(days=1)
        return [first + timedelta(days=k) for k in range(iterations)]

    evening = {
        **RESTARTS,
        "mode": "enforce",
        "windows": [{"start": "*-*-* 21:00", "duration": "2h"}],
    }
    with bench(tmp_path, store, approvals_dir, analyze=daily_at_nine, config=config(evening)) as b:
        record = submit(b, "nginx.service")
        [decided] = rules(b).decided
        assert (decided.plan_id, decided.outcome) == (record.plan_id, "approved")


# -- what a record says ---------------------------------------------------------------


def test_an_approval_records_the_shadow_rule_that_agreed(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """An enforce rule for nginx and worker@*, and nginx-only in shadow beside it: the
    record of nginx's approval says nginx-only would have approved it too; the record of
    worker@1's names no shadow rule."""
    with bench(
        tmp_path, store, approvals_dir, config=config({**RESTARTS, "mode": "enforce"}, NGINX_ONLY)
    ) as b:
        nginx = submit(b, "nginx.service")
        b.clock.advance(1)
        worker = submit(b, "worker@1.service")
        shadows = {d.plan_id: (d.outcome, d.shadow_rule) for d in rules(b).decided}
        assert shadows == {
            nginx.plan_id: ("approved", "nginx-only"),
            worker.plan_id: ("approved", ""),
        }


def test_what_a_shadow_rule_would_approve_records_its_version_and_who_refused(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """An enforce rule for worker@* only, and night-restarts in shadow: nginx's restart is
    refused by the first and would be approved by the second. The record names the shadow
    rule's sha256 and the enforce rule's reason, and the report counts that reason."""
    workers = {
        **RESTARTS,
        "name": "worker-restarts",
        "mode": "enforce",
        "units": ["worker@*.service"],
    }
    with bench(tmp_path, store, approvals_dir, config=config(workers, RESTARTS)) as b:
        submit(b, "nginx.service")
        [decided] = rules(b).decided
        shadow = b.service.config.approve.rule[1]
        assert (decided.outcome, decided.rule, decided.rule_sha256) == (
            "would approve",
            "night-restarts",
            shadow.sha256,
        )
        reason = "nginx.service is not one of its units (worker@*.service)"
        assert decided.refused == [f"worker-restarts: {reason}"]
        summary = {s.name: s for s in report(b).rules}["worker-restarts"]
        assert summary.refused == {reason: 1}


def test_a_long_reason_is_cut_to_one_line_of_the_record(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """A rule naming 64 long unit names refuses app.service with a reason longer than a
    line: the record keeps its first MAX_LINE characters, the last one an ellipsis."""
    many = {
        **RESTARTS,
        "mode": "enforce",
        "units": [f"unit-{n:03d}-{'x' * 60}.service" for n in range(63)] + ["nginx.service"],
    }
    with bench(tmp_path, store, approvals_dir, config=config(many)) as b:
        submit(b, "app.service")
        [decided] = rules(b).decided
        [line] = decided.refused
        shown = ", ".join(many["units"][:4]) + ", ..."  # type: ignore[index]
        whole = f"night-restarts: app.service is not one of its units ({shown})"
        assert len(whole) > MAX_LINE
        assert line == whole[: MAX_LINE - 1] + "…"


# -- what the approvers are told -------------------------------------------------------


def test_the_approvers_are_told_why_and_given_a_status_link(enforcing: Bench) -> None:
    """Diagnosis sent two lines of evidence with nginx's restart: the notice of the rule's
    approval carries them, and a status link that follows the plan."""
    b = enforcing
    saw = ["nginx.service failed at 21:30 (Result=exit-code)", "port 80 refuses connections"]
    who = Provenance(uid=998, user="opsbot-diagnose", pid=4242, evidence=saw)
    plan = plan_of(step("restart_unit", "nginx.service", expect=DOWN))
    plan_id, _, _ = b.store.add(plan, who, b.clock())
    record = b.submit(b.store.load(plan_id))
    rules(b)
    [told] = b.announce().ruled
    assert (told.plan.plan_id, told.why) == (record.plan_id, saw)
    assert told.watch is not None
    followed = b.ask(b.web_socket, Follow(token=told.watch))
    assert isinstance(followed, Followed) and followed.plan.plan_id == record.plan_id, followed


def test_an_approval_too_old_to_tell_keeps_no_fresh_one_from_the_approvers(
    enforcing: Bench,
) -> None:
    """The rule approved nginx's restart while no notify asked; an hour later it approves
    worker@1's: the next announce tells the approvers of worker@1's, not of the old one."""
    b = enforcing
    submit(b, "nginx.service")
    rules(b)
    b.clock.advance(OUTCOME_HORIZON.total_seconds())
    fresh = submit(b, "worker@1.service")
    rules(b)
    assert [told.plan.plan_id for told in b.announce().ruled] == [fresh.plan_id]


def test_a_plan_that_cannot_be_read_keeps_no_other_approval_from_the_approvers(
    enforcing: Bench,
) -> None:
    """The rule approved nginx's and then worker@1's restarts; before notify asks, nginx's
    plan file is tampered with: the approvers are told of worker@1's all the same."""
    b = enforcing
    tampered = submit(b, "nginx.service")
    b.clock.advance(1)
    intact = submit(b, "worker@1.service")
    assert {d.outcome for d in rules(b).decided} == {"approved"}
    edit_record(b.store, tampered.plan_id, sha256="f" * 64)
    assert [told.plan.plan_id for told in b.announce().ruled] == [intact.plan_id]


# -- what the report counts ------------------------------------------------------------


def test_the_report_counts_every_approval(enforcing: Bench) -> None:
    """Two restarts of nginx approved by the rule: the report says two."""
    b = enforcing
    approve_twice(b)
    [summary] = report(b).rules
    assert (summary.name, summary.approved) == ("night-restarts", 2)


def test_the_report_counts_every_plan_a_shadow_rule_would_approve_and_how_each_ended(
    shadowing: Bench,
) -> None:
    """In shadow the rule would have approved nginx's and worker@1's restarts; humans
    approved both and both ended VERIFIED: the report says two, both VERIFIED."""
    b = shadowing
    records = [submit(b, "nginx.service")]
    b.clock.advance(1)
    records.append(submit(b, "worker@1.service"))
    assert [d.outcome for d in rules(b).decided] == ["would approve"] * 2
    for record in records:
        ended(b, record, PlanState.VERIFIED, timedelta(minutes=3))
    [summary] = report(b).rules
    assert (summary.would_approve, summary.ended) == (2, {"VERIFIED": 2})


def test_a_rule_removed_from_the_config_is_still_reported(enforcing: Bench) -> None:
    """The rule approved nginx's restart; then root removed it from the config: the report
    still lists it, as removed, with its approval."""
    b = enforcing
    submit(b, "nginx.service")
    rules(b)
    b.service.config = config({**NGINX_ONLY, "mode": "enforce"})
    summaries = {s.name: (s.mode, s.approved) for s in report(b).rules}
    assert summaries == {"nginx-only": ("enforce", 0), "night-restarts": ("removed", 1)}


def test_the_report_counts_each_reason_and_lists_the_most_frequent_newest_first(
    shadowing: Bench,
) -> None:
    """Root reads nginx.service running and healthy, as the plans expect: two restarts of
    it are refused with a reason that holds ': ' itself; two restarts of app0 and one each
    of app1..app10 are refused as none of the rule's units. The report counts each reason
    (2, 2, then 1s), lists the MAX_REASONS most frequent, and its latest decisions newest
    first."""
    b = shadowing
    healthy = UnitReading("nginx.service", "active", "running", "success")
    b.service.read_units = lambda units: Reading({"nginx.service": healthy})
    running = {"active_state": ["active"]}
    ids = []
    for n, unit in enumerate(["nginx.service"] * 2 + ["app0.service"] * 2):
        expect = running if unit == "nginx.service" else DOWN
        plan = plan_of(step("restart_unit", unit, expect=expect), goal=f"try {n}")
        ids.append(b.submit(submitted(b.store, plan, b.clock())).plan_id)
        b.clock.advance(1)
    for n in range(1, 11):
        plan = plan_of(step("restart_unit", f"app{n}.service", expect=DOWN))
        ids.append(b.submit(submitted(b.store, plan, b.clock())).plan_id)
        b.clock.advance(1)
    assert len(rules(b).decided) == 14
    shown = report(b)
    [summary] = shown.rules
    words = "nginx.service is active/running (Result=success), no health target of its own"
    unread = (
        f"root reads no failure of nginx.service now ({words}): the plan's own words are "
        "not evidence; it waits for a human"
    )
    units = "(nginx.service, worker@*.service)"
    assert len(summary.refused) == MAX_REASONS
    assert list(summary.refused.items())[:2] == [
        (unread, 2),
        (f"app0.service is not one of its units {units}", 2),
    ]
    assert [d.plan_id for d in shown.recent] == sorted(ids, reverse=True)
