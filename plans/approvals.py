"""Approval files: written by root (``opsbot approve``), trusted by the executor only when
every check below passes. Each failed check refuses with its own reason.

An approval is ``<approvals dir>/<plan id>.approval``, JSON (shared_schema.Approval). It
is honoured only if: the approvals directory is root's and not writable by others; the
file is a regular file (not a symlink), has one link, is owned by root and not writable
by group or others; its plan id and fingerprint equal the stored plan's; it is not dated
in the future (``approved_at`` at most ``CLOCK_SKEW`` ahead of now); it holds no longer
than ``approval_ttl_seconds`` (``expires_at - approved_at``; with apply windows, or until
the end of the window open at or next after ``approved_at``, at most 7 days, unless it
overrides the windows); it has not expired; and it
has not been used (see PlanStore.consume).

Root takes an approval out of the apply's reach twice: ``opsbot reject`` removes it
(:func:`remove_approval`), and once an apply has used it, ``opsbot archive-approvals``
(opsbot-archive.path, on the executor's consumed markers) moves it to ``used/``, root's
only (plans.approval_archive, read without a model). The executor's uid can rewrite a
plan's status or delete its consumed marker; it cannot bring back a file root moved.
"""

import contextlib
import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from plans.approval_archive import approval_path, check_approvals_dir
from plans.errors import ApprovalExpired, ApprovalRefused
from plans.records import PlanRecord
from plans.store import PlanStore
from shared_io.files import fsync_dir, write_atomic
from shared_schema import Approval, canonical_json, sha256_hex

__all__ = [
    "CLOCK_SKEW",
    "CheckedApproval",
    "check_approval",
    "read_approval_file",
    "rejection_path",
    "rejection_reason",
    "remove_approval",
    "write_approval",
    "write_rejection",
]

MAX_APPROVAL_BYTES = 4096
#: How far in the future an approval's ``approved_at`` may lie. Root writes it with this
#: host's clock and this host's apply reads it, so the only skew is the clock stepping
#: between the two (an NTP step at boot, a few seconds); a minute absorbs that, and buys
#: a clock set back (or a forged date) at most a minute: the lifetime is bounded apart.
CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True)
class CheckedApproval:
    approval: Approval
    file_sha256: str


def rejection_path(approvals_dir: Path, plan_id: str) -> Path:
    return approvals_dir / f"{plan_id}.rejection"


