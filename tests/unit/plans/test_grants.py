"""The polkit grant of `approve --now` ends with its approval (plans/grants.py), removed by
root: a reject removes it at once (before the lock a subverted executor could hold),
renewing without --now removes it, and the sweep removes every grant whose approval is
used, gone, rejected or expired. The grant's answers themselves are polkitd's, tested in
the booted container (tests/attacks/test_attack_polkit.py)."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from plans import (
    Accepted,
    PlanRecord,
    PlanRefused,
    PlanStore,
    reject,
    transition,
    write_approval,
)
from plans.approvals import write_rejection
from plans.grants import end_grant, ended_by_expiry, grant_holds, still_applying, sweep
from plans.polkit import grant_path, grants, plan_verbs, render_grant, write_rule
from plans.road import Person, Request, Road
from shared_io.errors import StoreError
from shared_schema import PlanState
from shared_schema.config import ApplyWindow
from tests.unit.plans.helpers import NOW, POLICY, plan_of, submitted

ROOT = Person("root", via="terminal")


def calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze for "*-*-* 02:00" in UTC: the next 02:00 after ``base``, daily."""
    first = base.replace(hour=2, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


NIGHTLY = [ApplyWindow(start="*-*-* 02:00", duration="2h")]


@pytest.fixture
def grants_dir(tmp_path: Path) -> Path:
    """/etc/polkit-1/rules.d in miniature."""
    directory = tmp_path / "rules.d"
    directory.mkdir(mode=0o700)
    return directory


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def approved_now(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord, ttl: int = 600
) -> Path:
    """What root's `opsbot approve --now` leaves outside the windows: an approval that
    overrides them, the plan APPROVED, and the plan's grant until the approval expires."""
    approval = write_approval(approvals_dir, record, "root", NOW, ttl, override_window=True)
    status = store.status(record.plan_id, record)
    store.save_status(transition(status, PlanState.APPROVED, by="root", at=NOW))
    path = grant_path(record.plan_id, grants_dir)
    verbs = plan_verbs([("restart_unit", "nginx.service")])
    write_rule(render_grant(record.plan_id, verbs, approval.expires_at), path)
    return path


def road(store: PlanStore, approvals_dir: Path, grants_dir: Path) -> Road:
    """Root's road on a host whose executor polkit holds, with a nightly window."""
    return Road(
        store=store,
        approvals_dir=approvals_dir,
        policy=POLICY.model_copy(update={"apply_window": NIGHTLY}),
        start_apply=lambda busy: ("it starts now", True),
        window_apply=lambda window, now: ("in its window", True),
        witness=lambda plan_id: Accepted(
            frozenset({store.load(plan_id).sha256}), NOW - timedelta(days=1)
        ),
        apply_busy=lambda: False,
        analyze=calendar,
        privilege=lambda: "polkit",
        grants_dir=grants_dir,
    )


def asked(record: PlanRecord, override_window: bool = False) -> Request:
    """Root's `opsbot approve` (renewing), with or without --now."""
    return Request(
        plan_id=record.plan_id,
        sha256=record.sha256,
        by=ROOT,
        ttl_seconds=600,
        now=NOW,
        renew=True,
        override_window=override_window,
    )


def test_a_reject_removes_the_grant_at_once(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """Root approved with --now outside the window, then rejects: the approval and the
    grant are both gone when reject returns (not at the next daily sweep), and the
    journal says so."""
    grant = approved_now(store, approvals_dir, grants_dir, record)
    with capture_logs() as logs:
        reject(
            store,
            approvals_dir,
            record.plan_id,
            by="root",
            now=NOW,
            reason="no",
            grants_dir=grants_dir,
        )
    assert not grant.exists()
    assert store.status(record.plan_id).state is PlanState.REJECTED
    removed = [e for e in logs if e["event"] == "grant.removed"]
    assert removed == [
        {
            "event": "grant.removed",
            "plan_id": record.plan_id,
            "by": "root",
            "reason": "the plan was rejected",
            "log_level": "info",
        }
    ]


def test_a_lock_the_executor_holds_does_not_keep_the_grant(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """The executor's uid holds the apply lock (it owns the store) so that root's reject
    waits: the grant is removed before reject even asks for the lock, as the approval is."""
    grant = approved_now(store, approvals_dir, grants_dir, record)
    failed: list[BaseException] = []

    def rejecting() -> None:
        try:
            reject(
                store,
                approvals_dir,
                record.plan_id,
                by="root",
                now=NOW,
                reason=None,
                grants_dir=grants_dir,
            )
        except BaseException as exc:  # noqa: BLE001 - said below
            failed.append(exc)

    with store.apply_lock():
        worker = threading.Thread(target=rejecting, daemon=True)
        worker.start()
        worker.join(timeout=2)
        assert worker.is_alive()  # waiting for the lock
        assert not grant.exists() and not (approvals_dir / f"{record.plan_id}.approval").exists()
    worker.join(timeout=10)
    assert not failed and store.status(record.plan_id).state is PlanState.REJECTED


def test_a_grant_root_cannot_remove_is_said_after_the_rejection(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """Something that is not a file sits at the grant's name: the plan is REJECTED all the
    same, and the error says what the grant still allows and the command that ends it."""
    approved_now(store, approvals_dir, grants_dir, record)
    path = grant_path(record.plan_id, grants_dir)
    path.unlink()
    path.mkdir()
    with pytest.raises(StoreError) as failed:
        reject(
            store,
            approvals_dir,
            record.plan_id,
            by="root",
            now=NOW,
            reason=None,
            grants_dir=grants_dir,
        )
    assert store.status(record.plan_id).state is PlanState.REJECTED
    assert failed.value.message.startswith(f"the polkit grant {path} could not be removed: ")
    assert "outside the apply windows until its approval expires" in failed.value.message
    assert failed.value.hint == f"remove it as root: rm {path}"


def test_renewing_without_now_ends_the_grant(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """Root approved with --now, then approves again without it: the plan waits for its
    window now, and the grant that let it run outside goes."""
    route = road(store, approvals_dir, grants_dir)
    route.approve(asked(record, override_window=True))
    assert grants(grants_dir) == [record.plan_id]
    route.approve(asked(record))
    assert grants(grants_dir) == []


def test_a_reject_that_lands_while_the_grant_is_written_removes_it(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """Root's reject (from the approver, say) ran between root's `approve --now` writing
    the approval and writing the grant, and found no grant to remove: the approve sees
    the rejection once the grant is written, removes it again and says so."""

    def rejected_meanwhile() -> str:
        write_rejection(approvals_dir, record, "alice", NOW, "not tonight")
        return "polkit"

    route = replace(road(store, approvals_dir, grants_dir), privilege=rejected_meanwhile)
    with pytest.raises(PlanRefused, match="rejected while it was approved"):
        route.approve(asked(record, override_window=True))
    assert grants(grants_dir) == []


def test_the_sweep_keeps_only_grants_whose_now_approval_still_holds(
    store: PlanStore, approvals_dir: Path, grants_dir: Path
) -> None:
    """Five plans approved with --now; then one approval is used and archived (gone from
    the directory), one expires, one is rejected, one is renewed without --now. The sweep
    (opsbot-polkit-rule.service) removes those four grants and keeps the fifth."""
    records = [submitted(store, plan_of(goal=f"plan {n}")) for n in range(5)]
    for record in records:
        approved_now(store, approvals_dir, grants_dir, record)
    holds, used, expired, rejected, renewed = records
    (approvals_dir / f"{used.plan_id}.approval").unlink()
    write_approval(
        approvals_dir, expired, "root", NOW - timedelta(hours=1), 60, override_window=True
    )
    write_rejection(approvals_dir, rejected, "root", NOW, "no")
    write_approval(approvals_dir, renewed, "root", NOW, 600)
    assert grant_holds(approvals_dir, holds.plan_id, NOW)
    removed = sweep(approvals_dir, NOW, grants_dir=grants_dir)
    assert sorted(removed) == sorted(r.plan_id for r in (used, expired, rejected, renewed))
    assert grants(grants_dir) == [holds.plan_id]
    # and at its expiry, the fifth goes too
    assert sweep(approvals_dir, NOW + timedelta(seconds=600), grants_dir=grants_dir) == [
        holds.plan_id
    ]


def test_an_expired_now_approval_leaves_once_the_apply_ended_its_plan(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """The archive moves an --now approval once it expired AND the apply marked its plan
    EXPIRED: before the apply, it stays (the apply says EXPIRED with the approval's own
    words only while it can read it); an approval of the windows never counts here."""
    approved_now(store, approvals_dir, grants_dir, record, ttl=600)
    later = NOW + timedelta(seconds=601)
    assert not ended_by_expiry(approvals_dir, store, record.plan_id, NOW)
    assert not ended_by_expiry(approvals_dir, store, record.plan_id, later)  # still APPROVED
    status = store.status(record.plan_id, record)
    store.save_status(transition(status, PlanState.EXPIRED, by="apply", at=later))
    assert ended_by_expiry(approvals_dir, store, record.plan_id, later)
    write_approval(approvals_dir, record, "root", NOW, 600)  # not --now
    assert not ended_by_expiry(approvals_dir, store, record.plan_id, later)


def test_ending_a_grant_that_is_not_there_is_nothing(grants_dir: Path) -> None:
    """No grant, or no rules directory at all (a host without polkit): nothing to end."""
    assert not end_grant("20261129-213500-0123abcd", grants_dir)
    assert not end_grant("20261129-213500-0123abcd", grants_dir / "absent")


def test_a_used_now_approval_stays_with_its_grant_until_the_plans_steps_have_run(
    store: PlanStore, approvals_dir: Path, grants_dir: Path, record: PlanRecord
) -> None:
    """The apply consumed the --now approval and runs the plan's steps: the archive
    leaves the approval where it is (still_applying), so the sweep keeps its grant and
    the plan's second step is not refused by polkit halfway; once APPLIED, the approval
    may go, and with it the grant."""
    approved_now(store, approvals_dir, grants_dir, record)
    status = store.status(record.plan_id, record)
    store.save_status(transition(status, PlanState.APPLYING, by="apply", at=NOW))
    assert still_applying(approvals_dir, store, record.plan_id)
    assert sweep(approvals_dir, NOW, grants_dir=grants_dir) == []
    status = store.status(record.plan_id, record)
    store.save_status(transition(status, PlanState.APPLIED, by="apply", at=NOW))
    assert not still_applying(approvals_dir, store, record.plan_id)
    (approvals_dir / f"{record.plan_id}.approval").unlink()  # the archive moved it
    assert sweep(approvals_dir, NOW, grants_dir=grants_dir) == [record.plan_id]
    assert grants(grants_dir) == []
    other = submitted(store, plan_of(goal="within the windows"))
    write_approval(approvals_dir, other, "root", NOW, 600)  # not --now: archived when used
    assert not still_applying(approvals_dir, store, other.plan_id)
