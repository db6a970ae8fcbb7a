"""The approval gate, attacked: every way to fake, reuse, widen or outlive an approval
is refused by check_approval with its own reason an operator can act on."""

import os
import shutil
from pathlib import Path

import pytest

from plans import (
    ApprovalRefused,
    PlanRecord,
    PlanStore,
    TamperedPlan,
    approval_path,
    check_approval,
    write_approval,
)
from shared_schema import Approval, canonical_json, sha256_hex

from .helpers import NOW, POLICY, Clock, edit_record, plan_of, step, submitted

NOBODY = 65534
TTL = POLICY.approval_ttl_seconds


def refusal(approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock) -> str:
    with pytest.raises(ApprovalRefused) as caught:
        check_approval(approvals_dir, record, store, clock(), ttl_ceiling_seconds=TTL)
    return caught.value.message


def write_raw(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.write_bytes(data)
    os.chmod(path, mode)


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def test_a_valid_approval_passes(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """``opsbot approve``'s file (root's, 0644, bound to the plan's id and fingerprint,
    unexpired, unused) is honoured; the check returns the approval and the hash of the
    file it read."""
    written = write_approval(approvals_dir, record, "alice", NOW, 3600)
    clock.advance(60)
    checked = check_approval(approvals_dir, record, store, clock(), ttl_ceiling_seconds=TTL)
    assert checked.approval == written
    assert checked.approval.sha256 == record.sha256
    assert checked.file_sha256 == sha256_hex(
        approval_path(approvals_dir, record.plan_id).read_bytes()
    )
    assert (approval_path(approvals_dir, record.plan_id).stat().st_mode & 0o777) == 0o644


def test_no_approval_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """A plan nobody approved does not run."""
    assert refusal(approvals_dir, record, store, clock) == "no approval"


def test_an_approval_for_another_fingerprint_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval with this plan's id but another plan's fingerprint (the operator
    approved what they saw; the plan changed) is refused, telling them to approve again."""
    other = submitted(store, plan_of(step("stop_unit", "nginx.service")))
    approval = Approval(
        plan_id=record.plan_id,
        sha256=other.sha256,
        approver="alice",
        approved_at=NOW,
        expires_at=NOW.replace(hour=23),
    )
    write_raw(
        approval_path(approvals_dir, record.plan_id),
        canonical_json(approval.model_dump(mode="json")),
    )
    assert refusal(approvals_dir, record, store, clock) == (
        f"approval is for fingerprint {other.sha256[:12]}..., but plan {record.plan_id} has "
        f"{record.sha256[:12]}...; approve the plan again"
    )


def test_another_plans_approval_copied_over_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Copying plan B's approval file to plan A's name does not approve A."""
    other = submitted(store, plan_of(step("stop_unit", "nginx.service")))
    write_approval(approvals_dir, other, "alice", NOW, 3600)
    shutil.copyfile(
        approval_path(approvals_dir, other.plan_id), approval_path(approvals_dir, record.plan_id)
    )
    assert refusal(approvals_dir, record, store, clock) == (
        f"approval names plan {other.plan_id}, not {record.plan_id}"
    )


def test_a_plan_edited_after_approval_is_caught(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Someone edits the stored plan after the operator approved it: the plan's bytes no
    longer match the fingerprint the approval is bound to (verified_plan refuses it)."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    edit_record(store, record.plan_id, plan=record.plan.replace("nginx", "sshd"))
    with pytest.raises(TamperedPlan, match="modified after it was stored"):
        store.verified_plan(store.load(record.plan_id))


def test_a_plan_and_its_fingerprint_both_rewritten_no_longer_match_the_approval(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Rewriting the plan and its fingerprint consistently passes the store's check but
    not the approval's: the operator approved the old fingerprint."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    edited = plan_of(step("restart_unit", "app.service"))
    edit_record(
        store, record.plan_id, plan=edited.canonical().decode(), sha256=edited.fingerprint()
    )
    tampered = store.load(record.plan_id)
    assert store.verified_plan(tampered) == edited
    assert refusal(approvals_dir, tampered, store, clock).startswith(
        f"approval is for fingerprint {record.sha256[:12]}..."
    )


def test_a_symlink_to_a_valid_approval_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock, tmp_path: Path
) -> None:
    """An approval must be a regular file in the approvals directory: a symlink (even
    to a perfectly valid approval) is refused."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    real = tmp_path / "real.approval"
    os.rename(approval_path(approvals_dir, record.plan_id), real)
    approval_path(approvals_dir, record.plan_id).symlink_to(real)
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval is a symlink; approvals must be regular files"
    )


def test_a_hard_linked_approval_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock, tmp_path: Path
) -> None:
    """A second hard link means someone else holds a name for the approval's inode:
    refused."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    os.link(approval_path(approvals_dir, record.plan_id), tmp_path / "other-name")
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval has 2 hard links; expected 1"
    )


def test_an_approval_owned_by_another_user_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Only root writes approvals: a file owned by any other uid is refused, naming it."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    os.chown(approval_path(approvals_dir, record.plan_id), NOBODY, NOBODY)
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval is owned by uid {NOBODY}, not root"
    )


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_an_approval_writable_by_group_or_others_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock, mode: int
) -> None:
    """An approval others could have rewritten is not trusted; the mode is named."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    os.chmod(approval_path(approvals_dir, record.plan_id), mode)
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval is writable by group or others (mode {mode:04o})"
    )


def test_an_expired_approval_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval past its expiry is refused, saying when it expired."""
    approval = write_approval(approvals_dir, record, "alice", NOW, 600)
    clock.advance(600)
    assert refusal(approvals_dir, record, store, clock) == (
        f"approval expired at {approval.expires_at.isoformat()}"
    )


