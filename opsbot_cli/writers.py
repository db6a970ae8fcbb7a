"""Who writes each event of a plan's story: the one table that ``opsbot audit``
(opsbot_cli/story.py), the agent's ``plan_story`` and ``opsbot audit --verify``
(opsbot_cli/audit_verify.py) believe an entry by.

journald records who sent an entry: ``_UID`` from the sender's socket credentials and
``_SYSTEMD_UNIT`` from its cgroup, which only root can move a process into. No sender
chooses them (on a collector they are what the sending host's journald recorded). Each of
opsbot's writers is believed for its own events only, as journald recorded it:

    event                                        writer: unit(s), as user
    plan.approved  plan.rejected  approval.*     root: any unit (the console runs in a
    (but approval.consumed, .refused)            login session), uid 0
    rejection.*  rules.*  decide.*  grant.*
    apply.requested
    plan.accepted  plan.revise                   opsbot-executor.service, as opsbot-executor
    plan.too_many_waiting  plan.store_failed     (the executor's daemon: it takes the plans
    plan.unreadable  plan.verified               and records opsbot-verify's verdicts,
    plan.unresolved  plan.verification_refused   VERIFIED or UNRESOLVED)
    step.*  apply.*  approval.consumed           opsbot-apply.service, as opsbot-executor
    approval.refused  every other plan.*         (the apply: each state it moves a plan to,
                                                 APPLYING .. INTERRUPTED, waiting, archived)
    diagnose.*  model.*  executor.retry          opsbot-diagnose.service, opsbot-verify.service,
    executor.gave_up  command.*                  opsbot-onfailure@*.service, as opsbot-diagnose

An event in no row (a daemon's news about itself, logged with a plan's or a run's id
bound) is believed from any of these writers as itself, and said as theirs. An entry
from one of them about an event that is another's (the diagnose user logging
``plan.approved`` from its own unit) is not the plan's history: the story shows it apart,
"not from its writer". An entry from no writer (another user, a unit not its user's) is
not written by opsbot, and is only counted.

On this host each writer's uid is its user's here; on a collector the sending host's uids
are unknown, so a unit (whose ``User=`` is its writer's, and that only root can put a
process in) stands for its user there, and root is uid 0 everywhere.
"""

from __future__ import annotations

import fnmatch
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plans import APPLY_UNIT, EXECUTOR_UNIT, EXECUTOR_USER

__all__ = [
    "APPLY",
    "CHAIN_WRITERS",
    "DIAGNOSIS",
    "DIAGNOSE_USER",
    "EVENT_WRITERS",
    "EXECUTOR",
    "ROOT",
    "WRITERS",
    "NotItsWriter",
    "Uids",
    "Writer",
    "judge",
    "local_uids",
    "sender",
    "writer_of",
]

#: The diagnosis's user (units/sysusers.d; shared_schema.config's ``diagnose_user``).
DIAGNOSE_USER = "opsbot-diagnose"
#: Each user's uid on this host; None on a collector (the sending host's are unknown).
Uids = Mapping[str, int] | None


@dataclass(frozen=True)
class Writer:
    """One of opsbot's writers: how the story names it, the user it runs as, and the
    units it logs from (name patterns; none for any unit)."""

    name: str
    user: str
    units: tuple[str, ...] = ()

    def sent(self, entry: Mapping[str, Any], uids: Uids) -> bool:
        """Whether journald says this writer sent ``entry``: from one of its units, as
        its user (on a collector: as a user other than root, root as uid 0)."""
        uid = _uid(entry)
        if uid is None:
            return False
        if self.user == "root":
            return uid == 0
        unit = entry.get("_SYSTEMD_UNIT")
        if not isinstance(unit, str) or not any(fnmatch.fnmatchcase(unit, u) for u in self.units):
            return False
        if uids is None:
            return uid != 0
        return uids.get(self.user) == uid

    def __str__(self) -> str:
        if not self.units:
            return self.name
        return f"{self.name} ({', '.join(self.units)} as {self.user})"


