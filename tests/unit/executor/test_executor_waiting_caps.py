"""A flood of plans, the executor's side: at most so many plans wait for approval from one
submitter and in all. Past either cap a submit is rejected with words that say which cap
and what to do, logged and counted, and nothing is stored; a plan already waiting is
still answered as the duplicate it is; once plans are decided or expire, new ones are
stored again."""

import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from plans import PlanStore, reject, store as plans_store
from shared_schema import Accept, Plan, Reject, SubmitPlan
from tests.unit.plans.helpers import POLICY, Clock, step

DIAGNOSE = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
ROOT = Peer(pid=1, uid=0, gid=0, user="root", role=Role.ROOT)
CAPPED = POLICY.model_copy(update={"max_waiting_plans_per_submitter": 3, "max_waiting_plans": 4})


@pytest.fixture
def service(store: PlanStore, approvals_dir: Path, clock: Clock) -> ExecutorService:
    return ExecutorService(store, CAPPED, clock, approvals_dir)


def proposal(number: int) -> SubmitPlan:
    plan = Plan.model_validate(
        {"goal": f"restart nginx, try {number}", "steps": [step("restart_unit", "nginx.service")]}
    )
    return SubmitPlan(plan=plan.model_dump(mode="json", exclude_none=True), run_id="r", symptom="")


def test_the_diagnose_user_cannot_store_more_than_its_cap_of_waiting_plans(
    service: ExecutorService, store: PlanStore
) -> None:
    """Three plans wait (the cap here): the fourth is rejected naming the cap and its
    key, counted and logged, and not stored; the first again is still its duplicate."""
    accepted = [service.handle(proposal(n), DIAGNOSE) for n in range(3)]
    assert all(isinstance(a, Accept) for a in accepted)
    with capture_logs() as logs:
        refused = service.handle(proposal(3), DIAGNOSE)
    assert isinstance(refused, Reject), refused
    assert "3 plans already wait for approval from this submitter" in refused.reason
    assert "max_waiting_plans_per_submitter" in refused.reason
    assert len(store.ids()) == 3
    [entry] = [e for e in logs if e["event"] == "plan.too_many_waiting"]
    assert entry["refused_since_start"] == 1
    # The same plan again is the duplicate it is, not a new plan: still answered.
    again = service.handle(proposal(0), DIAGNOSE)
    assert isinstance(again, Accept) and again.duplicate


def test_root_still_submits_until_the_total_cap(service: ExecutorService) -> None:
    """The diagnose user at its cap does not shut root out: root's plan is stored, and
    the next is rejected at the total cap."""
    for n in range(3):
        assert isinstance(service.handle(proposal(n), DIAGNOSE), Accept)
    assert isinstance(service.handle(proposal(10), ROOT), Accept)
    refused = service.handle(proposal(11), ROOT)
    assert isinstance(refused, Reject) and "4 plans already wait for approval in all" in (
        refused.reason
    )


def test_decided_and_expired_plans_make_room(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A rejected plan no longer waits, nor does one past the plan TTL: each makes room
    for a new one."""
    ids = []
    for n in range(3):
        reply = service.handle(proposal(n), DIAGNOSE)
        assert isinstance(reply, Accept)
        ids.append(reply.plan_id)
    assert isinstance(service.handle(proposal(3), DIAGNOSE), Reject)
    reject(store, approvals_dir, ids[0], by="root", now=clock(), reason="not this one")
    assert isinstance(service.handle(proposal(3), DIAGNOSE), Accept)
    assert isinstance(service.handle(proposal(4), DIAGNOSE), Reject)
    clock.advance(CAPPED.plan_ttl_seconds + 1)
    assert isinstance(service.handle(proposal(4), DIAGNOSE), Accept)


def test_two_submitters_racing_at_the_cap_cannot_both_pass_it(
    service: ExecutorService, store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two plans wait (the cap is three). Two submits race: the first is still being
    written (its fsyncs run outside the store's lock) when the second asks. A plan being
    written counts as waiting, so the second is rejected at the cap; three plans are
    stored, never four."""
    for n in range(2):
        assert isinstance(service.handle(proposal(n), DIAGNOSE), Accept)
    writing, proceed = threading.Event(), threading.Event()
    real_write = plans_store.write_atomic

    def slow_write(path: Path, data: bytes, **kw: object) -> None:
        if threading.current_thread().name == "first":
            writing.set()
            assert proceed.wait(10), "the test never let the first write go on"
        real_write(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(plans_store, "write_atomic", slow_write)
    replies: dict[str, object] = {}
    first = threading.Thread(
        target=lambda: replies.update(first=service.handle(proposal(10), DIAGNOSE)), name="first"
    )
    first.start()
    try:
        assert writing.wait(10), "the first submit never began its write"
        second = service.handle(proposal(11), DIAGNOSE)
    finally:
        proceed.set()
        first.join(10)
    assert isinstance(replies["first"], Accept), replies
    assert isinstance(second, Reject), second
    assert "3 plans already wait for approval from this submitter" in second.reason
    assert len(store.ids()) == 3