def test_an_already_consumed_approval_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval an earlier apply used cannot authorise another."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    assert store.consume(record.plan_id, "0" * 64, "root", NOW)
    assert refusal(approvals_dir, record, store, clock) == (
        "approval was already used by an earlier apply"
    )


@pytest.mark.parametrize("how", ["group-writable", "world-writable", "not root's"])
def test_an_approvals_directory_others_can_write_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock, how: str
) -> None:
    """If anyone but root can create files in the approvals directory, no file in it is
    trusted."""
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    if how == "group-writable":
        os.chmod(approvals_dir, 0o775)
    elif how == "world-writable":
        os.chmod(approvals_dir, 0o757)
    else:
        os.chown(approvals_dir, NOBODY, NOBODY)
    assert refusal(approvals_dir, record, store, clock) == (
        f"approvals directory {approvals_dir} must be owned by root and not writable by "
        "group or others"
    )


def test_a_missing_approvals_directory_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """No approvals directory, no approvals."""
    approvals_dir.rmdir()
    assert refusal(approvals_dir, record, store, clock) == (
        f"approvals directory {approvals_dir} does not exist"
    )


def test_a_malformed_approval_is_refused_saying_what_is_wrong(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval file that is not JSON is refused as not valid, with the parser's
    reason."""
    write_raw(approval_path(approvals_dir, record.plan_id), b"approved, love alice\n")
    message = refusal(approvals_dir, record, store, clock)
    assert message.startswith("approval is not valid: Invalid JSON")


def test_an_approval_missing_a_field_is_refused_naming_it(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval without its fingerprint is refused, naming the missing field."""
    data = canonical_json({"v": 1, "plan_id": record.plan_id, "approver": "alice"})
    write_raw(approval_path(approvals_dir, record.plan_id), data)
    assert refusal(approvals_dir, record, store, clock) == (
        "approval is not valid: sha256: Field required"
    )


def test_a_huge_approval_file_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """An approval file larger than 4 KiB is not read."""
    write_raw(approval_path(approvals_dir, record.plan_id), b" " * 5000)
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval is larger than 4096 bytes"
    )


def test_an_approval_that_is_a_directory_is_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Only a regular file can be an approval."""
    approval_path(approvals_dir, record.plan_id).mkdir()
    assert refusal(approvals_dir, record, store, clock) == (
        f"{record.plan_id}.approval is not a regular file"
    )


def test_write_approval_replaces_a_planted_symlink(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock, tmp_path: Path
) -> None:
    """If a symlink sits where the approval goes, ``opsbot approve`` replaces the link
    (it never writes through it), and the result is a valid approval."""
    target = tmp_path / "target"
    target.write_text("untouched")
    approval_path(approvals_dir, record.plan_id).symlink_to(target)
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    assert target.read_text() == "untouched"
    assert (
        check_approval(
            approvals_dir, record, store, clock(), ttl_ceiling_seconds=TTL
        ).approval.approver
        == "alice"
    )


def test_a_rules_approval_names_the_rule_and_never_a_person(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """A standing rule's approval carries the rule and its sha256 and no approver; a human's
    keeps exactly the keys it always had. One naming both a person and a rule, or a rule
    without its sha256, or neither, is not an approval: the apply refuses it."""
    rule_sha = "ab" * 32
    ruled = write_approval(approvals_dir, record, "", NOW, 600, rule=("night-restarts", rule_sha))
    assert (ruled.approver, ruled.by) == ("", "rule night-restarts")
    data = approval_path(approvals_dir, record.plan_id).read_bytes()
    assert b'"approver"' not in data and b'"rule_sha256":"' + rule_sha.encode() in data
    human = write_approval(approvals_dir, record, "alice", NOW, 600)
    assert sorted(human.model_dump(mode="json")) == [
        "approved_at",
        "approver",
        "expires_at",
        "plan_id",
        "sha256",
        "v",
    ]
    base = {
        "v": 1,
        "plan_id": record.plan_id,
        "sha256": record.sha256,
        "approved_at": "2026-11-29T21:35:00Z",
        "expires_at": "2026-11-29T21:45:00Z",
    }
    for forged, said in [
        ({"approver": "alice", "approved_by_rule": "alice", "rule_sha256": rule_sha}, "one"),
        ({"approved_by_rule": "night-restarts"}, "rule's sha256"),
        ({}, "names its approver or its rule"),
    ]:
        write_raw(approval_path(approvals_dir, record.plan_id), canonical_json({**base, **forged}))
        assert said in refusal(approvals_dir, record, store, clock), forged
