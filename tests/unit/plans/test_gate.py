"""Root's decisions against a subverted executor's uid, which owns the store: ``approve``
binds only the sha256 the operator reviewed and the executor logged; ``reject`` takes
the approval away for good; used approvals are archived where no apply reads them, so
rewriting the status file or deleting a consumed marker replays nothing."""

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from executor_svc.apply import Applier
from plans import (
    Accepted,
    ApprovalRefused,
    PlanRecord,
    PlanRefused,
    PlanStore,
    StatusRecord,
    UsageError,
    approval_path,
    approve,
    archive_used,
    reject,
    rejection_path,
    review,
    used_dir,
    write_approval,
)
from shared_io.errors import StoreError
from shared_schema import PlanState

from .helpers import (
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    dry_run_of,
    edit_record,
    plan_of,
    step,
    submitted,
    unit_in,
)

S = PlanState


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def logged(record: PlanRecord) -> Accepted:
    """What the journal holds when the executor stored ``record`` (and nothing rotated)."""
    return Accepted(frozenset({record.sha256}), NOW - timedelta(days=1))


def approve_as_root(
    store: PlanStore, approvals_dir: Path, plan_id: str, prefix: str, accepted: Accepted
) -> None:
    approve(
        store,
        approvals_dir,
        plan_id,
        sha256_prefix=prefix,
        accepted=accepted,
        approver="alice",
        now=NOW,
        ttl_seconds=600,
    )


def rewrite_plan(store: PlanStore, plan_id: str) -> PlanRecord:
    """What the executor's uid can do between `opsbot show` and `opsbot approve`: put
    another plan in the record, with its sha256 recomputed, so the store's own check
    passes."""
    other = plan_of(step("restart_unit", "app.service"), goal="bring nginx back")
    edit_record(store, plan_id, plan=other.canonical().decode(), sha256=other.fingerprint())
    return store.load(plan_id)


def applier(store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl) -> Applier:
    return Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )


# -- approve: what was reviewed, what the executor logged ---------------------------------


