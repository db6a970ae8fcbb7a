"""``opsbot plans`` over a large store: a listing reads what it shows and no more. The
store's names are listed again only when its directory changed, each plan shown is read
again only when its record or status changed, and what is shown is never older than the
files: a state that moved, a plan that was edited, a plan stored or archived a moment
ago, all show at the next listing."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from executor_svc.service import ExecutorService
from plans import PlanStore, StatusRecord
from plans._listing import SETTLE_SECONDS, PlanIds
from shared_schema import ListPlans, PlanList, PlanState
from tests.unit.plans.helpers import DIAGNOSE, NOW, POLICY, edit_record, plan_of

Counted = dict[str, int]


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, counts: Counted) -> None:
    """Count the calls of ``owner.name`` (which still runs) in ``counts[name]``."""
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[name] = counts.get(name, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def stored(store: PlanStore, count: int) -> list[str]:
    """``count`` plans stored a second apart, oldest first: their ids."""
    ids = []
    for number in range(count):
        plan = plan_of(goal=f"bring nginx back, #{number}")
        plan_id, _, _ = store.add(plan, DIAGNOSE, NOW + timedelta(seconds=number))
        ids.append(plan_id)
    return ids


def settled(store: PlanStore) -> None:
    """As if the store's directory had last changed long ago: its listing may be kept."""
    store._ids.clock = lambda: time.time() + 10 * SETTLE_SECONDS


def listing(service: ExecutorService, limit: int) -> PlanList:
    reply = service.list_plans(ListPlans(limit=limit))
    assert isinstance(reply, PlanList)
    return reply


@pytest.fixture
def service(store: PlanStore, tmp_path: Path) -> ExecutorService:
    return ExecutorService(store, POLICY, lambda: NOW, tmp_path / "approvals")


def test_the_same_listing_again_reads_no_plan_and_lists_no_names(
    service: ExecutorService, store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 5 newest of 40 stored plans, twice over a store that did not change: the first
    listing reads those 5 plans and lists the directory once; the second reads neither
    (before, each listing read its plans and listed every name of the store again)."""
    ids = stored(store, 40)
    settled(store)
    counts: Counted = {}
    counting(monkeypatch, store, "load", counts)
    counting(monkeypatch, os, "listdir", counts)
    first = listing(service, 5)
    assert [p.plan_id for p in first.plans] == ids[-5:] and first.total == 40
    assert counts == {"load": 5, "listdir": 1}
    again = listing(service, 5)
    assert again == first
    assert counts == {"load": 5, "listdir": 1}


def test_a_plan_whose_state_moved_is_read_again_and_shows_its_new_state(
    service: ExecutorService, store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root rejects one of the plans listed: the next listing reads that plan again (and
    only that one) and shows it REJECTED."""
    ids = stored(store, 10)
    settled(store)
    listing(service, 3)
    counts: Counted = {}
    counting(monkeypatch, store, "load", counts)
    store.save_status(StatusRecord(plan_id=ids[-2], state=PlanState.REJECTED))
    states = {p.plan_id: p.state for p in listing(service, 3).plans}
    assert states == {
        ids[-3]: PlanState.PROPOSED,
        ids[-2]: PlanState.REJECTED,
        ids[-1]: PlanState.PROPOSED,
    }
    assert counts == {"load": 1}


def test_a_plan_edited_after_a_listing_is_shown_unreadable_at_the_next(
    service: ExecutorService, store: PlanStore
) -> None:
    """Someone with the executor's uid rewrites a listed plan's bytes (and sets its file's
    time back): the next listing does not show what it read before, but marks the plan
    unreadable, as the first listing after the edit always did."""
    [plan_id] = stored(store, 1)
    settled(store)
    assert [p.goal for p in listing(service, 5).plans] == ["bring nginx back, #0"]
    path = store.plans / f"{plan_id}.json"
    before = path.stat()
    edit_record(store, plan_id, plan=store.load(plan_id).plan.replace("nginx", "sshd"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [(p.goal, p.units) for p in listing(service, 5).plans] == [("(unreadable plan)", [])]


def test_a_plan_stored_or_archived_after_a_listing_shows_at_the_next(
    service: ExecutorService, store: PlanStore
) -> None:
    """The names kept from a settled store are not the next listing's once a plan is
    stored (by this executor or any other writer) or moved to the archive: the directory
    changed, and its names are listed again."""
    ids = stored(store, 3)
    settled(store)
    assert [p.plan_id for p in listing(service, 10).plans] == ids
    other = PlanStore(store.root)  # another process's store: this one did not see it write
    newest, _, _ = other.add(plan_of(goal="a newer plan"), DIAGNOSE, NOW + timedelta(hours=1))
    assert [p.plan_id for p in listing(service, 10).plans] == [*ids, newest]
    os.rename(store.plans / f"{ids[0]}.json", store.root / f"{ids[0]}.json")
    shown = listing(service, 10)
    assert [p.plan_id for p in shown.plans] == [*ids[1:], newest] and shown.total == 3


def test_names_listed_just_after_a_change_are_not_kept(
    store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing taken less than SETTLE_SECONDS after the directory last changed is taken
    again next time: on a file system whose times are coarser than the changes, one just
    after it could leave them as they were. Once the directory settled, it is kept."""
    stored(store, 3)
    now = [time.time()]
    names = PlanIds(store.plans, clock=lambda: now[0])
    counts: Counted = {}
    counting(monkeypatch, os, "listdir", counts)
    assert len(names.ids()) == 3 and len(names.ids()) == 3
    assert counts == {"listdir": 2}
    now[0] += SETTLE_SECONDS + 1
    assert len(names.ids()) == 3 and len(names.ids()) == 3
    assert counts == {"listdir": 3}