def read_approval_file(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of a root-owned, regular, singly-linked, not group/other-writable file."""
    try:
        before = os.lstat(path)
    except FileNotFoundError as exc:
        raise ApprovalRefused("no approval") from exc
    if stat.S_ISLNK(before.st_mode):
        raise ApprovalRefused(f"{path.name} is a symlink; approvals must be regular files")
    if not stat.S_ISREG(before.st_mode):
        raise ApprovalRefused(f"{path.name} is not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ApprovalRefused(
                f"{path.name} is a symlink; approvals must be regular files"
            ) from exc
        raise ApprovalRefused(f"cannot open {path.name}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise ApprovalRefused(f"{path.name} changed while it was being checked")
        if st.st_uid != 0:
            raise ApprovalRefused(f"{path.name} is owned by uid {st.st_uid}, not root")
        if st.st_mode & 0o022:
            raise ApprovalRefused(
                f"{path.name} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
            )
        if st.st_nlink != 1:
            raise ApprovalRefused(f"{path.name} has {st.st_nlink} hard links; expected 1")
        if st.st_size > MAX_APPROVAL_BYTES:
            raise ApprovalRefused(f"{path.name} is larger than {MAX_APPROVAL_BYTES} bytes")
        data = os.read(fd, MAX_APPROVAL_BYTES + 1)
    finally:
        os.close(fd)
    return data, st


def check_approval(
    approvals_dir: Path,
    record: PlanRecord,
    store: PlanStore,
    now: datetime,
    *,
    ttl_ceiling_seconds: int,
    lifetime_ceiling: Callable[[Approval], float] | None = None,
) -> CheckedApproval:
    """The approval for ``record`` if it passes every check; ApprovalRefused otherwise.

    ``ttl_ceiling_seconds`` is today's ``approval_ttl_seconds``: an approval that holds
    longer (a forged one, or one written before the ceiling was lowered) is refused.
    Where apply windows are configured, ``lifetime_ceiling`` says how long this approval
    may hold instead (plans.windows.lifetime_ceiling: until the end of the window
    open at or next after its ``approved_at``, at most 7 days).
    """
    check_approvals_dir(approvals_dir)
    data, _ = read_approval_file(approval_path(approvals_dir, record.plan_id))
    try:
        approval = Approval.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        where = f"{where}: " if where else ""
        raise ApprovalRefused(f"approval is not valid: {where}{first['msg']}") from exc
    if approval.plan_id != record.plan_id:
        raise ApprovalRefused(f"approval names plan {approval.plan_id}, not {record.plan_id}")
    if approval.sha256 != record.sha256:
        raise ApprovalRefused(
            f"approval is for fingerprint {approval.sha256[:12]}..., but plan "
            f"{record.plan_id} has {record.sha256[:12]}...; approve the plan again"
        )
    if approval.approved_at > now + CLOCK_SKEW:
        raise ApprovalRefused(
            f"approval is dated {approval.approved_at.isoformat()}, later than now "
            f"({now.isoformat()}): the clock went back, or `opsbot approve` did not write it; "
            "approve the plan again"
        )
    lifetime = (approval.expires_at - approval.approved_at).total_seconds()
    allowed = float(ttl_ceiling_seconds)
    if lifetime_ceiling is not None:
        allowed = lifetime_ceiling(approval)
    if lifetime > allowed:
        if allowed > ttl_ceiling_seconds:
            rule = (
                f"more than the {allowed:.0f} s its apply window allows (until that "
                "window's end, at most 7 days)"
            )
        else:
            rule = f"more than approval_ttl_seconds={ttl_ceiling_seconds}"
        raise ApprovalRefused(
            f"approval holds for {lifetime:.0f} s (until {approval.expires_at.isoformat()}), "
            f"{rule}; approve the plan again"
        )
    if approval.expired(now):
        raise ApprovalExpired(f"approval expired at {approval.expires_at.isoformat()}")
    if store.is_consumed(record.plan_id):
        raise ApprovalRefused("approval was already used by an earlier apply")
    return CheckedApproval(approval, sha256_hex(data))


def write_approval(
    approvals_dir: Path,
    record: PlanRecord,
    approver: str,
    now: datetime,
    ttl_seconds: int,
    *,
    expires_at: datetime | None = None,
    override_window: bool = False,
    rule: tuple[str, str] | None = None,
) -> Approval:
    """Write the approval of ``record`` (as root). Replaces an earlier, unused one.

    It expires after ``ttl_seconds``, or at ``expires_at`` where the caller computed it
    (plans.windows.approval_expiry); ``override_window`` lets it run outside the
    apply windows (``opsbot approve --now``). ``rule``: (name, sha256) of the standing
    rule that approves it, in place of ``approver``."""
    approval = Approval(
        plan_id=record.plan_id,
        sha256=record.sha256,
        approver=approver,
        approved_at=now,
        expires_at=expires_at or now + timedelta(seconds=ttl_seconds),
        override_window=override_window,
        approved_by_rule=rule[0] if rule else "",
        rule_sha256=rule[1] if rule else "",
    )
    path = approval_path(approvals_dir, record.plan_id)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)
    write_atomic(path, canonical_json(approval.model_dump(mode="json")) + b"\n", mode=0o644)
    return approval


def remove_approval(approvals_dir: Path, plan_id: str) -> bool:
    """Remove the approval of ``plan_id`` (as root, for ``opsbot reject``); whether there
    was one. Whatever sits at its name goes, but for a directory (never an approval)."""
    try:
        os.unlink(approval_path(approvals_dir, plan_id))
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        return False
    with contextlib.suppress(OSError):
        fsync_dir(approvals_dir)
    return True


def write_rejection(
    approvals_dir: Path, record: PlanRecord, by: str, now: datetime, reason: str
) -> None:
    data = canonical_json(
        {
            "plan_id": record.plan_id,
            "sha256": record.sha256,
            "rejected_by": by,
            "at": now.isoformat(),
            "reason": reason,
        }
    )
    write_atomic(rejection_path(approvals_dir, record.plan_id), data + b"\n", mode=0o644)


def rejection_reason(approvals_dir: Path, plan_id: str) -> str | None:
    """The reason of a root-written rejection of ``plan_id``, or None if there is none."""
    path = rejection_path(approvals_dir, plan_id)
    try:
        data, _ = read_approval_file(path)
    except ApprovalRefused:
        return None  # absent, or not a file root wrote: not a rejection
    try:
        value = json.loads(data)
    except ValueError:
        return "rejected (unreadable rejection file)"
    reason = value.get("reason") if isinstance(value, dict) else None
    by = value.get("rejected_by") if isinstance(value, dict) else None
    return f"rejected by {by}" + (f": {reason}" if reason else "")
