"""What opsbot's own units wrote in the journal, read by root for two of its decisions:

- ``opsbot approve``: the sha256 opsbot-executor.service logged (``plan.accepted``) when it
  stored the plan (:func:`accepted`). The executor's uid can rewrite the stored plan and
  its sha256 together; it cannot rewrite what its unit told the journal then.
- ``opsbot archive-approvals``: whether an apply logged using a plan's approval
  (``approval.consumed``, :func:`consumed`), so that deleting the consumed marker does not
  keep a used approval where the apply reads it.

An entry counts by its trusted fields only: journald sets ``_UID`` and ``_SYSTEMD_UNIT``
from the sender's credentials and cgroup, no sender can choose them (as ``opsbot audit``
trusts, opsbot_cli/story.py, but narrower). ``plan.accepted`` counts only from
opsbot-executor.service, as the executor's user or root (the unit without polkit);
``approval.consumed`` from the executor's user or root, whatever the unit (a false one
could only take an approval out of use). Root reads the journal here; the executor's user
is given no journal access for it (that would widen what a subverted executor can read).
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plans.names import EXECUTOR_UNIT, EXECUTOR_USER
from shared_io.run import run

__all__ = ["Accepted", "accepted", "consumed", "executor_uids"]

_HEX = frozenset("0123456789abcdef")

Entry = Mapping[str, Any]


@dataclass(frozen=True)
class Accepted:
    """What the journal says opsbot-executor.service stored under one plan id: the sha256
    of each of its trusted ``plan.accepted`` entries for that id (from that unit, as the
    executor's user or root), and when the journal begins (None: it holds nothing)."""

    sha256s: frozenset[str]
    journal_begins: datetime | None = None


#: Entries matching every field given, and when the journal begins (None: it is empty).
Reader = Callable[[Mapping[str, str]], tuple[list[Entry], datetime | None]]


def system_journal(matches: Mapping[str, str]) -> tuple[list[Entry], datetime | None]:
    """The one door to the journal: the system journal's entries matching every field of
    ``matches``, and the time of its oldest entry."""
    from systemd import journal

    reader = journal.Reader(flags=journal.SYSTEM)
    try:
        reader.add_match(**matches)
        entries: list[Entry] = [dict(entry) for entry in reader]
        reader.flush_matches()
        reader.seek_head()
        first = reader.get_next()
        begins = first.get("__REALTIME_TIMESTAMP") if first else None
    finally:
        reader.close()
    return entries, begins if isinstance(begins, datetime) else None


def sync_journal() -> None:
    """Ask journald to write out what it was sent (what ``journalctl --sync`` promises):
    an entry the executor logged before it replied is then there to read."""
    run(["journalctl", "--sync"], timeout=10)


def executor_uids() -> set[int]:
    """The uids a trusted entry may come from: root's and the executor user's."""
    uids = {0}
    try:
        uids.add(pwd.getpwnam(EXECUTOR_USER).pw_uid)
    except KeyError:
        pass
    return uids


def _uid(entry: Entry) -> int | None:
    try:
        return int(str(entry.get("_UID")))
    except ValueError:
        return None


def trusted_acceptance(entry: Entry, plan_id: str, uids: set[int]) -> str | None:
    """The sha256 a ``plan.accepted`` entry of the executor's unit vouches for, or None."""
    if entry.get("_SYSTEMD_UNIT") != EXECUTOR_UNIT or _uid(entry) not in uids:
        return None
    if entry.get("EVENT") != "plan.accepted" or entry.get("PLAN_ID") != plan_id:
        return None
    sha = str(entry.get("PLAN_SHA256", ""))
    return sha if len(sha) == 64 and set(sha) <= _HEX else None


def accepted(
    plan_id: str,
    read: Reader | None = None,
    sync: Callable[[], None] | None = None,
    uids: set[int] | None = None,
) -> Accepted:
    """The sha256s opsbot-executor.service logged accepting under ``plan_id`` (read again
    after a sync when there are none: the plan may have been accepted a moment ago)."""
    read = read or system_journal
    sync = sync or sync_journal
    uids = executor_uids() if uids is None else uids
    matches = {"PLAN_ID": plan_id, "EVENT": "plan.accepted", "_SYSTEMD_UNIT": EXECUTOR_UNIT}
    shas: set[str] = set()
    begins: datetime | None = None
    for attempt in range(2):
        if attempt:
            sync()
        entries, begins = read(matches)
        shas = {s for e in entries if (s := trusted_acceptance(e, plan_id, uids))}
        if shas:
            break
    return Accepted(frozenset(shas), begins)


def consumed(plan_id: str, read: Reader | None = None, uids: set[int] | None = None) -> bool:
    """Whether an apply (as the executor's user or root) logged consuming the approval of
    ``plan_id``."""
    read = read or system_journal
    uids = executor_uids() if uids is None else uids
    entries, _ = read({"PLAN_ID": plan_id, "EVENT": "approval.consumed"})
    return any(
        _uid(e) in uids and e.get("EVENT") == "approval.consumed" and e.get("PLAN_ID") == plan_id
        for e in entries
    )