def test_approve_binds_the_reviewed_sha256_the_executor_logged(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The 12-digit prefix the operator copied from `opsbot show`, the executor's own
    journal entry naming the same sha256: the approval is written, the plan APPROVED."""
    approve_as_root(store, approvals_dir, record.plan_id, record.sha256[:12], logged(record))
    assert approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is S.APPROVED


def test_a_plan_rewritten_after_review_is_not_approved_with_the_reviewed_prefix(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The executor's uid rewrote the stored plan (sha256 recomputed) after the operator
    reviewed it: the prefix they reviewed does not match; nothing is approved."""
    reviewed = record.sha256[:12]
    rewritten = rewrite_plan(store, record.plan_id)
    with pytest.raises(ApprovalRefused) as caught:
        approve_as_root(store, approvals_dir, record.plan_id, reviewed, logged(record))
    assert caught.value.message == (
        f"plan {record.plan_id} has sha256 {rewritten.sha256[:16]}..., not the {reviewed} you "
        "reviewed: it changed since; nothing was approved"
    )
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is S.PROPOSED


def test_a_rewritten_plan_is_refused_even_with_its_new_sha256_because_the_journal_names_the_old(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """Even if the operator is handed the new sha256 (shown by a lying executor, or after
    a second `opsbot show`), the executor's plan.accepted entry names the sha256 it
    stored: approve refuses, saying the stored plan was rewritten."""
    rewritten = rewrite_plan(store, record.plan_id)
    with pytest.raises(ApprovalRefused) as caught:
        approve_as_root(store, approvals_dir, record.plan_id, rewritten.sha256, logged(record))
    assert caught.value.message == (
        f"plan {record.plan_id} on disk has sha256 {rewritten.sha256[:16]}..., but "
        f"opsbot-executor.service logged accepting {record.sha256[:16]}...: the stored plan "
        "was rewritten after it was accepted; nothing was approved"
    )
    assert "diagnose again" in str(caught.value.hint)
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_two_sha256s_logged_for_one_id_refuse(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """Two trusted entries for one id naming different sha256s: the executor's own unit
    contradicts itself; nothing is approved."""
    both = Accepted(frozenset({record.sha256, "0" * 64}), NOW - timedelta(days=1))
    with pytest.raises(ApprovalRefused, match="the stored plan was rewritten"):
        approve_as_root(store, approvals_dir, record.plan_id, record.sha256, both)


def test_no_trusted_journal_entry_refuses_saying_whether_the_journal_was_rotated(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """No plan.accepted entry: when the journal begins after the plan was submitted it
    was rotated or vacuumed (say so); when it begins before, the executor never logged
    storing this plan. Both refuse with a hint to diagnose again; there is no flag to go
    without the entry."""
    rotated = Accepted(frozenset(), record.submitted_at + timedelta(hours=2))
    with pytest.raises(ApprovalRefused) as caught:
        approve_as_root(store, approvals_dir, record.plan_id, record.sha256, rotated)
    assert caught.value.message == (
        f"no plan.accepted entry of opsbot-executor.service for plan {record.plan_id} in the "
        f"journal: it begins at {rotated.journal_begins.isoformat()}, after the plan was "  # type: ignore[union-attr]
        f"submitted ({record.submitted_at.isoformat()}); it was rotated or vacuumed"
    )
    assert caught.value.hint is not None and caught.value.hint.startswith("diagnose again")
    never = Accepted(frozenset(), record.submitted_at - timedelta(days=3))
    with pytest.raises(ApprovalRefused, match="the executor never logged storing it"):
        approve_as_root(store, approvals_dir, record.plan_id, record.sha256, never)
    assert not approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize("prefix", ["", "abc", "0123456789a", "g" * 12, "ABCDEF012345"])
def test_a_sha256_prefix_is_at_least_12_lower_case_hex_digits(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, prefix: str
) -> None:
    """Fewer than 12 hex digits is not a review of anything: a usage error (the console
    lower-cases what the operator typed before it gets here)."""
    with pytest.raises(UsageError, match="is not a sha256 prefix"):
        approve_as_root(store, approvals_dir, record.plan_id, prefix, logged(record))


def test_review_makes_every_check_but_the_operators_sha256(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """What a terminal shows before it asks has passed the journal check already: a
    rewritten plan is refused before the operator is asked anything."""
    assert review(store, approvals_dir, record.plan_id, logged(record)).record == record
    rewrite_plan(store, record.plan_id)
    with pytest.raises(ApprovalRefused, match="rewritten after it was accepted"):
        review(store, approvals_dir, record.plan_id, logged(record))


# -- reject: the approval goes, and stays gone ---------------------------------------------


def test_reject_removes_the_approval_and_leaves_roots_rejection(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """Approve, then reject: the approval file is gone, a root-owned rejection names the
    plan, and the plan is REJECTED with the reason."""
    approved(store, approvals_dir, record)
    reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason="wrong unit")
    assert not approval_path(approvals_dir, record.plan_id).exists()
    rejection = json.loads(rejection_path(approvals_dir, record.plan_id).read_bytes())
    assert (rejection["plan_id"], rejection["sha256"]) == (record.plan_id, record.sha256)
    assert rejection_path(approvals_dir, record.plan_id).stat().st_uid == 0
    status = store.status(record.plan_id)
    assert (status.state, status.reason) == (S.REJECTED, "wrong unit")


def test_after_reject_flipping_the_status_back_to_approved_runs_nothing(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
) -> None:
    """The executor's uid rewrites the status file of a rejected plan back to APPROVED:
    the apply refuses it (root rejected it; its approval is gone); nothing runs, and
    `opsbot approve` refuses it too."""
    approved(store, approvals_dir, record)
    reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason="wrong unit")
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPROVED))
    [outcome] = applier(store, approvals_dir, clock, systemctl).apply_all()
    assert systemctl.calls == []
    assert outcome.message == "not run: rejected by alice: wrong unit; it never runs"
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.PROPOSED))
    with pytest.raises(PlanRefused, match="was rejected by alice: wrong unit"):
        approve_as_root(store, approvals_dir, record.plan_id, record.sha256, logged(record))


