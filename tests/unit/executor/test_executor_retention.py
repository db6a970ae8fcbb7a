"""The live store stays the size of the recent past: plans that ended longer ago than
``[executor] retention_days`` move to ``archive/YYYY-MM/`` (found by their ids alone,
no file read below the cut), `opsbot show` of one says where it went, and a list reads
only the newest plans it answers with, saying how many there are."""

from datetime import timedelta
from pathlib import Path

from structlog.testing import capture_logs

from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from plans import PlanStore, reject
from plans.errors import PlanNotFound
from plans.records import Transition
from shared_schema import ListPlans, Plan, PlanList, PlanState, Reject, ShowPlan
from tests.unit.plans.helpers import NOW, POLICY, Clock, step, submitted

OPERATOR = Peer(pid=7, uid=1000, gid=1000, user="alice", role=Role.OPERATOR)


def plan(number: int) -> Plan:
    return Plan.model_validate(
        {"goal": f"restart nginx, try {number}", "steps": [step("restart_unit", "nginx.service")]}
    )


def test_plans_older_than_the_retention_leave_the_live_store(
    store: PlanStore, approvals_dir: Path
) -> None:
    """Three plans 100 days old (one rejected, one left PROPOSED, long expired, one stuck
    APPLYING) and one of yesterday; retire at 90 days: the first two move, with their
    status, into archive/YYYY-MM/; the one APPLYING stays for someone to look at, and
    yesterday's stays. Showing an archived one says it is archived and where."""
    old = NOW - timedelta(days=100)
    rejected = submitted(store, plan(1), old).plan_id
    reject(store, approvals_dir, rejected, by="root", now=old, reason="no")
    expired = submitted(store, plan(2), old + timedelta(seconds=1)).plan_id
    applying = submitted(store, plan(3), old + timedelta(seconds=2)).plan_id
    status = store.status(applying)
    running = Transition(state=PlanState.APPLYING, at=old, by="opsbot-executor")
    store.save_status(
        status.model_copy(
            update={"state": PlanState.APPLYING, "history": [*status.history, running]}
        )
    )
    recent = submitted(store, plan(4), NOW - timedelta(days=1)).plan_id

    moved = store.retire(NOW - timedelta(days=90))

    assert moved == [rejected, expired]
    assert store.ids() == [applying, recent]
    month = store.archive / f"{rejected[:4]}-{rejected[4:6]}"
    assert sorted(p.name for p in month.iterdir()) == sorted(
        [f"{rejected}.json", f"{rejected}.status.json", f"{expired}.json"]
    )
    service = ExecutorService(store, POLICY, Clock(), approvals_dir)
    shown = service.handle(ShowPlan(plan_id=rejected), OPERATOR)
    assert isinstance(shown, Reject) and "archived" in shown.reason, shown
    try:
        store.load(rejected)
    except PlanNotFound as exc:
        assert str(month / f"{rejected}.json") in (exc.hint or "")
    assert store.retire(NOW - timedelta(days=90)) == []


def test_a_list_reads_only_the_newest_plans_and_says_how_many_there_are(
    store: PlanStore, approvals_dir: Path
) -> None:
    """30 plans a minute apart: a list of 10 answers the 10 newest, total 30; with since,
    only those at or after it count. The older plans are not read: one of them made
    unreadable does not even show as a warning."""
    ids = [submitted(store, plan(n), NOW + timedelta(minutes=n)).plan_id for n in range(30)]
    (store.plans / f"{ids[0]}.json").write_text("not a record")
    service = ExecutorService(store, POLICY, Clock(), approvals_dir)
    with capture_logs() as logs:
        listed = service.handle(ListPlans(limit=10), OPERATOR)
    assert not [e for e in logs if e["event"] == "plan.unreadable"], logs
    assert isinstance(listed, PlanList)
    assert [p.plan_id for p in listed.plans] == ids[-10:] and listed.total == 30
    since = service.handle(ListPlans(limit=100, since=NOW + timedelta(minutes=25)), OPERATOR)
    assert isinstance(since, PlanList)
    assert [p.plan_id for p in since.plans] == ids[25:] and since.total == 5
