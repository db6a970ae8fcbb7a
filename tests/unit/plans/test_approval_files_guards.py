"""Root's approval files, pinned where mutation testing found them loose: the archive of
used approvals (a directory only root can enter, never an overwrite, every used approval
moved, only approvals), a forged approval's reason, whether reject removed anything, and
the rejection root leaves (when, and readable by the executor)."""

import errno
import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from plans import (
    ApprovalRefused,
    PlanRecord,
    PlanStore,
    approval_path,
    approvals,
    archive_used,
    check_approval,
    rejection_path,
    rejection_reason,
    remove_approval,
    used_dir,
    write_approval,
    write_rejection,
)
from plans.approvals import MAX_APPROVAL_BYTES
from shared_io.errors import StoreError
from shared_schema import Approval, canonical_json

from .helpers import NOW, POLICY, plan_of, step, submitted

NOBODY = 65534


def always_used(plan_id: str) -> bool:
    """Every approval was used by an apply (the archiver's question, answered yes)."""
    return True


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


# -- used/: root's only ----------------------------------------------------------------------


def test_a_used_directory_someone_else_owns_is_refused_and_nothing_moves(
    approvals_dir: Path, record: PlanRecord
) -> None:
    """Someone made used/ and owns it (root's 0700 keeps nobody out of their own
    directory): the archiver refuses it, telling root to remove it, and the approval stays
    where it is rather than move where its owner could read or change it."""
    write_approval(approvals_dir, record, "alice", NOW, 600)
    planted = used_dir(approvals_dir)
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(StoreError) as refused:
        archive_used(approvals_dir, always_used)
    assert refused.value.message == f"{planted} must be a directory owned by root"
    assert refused.value.hint == "rm -rf it as root"
    assert approval_path(approvals_dir, record.plan_id).exists()
    assert os.listdir(planted) == []


@pytest.mark.parametrize("mode", [0o755, 0o701])
def test_a_used_directory_others_may_enter_is_closed_to_root_only(
    approvals_dir: Path, record: PlanRecord, mode: int
) -> None:
    """used/ is root's but others may list or enter it (left so by hand): the archiver
    makes it 0700 again before the approval is in it."""
    write_approval(approvals_dir, record, "alice", NOW, 600)
    used_dir(approvals_dir).mkdir()
    os.chmod(used_dir(approvals_dir), mode)
    assert archive_used(approvals_dir, always_used) == [record.plan_id]
    assert used_dir(approvals_dir).stat().st_mode & 0o7777 == 0o700


# -- moving them ---------------------------------------------------------------------------


def test_each_archived_approval_of_a_plan_gets_the_next_free_name(
    approvals_dir: Path, record: PlanRecord
) -> None:
    """Three approvals of one plan archived in turn: the first keeps the plain name, the
    next ones .1 and .2; none overwrites another."""
    for ttl in (600, 300, 120):
        write_approval(approvals_dir, record, "alice", NOW, ttl)
        assert archive_used(approvals_dir, always_used) == [record.plan_id]
    assert sorted(os.listdir(used_dir(approvals_dir))) == [
        f"{record.plan_id}.1.approval",
        f"{record.plan_id}.2.approval",
        f"{record.plan_id}.approval",
    ]
    expiries = {
        name: json.loads((used_dir(approvals_dir) / name).read_bytes())["expires_at"]
        for name in os.listdir(used_dir(approvals_dir))
    }
    assert expiries[f"{record.plan_id}.2.approval"] == "2026-11-29T21:37:00Z"


def test_an_approval_rejected_while_the_archiver_runs_does_not_hold_back_the_others(
    approvals_dir: Path, store: PlanStore
) -> None:
    """Two used approvals; root rejects the first plan (its approval goes) after the
    archiver listed it: the archiver moves the second all the same."""
    first = submitted(store, plan_of(step("restart_unit", "nginx.service")))
    second = submitted(store, plan_of(step("restart_unit", "app.service")))
    for r in (first, second):
        write_approval(approvals_dir, r, "alice", NOW, 600)
    earlier, later = sorted((first.plan_id, second.plan_id))

    def used_and_rejected_meanwhile(plan_id: str) -> bool:
        if plan_id == later:  # asked last: the listing is done
            remove_approval(approvals_dir, earlier)
        return True

    assert archive_used(approvals_dir, used_and_rejected_meanwhile) == [later]
    assert os.listdir(used_dir(approvals_dir)) == [f"{later}.approval"]
    assert not approval_path(approvals_dir, later).exists()


