"""A rule's past (plans/rules_replay.py): root's approver keeps, with each record, what it
knew when its rules were asked (plans/rule_facts.py); asked again from those records, a
rule approves what `opsbot policy report` says it would have approved in shadow, and a
plan whose decision needs root's reading of the unit, which nobody took then, is listed
as not replayable, never guessed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from plans import PlanStore
from plans.readings import Reading, UnitReading
from plans.records import Transition
from plans.rules_replay import replay_rules, stored
from shared_schema import OpsbotConfig, PlanState
from shared_schema.approver_socket import ApplyRules, PolicyReport, PolicyReported, RuleDecision
from shared_schema.config import ApproverSettings
from shared_schema.standing import ApproveRule
from tests.unit.approver.bench import Bench, bench, no_calendar
from tests.unit.plans.helpers import NOW, POLICY, plan_of, root_reads_failed, step, submitted

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
DOWN = {"active_state": ["failed"]}


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def shadowing(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    config = OpsbotConfig.model_validate(
        {
            "executor": POLICY.model_dump(mode="json"),
            "approvers": {"alice": ApproverSettings().model_dump()},
            "approve": {"rule": [RESTARTS]},
        }
    )
    with bench(tmp_path, store, approvals_dir, config=config) as running:
        yield running


def restart(b: Bench, unit: str, expect: dict[str, list[str]] = DOWN) -> str:
    """A restart of ``unit``, found failed (``expect``), as diagnosis submits it; its id."""
    plan = plan_of(step("restart_unit", unit, expect=expect))
    return b.submit(submitted(b.store, plan, b.clock())).plan_id


def asked(b: Bench) -> dict[str, RuleDecision]:
    """The rules asked about every plan that waits; the approver's records of the day by
    plan, fetched a page at a time as `opsbot replay --rules` fetches them."""
    b.as_root(ApplyRules())
    return records(b)


def records(b: Bench, since: datetime = NOW - timedelta(days=1)) -> dict[str, RuleDecision]:
    """The approver's records of the plans decided since ``since``, every page."""
    found: dict[str, RuleDecision] = {}
    after = ""
    while True:
        reply = b.as_root(PolicyReport(records_since=since, after=after))
        assert isinstance(reply, PolicyReported), reply
        found.update((d.plan_id, d) for d in reply.records_sent)
        if not reply.more:
            return found
        after = reply.records_sent[-1].plan_id


def verified(b: Bench, plan_id: str) -> None:
    """A human approved the plan, it ran and opsbot-verify judged it VERIFIED."""
    status = b.store.status(plan_id)
    history = [*status.history, Transition(state=PlanState.VERIFIED, at=b.clock(), by="verify")]
    b.store.save_status(status.model_copy(update={"state": PlanState.VERIFIED, "history": history}))


def test_a_rule_replayed_approves_what_the_policy_report_says_it_would_have(
    shadowing: Bench,
) -> None:
    """Over an evening the shadow rule is asked about four plans: nginx.service's restart
    (root reads it failed), then worker@1.service's (root reads it running and healthy),
    app.service's (not the rule's) and a second of nginx.service after the first held.
    `opsbot replay --rules` with the same rule, from the approver's records and the plans
    the executor kept, would approve exactly the plans the report says it would have, and
    says they ended as the report does."""
    b = shadowing
    first = restart(b, "nginx.service")
    asked(b)
    verified(b, first)
    b.clock.advance(3600)
    healthy = UnitReading("worker@1.service", "active", "running", "success")
    b.service.read_units = lambda units: Reading({"worker@1.service": healthy})
    worker = restart(b, "worker@1.service", expect={"active_state": ["active"]})
    asked(b)
    b.service.read_units = root_reads_failed
    other = restart(b, "app.service")
    b.clock.advance(3600)
    second = restart(b, "nginx.service")
    records = asked(b)
    report = b.as_root(PolicyReport())
    assert isinstance(report, PolicyReported)
    [summary] = report.rules
    plans = [stored(b.store, plan_id) for plan_id in (first, worker, other, second)]
    rule = ApproveRule.model_validate(RESTARTS)

    [replayed] = replay_rules([rule], POLICY, plans, records, analyze=no_calendar)

    would = sorted(d.plan_id for d in records.values() if d.outcome == "would approve")
    assert would == [first, second]
    assert [approved["plan_id"] for approved in replayed.approved] == would
    assert len(replayed.approved) == summary.would_approve == 2
    assert dict(replayed.ended) == summary.ended == {"VERIFIED": 1, "PROPOSED": 1}
    assert replayed.approved[0]["steps"] == ["restart_unit nginx.service"]
    assert replayed.not_replayable == []
    assert dict(replayed.refused) == summary.refused
    [reason] = [r for r in replayed.refused if "worker@1" in r]
    assert reason.startswith("root reads no failure of worker@1.service now")


