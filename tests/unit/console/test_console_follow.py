"""``opsbot approve --wait`` follows a plan in the store until it ends: a final state, or
the apply refusing its approval (the plan still APPROVED, a refusal recorded); the
deadline otherwise. Time is the test's clock, not the machine's."""

from __future__ import annotations

from pathlib import Path

from opsbot_cli.follow import follow, next_plan
from plans import PlanStore, StatusRecord
from shared_schema import PlanState
from tests.unit.plans.helpers import DIAGNOSE, NOW, plan_of, submitted


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_follow_ends_on_the_apply_refusing_the_approval(tmp_path: Path) -> None:
    """The plan still APPROVED, the apply records a refusal two seconds in: following stops
    there, long before its deadline, and tells the refusal once."""
    store = PlanStore(tmp_path)
    store.ensure()
    record = submitted(store, plan_of())
    store.save_status(StatusRecord(plan_id=record.plan_id, state=PlanState.APPROVED))
    clock = Clock()
    seen: list[str] = []

    def sleep(seconds: float) -> None:
        clock.now += seconds
        if clock.now >= 2:  # two seconds in, the apply refuses it
            status = store.status(record.plan_id)
            store.save_status(status.model_copy(update={"refusal": "no approval"}))

    followed = follow(
        store,
        record.plan_id,
        timeout=60,
        on_change=lambda s: seen.append(s.refusal),
        clock=clock,
        sleep=sleep,
    )
    assert followed.ended and followed.status.refusal == "no approval"
    assert seen == ["no approval"]
    assert clock.now < 3


def test_follow_gives_up_at_its_deadline(tmp_path: Path) -> None:
    """A plan that stays PROPOSED: following gives up at its 5-second deadline, not a second
    later, saying the plan has not ended."""
    store = PlanStore(tmp_path)
    store.ensure()
    record = submitted(store, plan_of())
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.now += seconds

    followed = follow(store, record.plan_id, timeout=5, clock=clock, sleep=sleep)
    assert not followed.ended and followed.status.state == PlanState.PROPOSED
    assert 5 <= clock.now < 6


def test_the_next_plan_of_an_incident_is_found_and_nothing_else_waits(tmp_path: Path) -> None:
    """After an UNRESOLVED plan, ``approve --wait`` looks for the follow-up plan the
    executor put in its incident: found when it is stored; none (at once) when
    opsbot-verify no longer runs and none came; another incident's plan is not it."""
    store = PlanStore(tmp_path)
    store.ensure()
    first = submitted(store, plan_of(goal="start ledger")).plan_id
    submitted(store, plan_of(goal="another symptom"))  # its own incident
    looks = []

    def running() -> bool:
        looks.append(1)
        return False

    assert next_plan(store, first, timeout=60, running=running) is None
    assert looks == [1]  # opsbot-verify is done: no wait
    follow_up = plan_of(goal="restart web").model_copy(update={"follows": first})
    second, _, _ = store.add(follow_up, DIAGNOSE, NOW, incident=first)
    assert next_plan(store, first, timeout=60, running=running) == second