ROOT = Writer("root", "root")
EXECUTOR = Writer("the executor", EXECUTOR_USER, (EXECUTOR_UNIT,))
APPLY = Writer("the apply", EXECUTOR_USER, (APPLY_UNIT,))
DIAGNOSIS = Writer(
    "diagnosis",
    DIAGNOSE_USER,
    ("opsbot-diagnose.service", "opsbot-verify.service", "opsbot-onfailure@*.service"),
)
WRITERS = (ROOT, EXECUTOR, APPLY, DIAGNOSIS)

#: Each event (a name pattern) and its one writer, the first row that matches; the table
#: of this module's docstring.
EVENT_WRITERS: tuple[tuple[str, Writer], ...] = (
    # Root's decisions: the console, opsbot-approver, opsbot-rules.
    ("plan.approved", ROOT),
    ("plan.rejected", ROOT),
    ("approval.consumed", APPLY),
    ("approval.refused", APPLY),
    ("approval.*", ROOT),
    ("rejection.*", ROOT),
    ("rules.*", ROOT),
    ("decide.*", ROOT),
    ("grant.*", ROOT),
    # The executor's daemon: what it took, and the verdicts opsbot-verify reported.
    ("plan.accepted", EXECUTOR),
    ("plan.revise", EXECUTOR),
    ("plan.too_many_waiting", EXECUTOR),
    ("plan.store_failed", EXECUTOR),
    ("plan.unreadable", EXECUTOR),
    ("plan.verified", EXECUTOR),
    ("plan.unresolved", EXECUTOR),
    ("plan.verification_refused", EXECUTOR),
    # The apply: the steps, and every other state a plan moves to.
    ("step.*", APPLY),
    ("apply.requested", ROOT),  # `opsbot apply`: root's console starts the apply
    ("apply.*", APPLY),
    ("plan.*", APPLY),
    # Diagnosis: its steps and verdicts, its model, its client of the executor.
    ("diagnose.*", DIAGNOSIS),
    ("model.*", DIAGNOSIS),
    ("executor.retry", DIAGNOSIS),
    ("executor.gave_up", DIAGNOSIS),
    ("command.*", DIAGNOSIS),
)

#: Whose entries each chain of the audit trail (shared_io.audit_chain) is.
CHAIN_WRITERS: dict[str, tuple[Writer, ...]] = {"executor": (EXECUTOR, APPLY), "root": (ROOT,)}


@dataclass(frozen=True)
class NotItsWriter:
    """An entry one of opsbot's writers sent about an event that is another's."""

    writer: Writer

    def __str__(self) -> str:
        return f"only {self.writer} writes it"


def _uid(entry: Mapping[str, Any]) -> int | None:
    """``_UID`` as journald recorded it (a number from python-systemd, text from
    journalctl's JSON)."""
    uid = entry.get("_UID")
    if isinstance(uid, int):
        return uid
    if isinstance(uid, str) and uid.isdigit():
        return int(uid)
    return None


def local_uids() -> dict[str, int]:
    """Each writer's user and its uid on this host (those it has)."""
    uids = {"root": 0}
    for writer in WRITERS:
        try:
            uids[writer.user] = pwd.getpwnam(writer.user).pw_uid
        except KeyError:
            pass
    return uids


def writer_of(event: str) -> Writer | None:
    """The one writer of ``event``; None for an event in no row."""
    return next((w for pattern, w in EVENT_WRITERS if fnmatch.fnmatchcase(event, pattern)), None)


def sender(entry: Mapping[str, Any], uids: Uids) -> Writer | None:
    """The writer journald says sent ``entry``; None when it is none of opsbot's."""
    return next((w for w in WRITERS if w.sent(entry, uids)), None)


def judge(entry: Mapping[str, Any], uids: Uids) -> Writer | NotItsWriter | None:
    """Whether ``entry`` counts: its writer where it does (the event's, or for an event in
    no row whichever of opsbot's sent it); :class:`NotItsWriter` when one of opsbot's
    writers sent another's event; None when none of them sent it."""
    sent_by = sender(entry, uids)
    if sent_by is None:
        return None
    event = entry.get("EVENT")
    owner = writer_of(event) if isinstance(event, str) else None
    if owner is None or owner is sent_by:
        return sent_by
    return NotItsWriter(owner)
