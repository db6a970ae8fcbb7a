"""The polkit grant of ``opsbot approve --now``: root writes it, and it ends with its
approval, removed by root.

Where polkit holds the executor, its rule (plans.polkit) lets the executor's user run the
allowed verbs on the allowed units only inside the apply windows. ``sudo opsbot approve ID
--now`` overrides them for one plan: root writes ``59-opsbot-now-ID.rules`` in polkit's
rules directory (plans.road), which lets that user run exactly that plan's verbs on
exactly its units, until the approval expires. The grant ends when its approval does:

- **rejected** (``sudo opsbot reject ID``, or a reject link relayed to root's
  opsbot-approver): plans.decisions.reject removes the grant at once, right after the
  approval file and before it reads anything the executor's uid owns; and again once the
  rejection is written, so that an ``approve --now`` finishing meanwhile cannot leave one
  behind (that approve also looks, after writing its grant, and removes it itself);
- **renewed without ``--now``** (``sudo opsbot approve ID`` again): the new approval waits
  for the windows, and the road removes the old grant;
- **used**: once the plan's steps have run (it left APPROVED and APPLYING: a plan of
  several steps keeps its grant to its last, :func:`still_applying`), opsbot-archive
  (started by the apply's ExecStopPost=) moves the approval to ``used/`` and starts
  opsbot-polkit-rule.service, whose :func:`sweep` removes the grant first thing;
- **expired**: polkit stops honouring it that very millisecond by itself (the grant's
  JavaScript compares polkit's clock with the approval's ``expires_at``). The file goes
  once the apply has marked the plan EXPIRED (opsbot-apply.timer, every minute): the
  next opsbot-archive run (every minute) moves the dead approval to ``used/`` and starts
  the sweep (:func:`ended_by_expiry`), so about two minutes after the expiry.
  opsbot-polkit-rule.timer sweeps daily whatever is left.

A grant holds (:func:`grant_holds`) only while root's approval file of that plan is in
the approvals directory, overrides the windows, has not expired, and no rejection stands;
the sweep removes every other. Only root writes or removes a grant: the directory is
polkitd's (0700), the grant root's (root:root 0644); the executor's uid can do neither.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from plans.approval_archive import approval_path
from plans.approvals import read_approval_file, rejection_reason
from plans.errors import ApprovalRefused, PlanError
from plans.polkit import RULE_PATH, grant_path, remove_grants
from plans.store import PlanStore
from shared_io.errors import StoreError
from shared_io.files import fsync_dir
from shared_schema import Approval, PlanState

__all__ = ["end_grant", "ended_by_expiry", "grant_holds", "still_applying", "sweep"]


def _approval(approvals_dir: Path, plan_id: str) -> Approval | None:
    """Root's approval of ``plan_id`` as its file says, or None (no file root wrote)."""
    try:
        data, _ = read_approval_file(approval_path(approvals_dir, plan_id))
        approval = Approval.model_validate_json(data)
    except (ApprovalRefused, ValidationError):
        return None
    return approval if approval.plan_id == plan_id else None


def grant_holds(approvals_dir: Path, plan_id: str, now: datetime) -> bool:
    """Whether the grant of ``plan_id`` still has an approval to stand on: root's
    ``--now`` approval, in the approvals directory, not expired, and not rejected."""
    if rejection_reason(approvals_dir, plan_id):
        return False
    approval = _approval(approvals_dir, plan_id)
    return approval is not None and approval.override_window and not approval.expired(now)


def still_applying(approvals_dir: Path, store: PlanStore, plan_id: str) -> bool:
    """An ``--now`` approval whose plan's steps are being run (APPROVED or APPLYING):
    opsbot-archive leaves it where it is although the apply consumed it, so that its grant
    holds to the plan's last step (the apply's ExecStopPost= starts the archive again once
    it ended). The executor's uid could keep a status saying so; the grant still ends at
    the approval's expiry, as it would have unused."""
    approval = _approval(approvals_dir, plan_id)
    if approval is None or not approval.override_window:
        return False
    try:
        state = store.status(plan_id, store.load(plan_id)).state
    except (PlanError, StoreError):
        return False
    return state in (PlanState.APPROVED, PlanState.APPLYING)


def end_grant(plan_id: str, grants_dir: Path = RULE_PATH.parent) -> bool:
    """Remove the grant of ``plan_id`` (as root); whether there was one. StoreError says
    why one could not be removed (it then lets the executor's user act until it expires)."""
    path = grant_path(plan_id, grants_dir)
    try:
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise StoreError(
            f"the polkit grant {path} could not be removed: {exc.strerror or exc}; it lets "
            "the executor's user run that plan's steps outside the apply windows until its "
            "approval expires",
            hint=f"remove it as root: rm {path}",
        ) from exc
    fsync_dir(grants_dir)
    return True


def sweep(approvals_dir: Path, now: datetime, grants_dir: Path = RULE_PATH.parent) -> list[str]:
    """Remove every grant whose approval no longer holds (:func:`grant_holds`); their ids."""
    return remove_grants(lambda plan_id: grant_holds(approvals_dir, plan_id, now), grants_dir)


def ended_by_expiry(approvals_dir: Path, store: PlanStore, plan_id: str, now: datetime) -> bool:
    """An ``--now`` approval that root's file says expired, of a plan the apply has ended
    (EXPIRED, or any final state): no apply can use it, and its grant is dead in polkit.
    opsbot-archive moves it out of the approvals directory, so that the sweep removes the
    grant's file. (Not before the plan ended: the apply says EXPIRED, with the approval's
    own words, only while it can read it.)"""
    approval = _approval(approvals_dir, plan_id)
    if approval is None or not approval.override_window or not approval.expired(now):
        return False
    try:
        status = store.status(plan_id, store.load(plan_id))
    except (PlanError, StoreError):
        return False
    return status.state.is_final
