"""The executor's index of the plans that may still wait (plans._waiting): it answers how
many wait from a submitter and in all, and drops those past their TTL, from counts kept as
it changes, so that a submit costs the same with thousands of plans waiting as with
three."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from plans._waiting import Open, OpenPlans

from .helpers import NOW


def waiting(count: int, uids: int = 3, spread: timedelta = timedelta(hours=10)) -> OpenPlans:
    """``count`` plans from ``uids`` submitters, submitted over ``spread`` before NOW."""
    index = OpenPlans()
    for n in range(count):
        at = NOW - spread * (n / count)
        index.put(f"sha-{n}", Open(f"plan-{n}", uid=n % uids, submitted_at=at))
    return index


def test_the_counts_follow_each_plan_put_replaced_dropped_and_expired() -> None:
    """Each submitter's count and the total follow the index: a plan put, the same
    fingerprint put again (another submitter's now), one dropped, and those at or before
    the TTL's edge expired, the others kept."""
    index = OpenPlans()
    index.put("a", Open("p-a", uid=998, submitted_at=NOW - timedelta(hours=3)))
    index.put("b", Open("p-b", uid=998, submitted_at=NOW - timedelta(hours=1)))
    index.put("c", Open("p-c", uid=0, submitted_at=NOW))
    assert (index.of(998), index.of(0), len(index)) == (2, 1, 3)
    index.put("b", Open("p-b2", uid=0, submitted_at=NOW))
    assert (index.of(998), index.of(0), len(index)) == (1, 2, 3)
    index.drop("c")
    index.drop("c")  # twice: nothing more
    assert (index.of(998), index.of(0), len(index)) == (1, 1, 2)
    index.expire(NOW - timedelta(hours=5))  # none that old
    assert sorted(index.shas()) == ["a", "b"]
    index.expire(NOW - timedelta(hours=3))  # at the edge: expired
    assert index.shas() == ["b"] and (index.of(998), index.of(0)) == (0, 1)
    assert "a" not in index and index["b"].plan_id == "p-b2"


@pytest.mark.serial
def test_two_thousand_submits_count_twenty_thousand_waiting_plans_without_walking_them() -> None:
    """20,000 plans wait (a store whose caps were raised, as the benchmarks' are): 2,000
    submits each drop the expired ones (none) and count their submitter's and all. The
    counts are kept, not summed: this takes milliseconds, where summing over the index
    for each submit, as the store did, took seconds."""
    index = waiting(20_000)
    started = time.process_time()
    for _ in range(2_000):
        index.expire(NOW - timedelta(days=1))
        assert (index.of(1), len(index)) == (6_667, 20_000)
    assert time.process_time() - started < 0.5