def test_only_approvals_of_plan_ids_are_archived(approvals_dir: Path, record: PlanRecord) -> None:
    """A file that ends in .approval but names no plan (root's notes, an editor's copy) is
    not an approval: it stays, and only the plan's approval moves."""
    write_approval(approvals_dir, record, "alice", NOW, 600)
    notes = approvals_dir / "notes.approval"
    notes.write_text("approve only after the change window\n")
    assert archive_used(approvals_dir, always_used) == [record.plan_id]
    assert notes.exists()
    assert os.listdir(used_dir(approvals_dir)) == [f"{record.plan_id}.approval"]


# -- a forged approval's reason ---------------------------------------------------------------


def test_a_forged_rules_approval_is_refused_naming_the_bad_field_and_its_form(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """An approval naming a rule whose sha256 is not hex: refused, naming the field and
    the form it failed (dotted, as an operator reads a path)."""
    forged = {
        "v": 1,
        "plan_id": record.plan_id,
        "sha256": record.sha256,
        "approved_by_rule": "night-restarts",
        "rule_sha256": "not-a-sha256",
        "approved_at": "2026-11-29T21:35:00Z",
        "expires_at": "2026-11-29T21:45:00Z",
    }
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(canonical_json(forged))
    path.chmod(0o644)
    with pytest.raises(ApprovalRefused) as refused:
        check_approval(
            approvals_dir, record, store, NOW, ttl_ceiling_seconds=POLICY.approval_ttl_seconds
        )
    assert refused.value.message == (
        "approval is not valid: rule_sha256.constrained-str: "
        "String should match pattern '^[0-9a-f]{64}$'"
    )


# -- reject: was there an approval? ----------------------------------------------------------


@pytest.mark.parametrize("what", ["nothing", "a directory"])
def test_removing_an_approval_says_none_was_there_when_none_was(
    approvals_dir: Path, record: PlanRecord, what: str
) -> None:
    """Nothing at the approval's name, or a directory (never an approval, and left in
    place): remove_approval says there was no approval, so `opsbot reject` does not claim
    to have removed one."""
    path = approval_path(approvals_dir, record.plan_id)
    if what == "a directory":
        path.mkdir()
    assert remove_approval(approvals_dir, record.plan_id) is False
    assert path.exists() == (what == "a directory")


# -- the rejection root leaves --------------------------------------------------------------


def test_a_rejection_records_who_when_and_why(approvals_dir: Path, record: PlanRecord) -> None:
    """The rejection file names the plan, its sha256, who rejected it, when, and why."""
    write_rejection(approvals_dir, record, "alice", NOW, "wrong unit")
    assert json.loads(rejection_path(approvals_dir, record.plan_id).read_bytes()) == {
        "plan_id": record.plan_id,
        "sha256": record.sha256,
        "rejected_by": "alice",
        "at": NOW.isoformat(),
        "reason": "wrong unit",
    }


def test_a_rejection_is_roots_and_readable_by_everyone_but_writable_by_root_only(
    approvals_dir: Path, record: PlanRecord
) -> None:
    """The executor's user reads the rejection (the gate honours it) but cannot change
    it: root's, mode 0644, nothing more."""
    write_rejection(approvals_dir, record, "alice", NOW, "wrong unit")
    st = rejection_path(approvals_dir, record.plan_id).stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o644)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "rejected (unreadable rejection file)"),
        ("[1, 2]", "rejected by None"),
        ('{"rejected_by": "alice"}', "rejected by alice"),
        ('{"rejected_by": "alice", "reason": "not tonight"}', "rejected by alice: not tonight"),
    ],
    ids=["not-json", "not-an-object", "no-reason", "with-reason"],
)
def test_a_rejection_root_wrote_by_hand_still_rejects_and_says_what_it_can(
    approvals_dir: Path, record: PlanRecord, content: str, said: str
) -> None:
    """A rejection file is root's, however it was written: one that is not JSON, not an
    object, or has no reason still rejects the plan, saying what it can (never a
    reason it does not give)."""
    path = rejection_path(approvals_dir, record.plan_id)
    path.write_text(content)
    os.chmod(path, 0o644)
    assert rejection_reason(approvals_dir, record.plan_id) == said