def approved_by_rule(b: Bench, plan_id: str) -> None:
    """The rule approved the plan (as in enforce), it ran and held: VERIFIED."""
    status = b.store.status(plan_id)
    history = [
        *status.history,
        Transition(state=PlanState.APPROVED, at=b.clock(), by="rule:night-restarts"),
        Transition(state=PlanState.VERIFIED, at=b.clock(), by="verify"),
    ]
    update = {"state": PlanState.VERIFIED, "history": history, "approved_by_rule": "night-restarts"}
    b.store.save_status(status.model_copy(update=update))


def test_a_decision_that_needs_a_reading_nobody_took_is_listed_not_guessed(
    shadowing: Bench,
) -> None:
    """The rule approved two restarts of nginx.service today, its limit: root's approver
    refuses the third before it reads the unit. A rule allowed three a day gets further,
    to root's reading, which nobody took then: the plan is listed as not replayable, and
    why. So is app.service's, which the approver's rule never reached (nothing of the host
    was asked), and a plan stored after the rules last ran (no record at all). A plan the
    new rule cannot reach is refused, record or not."""
    b = shadowing
    for _ in range(2):
        approved_by_rule(b, restart(b, "nginx.service"))
        b.clock.advance(600)
    third = restart(b, "nginx.service")
    app = restart(b, "app.service")
    records = asked(b)
    assert "max_per_unit 2" in records[third].refused[0]
    facts = records[third].facts
    assert facts is not None and facts.history and facts.reading is None
    late = restart(b, "worker@1.service")
    reload = plan_of(step("reload_unit", "nginx.service", expect=DOWN))
    reloaded = b.submit(submitted(b.store, reload, b.clock())).plan_id
    wide = ApproveRule.model_validate(
        {**RESTARTS, "name": "wide", "units": ["*.service"], "max_per_unit": 3}
    )
    plans = [stored(b.store, plan_id) for plan_id in (third, app, late, reloaded)]

    [replayed] = replay_rules([wide], POLICY, plans, records, analyze=no_calendar)

    assert replayed.approved == []
    why = {entry["plan_id"]: entry["why"] for entry in replayed.not_replayable}
    assert sorted(why) == sorted([third, app, late])
    assert why[third] == (
        "its decision needs root's reading of its units then, which the record does not hold"
    )
    assert "recent plans forbade it then" in why[app]
    assert "kept no record" in why[late]
    assert dict(replayed.refused) == {"reload_unit is not one of its tools (restart_unit)": 1}


def test_the_records_come_a_page_at_a_time_and_none_is_lost(
    shadowing: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root's approver sends the records of a period a page at a time (each within the
    reply's bytes): with pages of one record, three plans decided come in three pages,
    oldest first, and a period that starts after them holds none."""
    b = shadowing
    monkeypatch.setattr("approver_svc.rules.PAGE_BYTES", 1)
    ids = []
    for unit in ("nginx.service", "app.service", "worker@1.service"):
        ids.append(restart(b, unit))
        b.clock.advance(60)
    b.as_root(ApplyRules())
    first = b.as_root(PolicyReport(records_since=NOW))
    assert isinstance(first, PolicyReported)
    assert [d.plan_id for d in first.records_sent] == [min(ids)] and first.more
    assert sorted(records(b, since=NOW)) == sorted(ids)
    assert records(b, since=NOW + timedelta(hours=1)) == {}
    assert all(d.facts is None for d in first.recent)  # the report's bytes: no facts