def test_reject_removes_the_approval_even_when_the_executor_planted_a_lock_symlink(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, tmp_path: Path
) -> None:
    """The executor's uid makes apply.lock a symlink so that root's reject fails: it does
    fail (it will not follow the link), but the approval file is already gone."""
    approved(store, approvals_dir, record)
    (store.root / "apply.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="cannot open"):
        reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason=None)
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_reject_of_an_applied_plan_is_refused_but_removes_a_left_approval(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """A final plan cannot be rejected (refused, exit 5, its state named); an approval
    still lying there is removed all the same, and the hint says so."""
    write_approval(approvals_dir, record, "alice", NOW, 600)
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPLIED))
    with pytest.raises(PlanRefused) as caught:
        reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason=None)
    assert caught.value.message == f"plan {record.plan_id} is APPLIED; it cannot become REJECTED"
    assert caught.value.hint == "its approval file was removed"
    assert caught.value.exit_status == 5
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert not rejection_path(approvals_dir, record.plan_id).exists()


# -- archive: a used approval leaves the apply's directory --------------------------------


def test_archive_moves_only_used_approvals_to_roots_used_directory(
    store: PlanStore, approvals_dir: Path, store_records: list[PlanRecord]
) -> None:
    """Two approvals, one used by an apply: only that one moves, to used/ (root's, 0700);
    the other stays where the apply reads it. A second run moves nothing."""
    used, waiting = store_records
    for r in store_records:
        write_approval(approvals_dir, r, "alice", NOW, 600)
    assert store.consume(used.plan_id, "0" * 64, "opsbot-executor", NOW)
    assert archive_used(approvals_dir, store.is_consumed) == [used.plan_id]
    assert not approval_path(approvals_dir, used.plan_id).exists()
    assert (used_dir(approvals_dir) / f"{used.plan_id}.approval").exists()
    st = used_dir(approvals_dir).stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o700)
    assert approval_path(approvals_dir, waiting.plan_id).exists()
    assert archive_used(approvals_dir, store.is_consumed) == []


def test_archive_never_overwrites_an_archived_approval(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """An approval archived before keeps its place; a second one for the same plan gets
    a name of its own."""
    write_approval(approvals_dir, record, "alice", NOW, 600)
    archive_used(approvals_dir, lambda _: True)
    write_approval(approvals_dir, record, "alice", NOW, 300)
    archive_used(approvals_dir, lambda _: True)
    assert sorted(os.listdir(used_dir(approvals_dir))) == [
        f"{record.plan_id}.1.approval",
        f"{record.plan_id}.approval",
    ]


def test_once_archived_deleting_the_marker_and_rewriting_the_status_replays_nothing(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
) -> None:
    """The plan is applied once; root's archiver moves its approval. The executor's uid
    then deletes the consumed marker and rewrites the status to APPROVED: the next apply
    finds no approval, and the step does not run a second time."""
    approved(store, approvals_dir, record)
    run = applier(store, approvals_dir, clock, systemctl)
    run.apply_all()
    assert len(systemctl.calls) == 1
    assert archive_used(approvals_dir, store.is_consumed) == [record.plan_id]
    (store.consumed / f"{record.plan_id}.json").unlink()
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPROVED))
    [outcome] = run.apply_all()
    assert outcome.message == "not run: no approval"
    assert len(systemctl.calls) == 1


def test_a_dangling_symlink_marker_still_counts_as_used(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, tmp_path: Path
) -> None:
    """Whatever sits at the marker's name counts as used, a dangling symlink too (the
    executor's uid cannot make an approval look unused by swapping the marker)."""
    (store.consumed / f"{record.plan_id}.json").symlink_to(tmp_path / "nowhere")
    assert store.is_consumed(record.plan_id)


