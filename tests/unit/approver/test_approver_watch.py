"""While root's approver runs it watches the store itself (approver_svc/watch.py): a plan
stored is put to the standing rules at once, with no opsbot-rules.service started for it;
it says so with a flag file that systemd's condition on opsbot-rules.service reads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from approver_svc.daemon import Server, watch_plans
from approver_svc.watch import FLAG_NAME, RulesWatcher
from plans import PlanRecord, PlanStore
from shared_schema import PlanState
from tests.unit.approver.bench import Bench, bench, listening
from tests.unit.approver.test_approver_rules import RESTARTS, config, submit

pytestmark = pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="root's requests: the test must run as root"
)

UNITS = Path(__file__).resolve().parents[3] / "units"


@pytest.fixture
def enforcing(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(
        tmp_path, store, approvals_dir, config=config({**RESTARTS, "mode": "enforce"})
    ) as running:
        yield running


@pytest.fixture
def watching(
    enforcing: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, RulesWatcher]]:
    """opsbot-approver as its unit starts it: serving, and watching the store."""
    runtime = tmp_path / "run-opsbot-approver"
    runtime.mkdir()
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(runtime))
    server = Server(
        listening(tmp_path / "watch.sock"), enforcing.service, idle_timeout=0, notify=False
    )
    watcher = watch_plans(server, enforcing.store.plans)
    assert watcher is not None
    try:
        yield server, watcher
    finally:
        watcher.stop()
        server.listener.close()


def state_within(b: Bench, record: PlanRecord, seconds: float) -> PlanState:
    deadline = time.monotonic() + seconds
    while True:
        state = b.store.status(record.plan_id).state
        if state is not PlanState.PROPOSED or time.monotonic() > deadline:
            return state
        time.sleep(0.02)


def test_a_plan_stored_while_the_approver_runs_is_approved_by_its_rule_with_no_request(
    enforcing: Bench, watching: tuple[Server, RulesWatcher]
) -> None:
    """nginx.service failed; diagnosis stored its restart. No one sends ``rules``: the
    approver saw the plan in the store and its rule approved it (the executor's journal
    entry, which comes a moment after the plan is linked, was read at a later look), and
    the apply was started."""
    b = enforcing
    record = submit(b, "nginx.service")
    assert state_within(b, record, 3.0) is PlanState.APPROVED
    assert b.store.status(record.plan_id).approved_by_rule == "night-restarts"
    assert b.applies_started == [False]


def test_a_plan_stored_before_the_watch_began_is_asked_about_at_its_first_look(
    enforcing: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan stored while the approver was starting rang the doorbell, but by the time
    opsbot-rules.service's condition was read the approver's flag said it watched: the
    approver's first look finds the plan, so it is not left for the next catch-up."""
    b = enforcing
    record = submit(b, "worker@1.service")
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(tmp_path))
    server = Server(listening(tmp_path / "w.sock"), b.service, idle_timeout=0, notify=False)
    watcher = watch_plans(server, b.store.plans)
    assert watcher is not None
    try:
        assert state_within(b, record, 3.0) is PlanState.APPROVED
    finally:
        watcher.stop()
        server.listener.close()


def test_the_flag_says_the_approver_watches_only_while_it_does(
    watching: tuple[Server, RulesWatcher], tmp_path: Path
) -> None:
    """The flag file is there while the approver watches; it is gone before the watch
    ends, so that a plan stored as the approver exits starts opsbot-rules.service, whose
    unit is skipped only while the flag is there."""
    _, watcher = watching
    flag = tmp_path / "run-opsbot-approver" / FLAG_NAME
    assert flag.is_file()
    unit = (UNITS / "opsbot-rules.service").read_text()
    assert f"ConditionPathExists=!/run/opsbot-approver/{FLAG_NAME}" in unit
    assert "RuntimeDirectory=opsbot-approver" in (UNITS / "opsbot-approver.service").read_text()
    watcher.stop()
    assert not flag.exists()


def test_a_plan_seen_keeps_the_approver_from_its_idle_exit(
    enforcing: Bench, watching: tuple[Server, RulesWatcher]
) -> None:
    """The approver exits after --idle-timeout without a connection; a plan it saw in the
    store counts as work, so a host whose plans come through the watch alone keeps it."""
    server, _ = watching
    server.last_activity = time.monotonic() - 1000
    record = submit(enforcing, "nginx.service")
    assert state_within(enforcing, record, 3.0) is PlanState.APPROVED
    assert time.monotonic() - server.last_activity < 10


def test_an_approver_started_before_any_plan_was_stored_watches_from_the_first(
    enforcing: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new host: the executor has not made its plans directory yet when a click starts
    the approver. It watches the store's directory until the plans directory is made, then
    that one: the host's first plan is approved by its rule with no request."""
    b = enforcing
    b.store.plans.rmdir()
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(tmp_path))
    server = Server(listening(tmp_path / "w.sock"), b.service, idle_timeout=0, notify=False)
    watcher = watch_plans(server, b.store.plans)
    assert watcher is not None
    try:
        assert (tmp_path / FLAG_NAME).is_file()
        b.store.ensure()  # the executor starts
        time.sleep(1.5)  # past every look the start took
        record = submit(b, "nginx.service")
        assert state_within(b, record, 3.0) is PlanState.APPROVED
    finally:
        watcher.stop()
        server.listener.close()


def test_a_plans_directory_replaced_under_the_watch_hands_back_to_the_doorbell(
    watching: tuple[Server, RulesWatcher], enforcing: Bench, tmp_path: Path
) -> None:
    """Root restores the store: the plans directory is moved aside and made anew. The old
    watch sees none of the new directory's plans, so it ends, and its flag goes with it:
    opsbot-rules.service (and its catch-up timer) ask the rules again, instead of being
    skipped for as long as the approver lives while nothing watches."""
    _, watcher = watching
    flag = tmp_path / "run-opsbot-approver" / FLAG_NAME
    assert flag.is_file()
    plans = enforcing.store.plans
    plans.rename(plans.with_name("plans.old"))
    plans.mkdir()
    watcher.thread.join(timeout=5)
    assert not watcher.thread.is_alive()
    assert not flag.exists()


def test_a_symlinked_plans_directory_is_not_watched_and_the_doorbell_keeps_ringing(
    enforcing: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's uid owns the store: where plans/ is a symlink (to a directory of its
    choice, or to itself), root's approver does not follow it. It watches nothing and writes
    no flag, and the rules are asked as before, through opsbot-rules.service."""
    b = enforcing
    b.store.plans.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(tmp_path))
    for target in (elsewhere, b.store.plans):
        b.store.plans.symlink_to(target)
        server = Server(listening(tmp_path / "s.sock"), b.service, idle_timeout=0, notify=False)
        try:
            watcher = watch_plans(server, b.store.plans)
            if watcher is not None:
                watcher.stop()
            assert watcher is None
            assert not (tmp_path / FLAG_NAME).exists()
        finally:
            server.listener.close()
            (tmp_path / "s.sock").unlink(missing_ok=True)
            b.store.plans.unlink()
