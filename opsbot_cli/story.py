"""A plan's story from the journal, believing only what opsbot itself wrote (what
``opsbot audit`` reads).

Any local user can log a ``PLAN_ID=`` field. An entry counts only if its trusted fields
(set by journald from the sender's credentials, not by the sender) show it came from
root or from one of opsbot's units running as one of opsbot's users.
"""

import pwd
from dataclasses import dataclass
from datetime import datetime
from typing import Any

OPSBOT_USERS = ("opsbot-executor", "opsbot-diagnose")
FIELDS_SHOWN = (
    "STATE",
    "STEP",
    "DECIDED_BY",
    "ACTION",
    "TOOL",
    "ARGV",
    "EXIT_STATUS",
    "OUTCOME",
    "REASON",
    "APPROVER",
    "GOAL",
    "UNIT",
    "SYMPTOM",
    "KIND",
    "ENDED_BY",
    "ERROR",
    "DUPLICATE",
    "RUN_ID",
    "EXPIRES_AT",
    "EVIDENCE",
    "SECONDS",
    "FOLLOW_UP_OF",
)


@dataclass(frozen=True)
class AuditEntry:
    time: datetime
    source: str
    event: str
    fields: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {
            "time": self.time.isoformat(),
            "source": self.source,
            "event": self.event,
            **{k.lower(): v for k, v in self.fields.items()},
        }


def _opsbot_uids() -> set[int]:
    uids = set()
    for name in OPSBOT_USERS:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return uids


def trusted(entry: dict[str, Any], opsbot_uids: set[int]) -> bool:
    uid = entry.get("_UID")
    unit = str(entry.get("_SYSTEMD_UNIT", ""))
    if uid == 0:
        return True
    return uid in opsbot_uids and unit.startswith("opsbot-")


def _matching(field: str, value: str, uids: set[int]) -> tuple[list[dict[str, Any]], int]:
    """Entries with ``field=value``: the trusted ones, and how many were not."""
    from systemd import journal

    reader = journal.Reader()
    try:
        reader.add_match(**{field: value})
        kept: list[dict[str, Any]] = []
        ignored = 0
        for raw in reader:
            if trusted(raw, uids):
                kept.append(raw)
            else:
                ignored += 1
        return kept, ignored
    finally:
        reader.close()


def read_story(plan_id: str) -> tuple[list[AuditEntry], int]:
    """Trusted entries for ``plan_id``, oldest first, and how many were ignored.

    The story starts with the diagnosis that proposed the plan: its run id, recorded in
    trusted entries when the plan was accepted, brings in every step of that run; and it
    ends with the follow-up diagnosis an UNRESOLVED plan started (FOLLOW_UP_OF=).
    """
    uids = _opsbot_uids()
    raws, ignored = _matching("PLAN_ID", plan_id, uids)
    follow, follow_ignored = _matching("FOLLOW_UP_OF", plan_id, uids)
    raws += follow
    ignored += follow_ignored
    for run_id in sorted({str(r["RUN_ID"]) for r in raws if r.get("RUN_ID")}):
        more, more_ignored = _matching("RUN_ID", run_id, uids)
        raws += more
        ignored += more_ignored
    seen: set[str] = set()
    entries: list[AuditEntry] = []
    for raw in sorted(raws, key=lambda r: r["__REALTIME_TIMESTAMP"]):
        cursor = str(raw["__CURSOR"])
        if cursor in seen:
            continue
        seen.add(cursor)
        unit = str(raw.get("_SYSTEMD_UNIT") or raw.get("SYSLOG_IDENTIFIER") or "?")
        user = "root" if raw.get("_UID") == 0 else str(raw.get("_UID"))
        entries.append(
            AuditEntry(
                time=raw["__REALTIME_TIMESTAMP"],
                source=f"{unit} (uid {user})",
                event=str(raw.get("EVENT", raw.get("MESSAGE", ""))),
                fields={k: str(raw[k]) for k in FIELDS_SHOWN if k in raw},
            )
        )
    return entries, ignored