@pytest.fixture
def store_records(store: PlanStore) -> list[PlanRecord]:
    return [
        submitted(store, plan_of(step("restart_unit", "nginx.service"))),
        submitted(store, plan_of(step("restart_unit", "app.service"))),
    ]


def test_a_renewed_approval_clears_the_refusal_of_the_old_one(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The apply refused the first approval (recorded once, as `refusal`); root approves
    again: the refusal is gone, so the next one, even in the same words, is news (what
    `opsbot approve --wait` ends on)."""
    approve_as_root(store, approvals_dir, record.plan_id, record.sha256[:12], logged(record))
    status = store.status(record.plan_id)
    store.save_status(status.model_copy(update={"refusal": "approval is not valid: ..."}))
    approve_as_root(store, approvals_dir, record.plan_id, record.sha256[:12], logged(record))
    renewed = store.status(record.plan_id)
    assert (renewed.state, renewed.refusal) == (PlanState.APPROVED, "")


def test_a_dry_run_beside_a_running_apply_does_not_call_its_plan_interrupted(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
) -> None:
    """An apply holds the lock and its plan is APPLYING: the dry run says the plan is being
    applied (nothing for the next apply to do), not that an apply died in it."""
    approved(store, approvals_dir, record)
    status = store.status(record.plan_id)
    store.save_status(status.model_copy(update={"state": PlanState.APPLYING}))
    dry = applier(store, approvals_dir, clock, systemctl)
    with store.apply_lock():
        [busy] = dry_run_of(dry)
    assert (busy.would, busy.message) == (
        "running",
        "is being applied now, by an apply that holds the lock",
    )
    [dead] = dry_run_of(dry)  # no lock held: the apply died in it
    assert dead.would == "interrupt" and dead.message.startswith("would become INTERRUPTED")


def test_a_relayed_click_never_rewrites_an_approval_root_made(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """Root approves while a click is on its way: the click's approve (``renew=False``, as
    opsbot-approver calls it) is refused under the lock, and root's approval file, its
    approver and expiry, stays byte for byte."""
    approve_as_root(store, approvals_dir, record.plan_id, record.sha256[:12], logged(record))
    path = approvals_dir / f"{record.plan_id}.approval"
    before = path.read_bytes()
    with pytest.raises(PlanRefused, match="approved already by alice; nothing was changed"):
        approve(
            store,
            approvals_dir,
            record.plan_id,
            sha256_prefix=record.sha256,
            accepted=logged(record),
            approver="bob",
            now=NOW,
            ttl_seconds=60,
            renew=False,
        )
    assert path.read_bytes() == before


@pytest.mark.parametrize("planted", ["fifo", "hard link", "someone else's file"])
def test_a_lock_file_the_executor_user_planted_is_refused_not_chowned(
    store: PlanStore, tmp_path: Path, planted: str
) -> None:
    """The executor's user owns the state directory and can put anything at
    ``apply.lock`` before root's apply or approve takes it: a FIFO (an open that would
    never return), a hard link to a file of someone else's (which root would chown to
    the executor), a file of another uid. Each is refused at once with words naming it,
    and nothing is chowned."""
    lock = store.root / "apply.lock"
    victim = tmp_path / "victim"
    victim.write_text("not the executor's\n")
    os.chown(victim, 4321, 4321) if os.geteuid() == 0 else None
    if planted == "fifo":
        os.mkfifo(lock)
    elif planted == "hard link":
        os.link(victim, lock)
    else:
        lock.write_text("")
        if os.geteuid() != 0:
            pytest.skip("only root can make a file of another uid")
        os.chown(lock, 4321, 4321)
    with pytest.raises(StoreError, match="is not a plain file of the executor's"):
        with store.apply_lock(timeout=1):
            pass
    assert victim.stat().st_uid == (4321 if os.geteuid() == 0 else os.geteuid())