def _approval_bytes(record: PlanRecord, size: int) -> bytes:
    """The approval of ``record`` as root writes it, padded with spaces to ``size`` bytes."""
    approval = Approval(
        plan_id=record.plan_id,
        sha256=record.sha256,
        approver="root",
        approved_at=NOW,
        expires_at=NOW + timedelta(seconds=600),
    )
    data = canonical_json(approval.model_dump(mode="json"))
    return data + b" " * (size - len(data))


def test_an_approval_of_exactly_the_size_limit_is_read_whole(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """An approval of exactly MAX_APPROVAL_BYTES (padded with spaces, as an editor might
    leave it) is read whole and honoured; one byte more is refused for its size."""
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(_approval_bytes(record, MAX_APPROVAL_BYTES))
    os.chmod(path, 0o644)
    checked = check_approval(
        approvals_dir, record, store, NOW, ttl_ceiling_seconds=POLICY.approval_ttl_seconds
    )
    assert checked.approval.plan_id == record.plan_id
    path.write_bytes(_approval_bytes(record, MAX_APPROVAL_BYTES + 1))
    with pytest.raises(ApprovalRefused, match=f"larger than {MAX_APPROVAL_BYTES} bytes"):
        check_approval(
            approvals_dir, record, store, NOW, ttl_ceiling_seconds=POLICY.approval_ttl_seconds
        )


def test_an_approval_of_exactly_the_size_limit_is_read_to_its_last_byte(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """Padded in front, an approval of exactly MAX_APPROVAL_BYTES ends in its closing
    brace: read to that byte, and its recorded sha256 is that of the whole file."""
    path = approval_path(approvals_dir, record.plan_id)
    data = _approval_bytes(record, 0).strip()
    path.write_bytes(b" " * (MAX_APPROVAL_BYTES - len(data)) + data)
    os.chmod(path, 0o644)
    checked = check_approval(
        approvals_dir, record, store, NOW, ttl_ceiling_seconds=POLICY.approval_ttl_seconds
    )
    assert checked.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_approval_that_cannot_be_opened_says_why_not_that_it_is_a_symlink(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular approval whose open fails with EACCES (a non-root reader, a race with
    `opsbot reject`): refused as "cannot open ...: Permission denied", never called a
    symlink."""
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(_approval_bytes(record, 400))
    real_open = os.open

    def denied(file: object, flags: int, *args: object) -> int:
        if str(file).endswith(".approval"):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(ApprovalRefused, match="cannot open .*: Permission denied"):
        check_approval(
            approvals_dir, record, store, NOW, ttl_ceiling_seconds=POLICY.approval_ttl_seconds
        )


def test_only_the_write_bits_of_others_make_an_approval_untrusted(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """Root's approval with an execute bit set for others (0645) is still root's alone to
    write: honoured; group-writable (0664) is refused."""
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(_approval_bytes(record, 400))
    os.chmod(path, 0o645)
    check_approval(approvals_dir, record, store, NOW, ttl_ceiling_seconds=3600)
    os.chmod(path, 0o664)
    with pytest.raises(ApprovalRefused, match="writable by group or others"):
        check_approval(approvals_dir, record, store, NOW, ttl_ceiling_seconds=3600)


def test_a_removed_approval_whose_directory_cannot_be_synced_is_still_removed(
    approvals_dir: Path, record: PlanRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`opsbot reject` removes the approval, then the directory's fsync fails (EIO on a
    dying disk): the approval is gone all the same and the removal says so; the reject
    goes on to write its rejection."""
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(_approval_bytes(record, 400))

    def eio(directory: Path) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(approvals, "fsync_dir", eio)
    assert remove_approval(approvals_dir, record.plan_id) is True
    assert not path.exists()
