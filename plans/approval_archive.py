"""Root's archive of used approvals, read without building a model: what ``opsbot
archive-approvals`` (opsbot-archive.service, waited for in opsbot-apply.service's
ExecStopPost=) needs to move an approval an apply has used out of the apply's reach.

An approval is ``<approvals dir>/<plan id>.approval``; once used it goes to ``used/``
(root's, 0700), where no apply reads (:func:`archive_used`). It counts as used when the
executor's consumed marker exists (:func:`is_consumed`, anything at
``<state dir>/consumed/<plan id>.json``, as PlanStore.consume writes it), or when the
apply's journal entry says so (plans.witness). Only an ``opsbot approve --now`` approval
needs more (plans.grants: it stays while its plan's steps run, and goes once it expired
and its plan ended), so :func:`maybe_now` says from the file's own JSON, without a model,
which approvals cannot be one: those whose ``override_window`` is absent or false
(shared_schema.Approval's default; tests/unit/plans/test_approval_archive.py holds this
reading to the model's). Every other file, unreadable or odd, takes the model's road.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from plans.errors import ApprovalRefused
from shared_io.errors import StoreError
from shared_io.files import fsync_dir, read_bounded
from shared_schema.names import is_valid_plan_id

__all__ = [
    "approval_path",
    "archive_used",
    "check_approvals_dir",
    "consumed_marker",
    "is_consumed",
    "maybe_now",
    "used_dir",
]

APPROVAL_SUFFIX = ".approval"
USED_DIR = "used"
#: The field of shared_schema.Approval that makes an approval ``--now`` (default false).
OVERRIDE_FIELD = "override_window"


def approval_path(approvals_dir: Path, plan_id: str) -> Path:
    return approvals_dir / f"{plan_id}{APPROVAL_SUFFIX}"


def used_dir(approvals_dir: Path) -> Path:
    """Where used approvals go: root's only (0700), out of the apply's reach."""
    return approvals_dir / USED_DIR


def consumed_marker(state_dir: Path, plan_id: str) -> Path:
    """The executor's marker that an apply used the approval of ``plan_id``."""
    return state_dir / "consumed" / f"{plan_id}.json"


def is_consumed(state_dir: Path, plan_id: str) -> bool:
    """Whether an apply used the approval of ``plan_id``: anything at its marker's name
    counts (a symlink too, even a dangling one)."""
    return os.path.lexists(consumed_marker(state_dir, plan_id))


def maybe_now(approvals_dir: Path, plan_id: str) -> bool:
    """Whether the approval file of ``plan_id`` may be an ``--now`` one; False only where
    its JSON says ``override_window`` is absent or false, or there is no file."""
    try:
        said = json.loads(read_bounded(approval_path(approvals_dir, plan_id)))
    except FileNotFoundError:
        return False
    except (OSError, StoreError, ValueError):
        return True  # the model's road decides (it refuses what it cannot read)
    return not isinstance(said, dict) or said.get(OVERRIDE_FIELD, False) is not False


def check_approvals_dir(approvals_dir: Path) -> None:
    """ApprovalRefused unless ``approvals_dir`` is a directory root owns that neither its
    group nor others may write."""
    try:
        st = os.lstat(approvals_dir)
    except FileNotFoundError as exc:
        raise ApprovalRefused(f"approvals directory {approvals_dir} does not exist") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise ApprovalRefused(f"approvals directory {approvals_dir} is not a directory")
    if st.st_uid != 0 or st.st_mode & 0o022:
        raise ApprovalRefused(
            f"approvals directory {approvals_dir} must be owned by root and not writable by "
            "group or others"
        )


def _used_dir_ready(approvals_dir: Path) -> Path:
    used = used_dir(approvals_dir)
    with contextlib.suppress(FileExistsError):
        os.mkdir(used, 0o700)
    st = os.lstat(used)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise StoreError(f"{used} must be a directory owned by root", hint="rm -rf it as root")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(used, 0o700)
    return used


def archive_used(approvals_dir: Path, is_used: Callable[[str], bool]) -> list[str]:
    """Move every approval whose plan ``is_used`` says an apply used to ``used/`` (as
    root); the plan ids moved, in order.

    ``is_used`` is the executor's consumed marker, or the apply's own journal entry saying
    it consumed the approval (so deleting the marker first does not keep one in place).
    Only ``<plan id>.approval`` names are looked at; nothing is overwritten in ``used/``.
    """
    check_approvals_dir(approvals_dir)
    names = sorted(
        n
        for n in os.listdir(approvals_dir)
        if n.endswith(APPROVAL_SUFFIX) and is_valid_plan_id(n[: -len(APPROVAL_SUFFIX)])
    )
    candidates = [n[: -len(APPROVAL_SUFFIX)] for n in names]
    used_ids = [plan_id for plan_id in candidates if is_used(plan_id)]
    if not used_ids:
        return []
    used = _used_dir_ready(approvals_dir)
    moved: list[str] = []
    for plan_id in used_ids:
        source = approval_path(approvals_dir, plan_id)
        target = used / source.name
        copy = 0
        while os.path.lexists(target):
            copy += 1
            target = used / f"{plan_id}.{copy}{APPROVAL_SUFFIX}"
        try:
            os.rename(source, target)
        except FileNotFoundError:
            continue  # gone meanwhile (a reject): nothing left to move
        moved.append(plan_id)
    fsync_dir(used)
    fsync_dir(approvals_dir)
    return moved
