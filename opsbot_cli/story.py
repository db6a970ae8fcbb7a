"""A plan's story from the journal, believing only what opsbot itself wrote (what
``opsbot audit`` reads).

Any local user can log a ``PLAN_ID=`` field. An entry counts only if its trusted fields
(set by journald from the sender's credentials, not by the sender) show it came from
root or from one of opsbot's units running as one of opsbot's users.

On a journal collector (systemd-journal-remote ``--split-mode=host``), every sending host
has its own files, ``remote-NAME.journal`` under /var/log/journal/remote. There
``_UID``, ``_SYSTEMD_UNIT`` and ``_HOSTNAME`` are whatever the host sent, so trust is per
source (:func:`read_host_story`): an entry of NAME's files counts for NAME only if

(a) its ``_HOSTNAME`` is NAME's host: a host never speaks for another;
(b) it passes the trusted rule as that host's journald recorded it: uid 0, or a unit
    ``opsbot-*`` (opsbot's users' uids on that host are unknown here, and the collector's
    own passwd says nothing about them);
(c) NAME's own opsbot-executor.service logged accepting the plan (a trusted
    ``plan.accepted`` entry of that source): a host cannot speak about a plan it does not
    hold.

NAME is what journal-remote named the source after: the whole subject DN of the TLS
client certificate on a build with GnuTLS (``CN=web1`` -> host web1), the peer's address
on one without (Debian 12's: an address counts as the host a sources map gives it,
:func:`read_sources_map`), or a plain host name.
"""

import pwd
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from plans import EXECUTOR_UNIT, EXECUTOR_USER

OPSBOT_USERS = (EXECUTOR_USER, "opsbot-diagnose")
#: Where systemd-journal-remote writes by default.
REMOTE_DIR = Path("/var/log/journal/remote")
#: Which host each source named by its address is (lines "ADDRESS HOST", # comments).
SOURCES_MAP = Path("/etc/opsbot/journal-sources")
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
    "APPROVED_BY_RULE",
    "RULE_SHA256",
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
    "INCIDENT",
    "FOLLOWS",
)
#: remote-NAME.journal, or one journal-remote archived: remote-NAME@SEQNUMID-SEQ-TIME.journal
_REMOTE_FILE = re.compile(
    r"remote-(?P<name>.+?)(?:@[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{16})?\.journal"
)
_ESCAPED = re.compile(r"\\x([0-9a-fA-F]{2})")
_CN = re.compile(r"(?:^|,)\s*CN=((?:[^,\\]|\\.)+)", re.IGNORECASE)


@dataclass(frozen=True)
class AuditEntry:
    """One trusted entry of a story: when, who wrote it, its event and the fields shown;
    the plan it is about (``PLAN_ID``, "" for none), and for a ``plan.accepted`` who
    submitted the plan (``PEER_UID``, as a name where this host knows it)."""

    time: datetime
    source: str
    event: str
    fields: dict[str, str]
    plan_id: str = ""
    peer: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "time": self.time.isoformat(),
            "source": self.source,
            "event": self.event,
            **{k.lower(): v for k, v in self.fields.items()},
        }


@dataclass(frozen=True)
class Forged:
    """An entry one source sent about a plan or a host that is not its to speak of."""

    source: str
    claimed_host: str
    reason: str

    def as_json(self) -> dict[str, str]:
        return {"source": self.source, "claimed_host": self.claimed_host, "reason": self.reason}


@dataclass(frozen=True)
class HostStory:
    """One sending host's story of a plan on a collector: what its files hold that it may
    say (``entries``), how many entries naming the plan it may not (``ignored``: untrusted
    or forged), and the forged ones with their reason."""

    host: str
    files: tuple[Path, ...]
    entries: list[AuditEntry]
    ignored: int
    forged: list[Forged] = field(default_factory=list)


#: An entry's verdict: None when it counts, else why not.
Judge = Callable[[Mapping[str, Any]], str | None]
#: The reason of an entry ignored for its trusted fields alone (not counted as forged).
UNTRUSTED = "not written by opsbot"


def _opsbot_uids() -> set[int]:
    uids = set()
    for name in OPSBOT_USERS:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return uids


def _user(uid: Any, *, named: bool) -> str:
    """``uid`` (a journal field) as a user: its name where ``named`` (this host's own
    journal: this host's passwd) and it has one, else ``uid N``; "" for no uid."""
    try:
        number = int(uid)
    except (TypeError, ValueError):
        return ""
    if number == 0:
        return "root"
    if named:
        try:
            return pwd.getpwuid(number).pw_name
        except KeyError:
            pass
    return f"uid {number}"


def trusted(entry: Mapping[str, Any], opsbot_uids: set[int]) -> bool:
    uid = entry.get("_UID")
    unit = str(entry.get("_SYSTEMD_UNIT", ""))
    if uid == 0:
        return True
    return uid in opsbot_uids and unit.startswith("opsbot-")


def trusted_remote(entry: Mapping[str, Any]) -> bool:
    """The trusted rule on a collector, as the sending host's journald recorded the entry:
    root, or one of opsbot's units (as whichever user: its uids are the host's)."""
    unit = entry.get("_SYSTEMD_UNIT")
    return entry.get("_UID") == 0 or (isinstance(unit, str) and unit.startswith("opsbot-"))


def _open(files: tuple[Path, ...] | None) -> Any:
    from systemd import journal

    if files is None:
        return journal.Reader()
    return journal.Reader(files=[str(f) for f in files])


def _matching(
    field_name: str, value: str, judge: Judge, files: tuple[Path, ...] | None = None
) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """Entries with ``field_name=value`` (of ``files``, else of the local journal): the
    ones ``judge`` keeps, and the others with the reason it gave."""
    reader = _open(files)
    try:
        reader.add_match(**{field_name: value})
        kept: list[dict[str, Any]] = []
        ignored: list[tuple[str, dict[str, Any]]] = []
        for raw in reader:
            reason = judge(raw)
            if reason is None:
                kept.append(raw)
            else:
                ignored.append((reason, raw))
        return kept, ignored
    finally:
        reader.close()


def _story(
    plan_id: str, judge: Judge, files: tuple[Path, ...] | None = None
) -> tuple[list[AuditEntry], list[tuple[str, dict[str, Any]]]]:
    """The entries ``judge`` keeps of ``plan_id``'s story, oldest first, and each entry it
    ignored (once) with its reason. Run ids are looked up in the same files."""
    raws, ignored = _matching("PLAN_ID", plan_id, judge, files)
    follow, follow_ignored = _matching("FOLLOW_UP_OF", plan_id, judge, files)
    raws += follow
    ignored += follow_ignored
    # An incident's id is its first plan's: the plans the executor put in it (its
    # plan.accepted entries say INCIDENT=) tell the rest of the story, each with its own.
    joined, joined_ignored = _matching("INCIDENT", plan_id, judge, files)
    ignored += joined_ignored
    for other in sorted({str(r["PLAN_ID"]) for r in joined if r.get("PLAN_ID")} - {plan_id}):
        for field_name in ("PLAN_ID", "FOLLOW_UP_OF"):
            more, more_ignored = _matching(field_name, other, judge, files)
            raws += more
            ignored += more_ignored
    for run_id in sorted({str(r["RUN_ID"]) for r in raws if r.get("RUN_ID")}):
        more, more_ignored = _matching("RUN_ID", run_id, judge, files)
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
                plan_id=str(raw.get("PLAN_ID") or ""),
                peer=_user(raw.get("PEER_UID"), named=files is None),
            )
        )
    once = {str(raw["__CURSOR"]): (reason, raw) for reason, raw in ignored}
    return entries, [once[c] for c in sorted(once)]


def read_story(plan_id: str) -> tuple[list[AuditEntry], int]:
    """Trusted entries for ``plan_id``, oldest first, and how many were ignored.

    The story starts with the diagnosis that proposed the plan: its run id, recorded in
    trusted entries when the plan was accepted, brings in every step of that run; and it
    ends with the follow-up diagnosis an UNRESOLVED plan started (FOLLOW_UP_OF=). The id
    of an incident's first plan is the incident's: its story goes on with every plan
    the executor put in the incident (INCIDENT=), in order.
    """
    uids = _opsbot_uids()
    entries, ignored = _story(plan_id, lambda raw: None if trusted(raw, uids) else UNTRUSTED)
    return entries, len(ignored)


# -- a collector ----------------------------------------------------------------------------


def source_name(path: Path) -> str | None:
    """The source journal-remote named ``path`` after (its escapes undone), or None when
    it is not one of its files."""
    found = _REMOTE_FILE.fullmatch(path.name)
    if found is None:
        return None
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), found.group("name"))


def source_host(name: str, sources_map: Mapping[str, str]) -> str:
    """The host a source speaks for: the one the map names for it, else the CN of a
    certificate's DN, else the name itself."""
    if name in sources_map:
        return sources_map[name]
    cn = _CN.search(name)
    return cn.group(1).replace("\\", "") if cn else name


def read_sources_map(path: Path = SOURCES_MAP) -> dict[str, str]:
    """``ADDRESS HOST`` lines (``#`` comments): which host each address-named source is.
    A missing file is an empty map."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    names: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2:
            names[words[0]] = words[1]
    return names


def collector_sources(
    remote_dir: Path, sources_map: Mapping[str, str] | None = None
) -> dict[str, tuple[Path, ...]]:
    """Each host's files under ``remote_dir`` (its archived ones too), by host name; none
    when the directory is missing or holds no remote-*.journal file."""
    hosts: dict[str, list[Path]] = {}
    try:
        paths = sorted(remote_dir.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return {}
    for path in paths:
        name = source_name(path)
        if name is not None and path.is_file():
            hosts.setdefault(source_host(name, sources_map or {}), []).append(path)
    return {host: tuple(files) for host, files in sorted(hosts.items())}


def _field(entry: Mapping[str, Any], name: str) -> str | None:
    value = entry.get(name)
    return value if isinstance(value, str) else None


def _accepted_here(plan_id: str, host: str, files: tuple[Path, ...]) -> bool:
    """Whether ``host``'s own opsbot-executor.service logged accepting ``plan_id`` (an
    entry of its files that says it is ``host``'s and passes the trusted rule)."""

    def judge(raw: Mapping[str, Any]) -> str | None:
        ok = (
            _field(raw, "_HOSTNAME") == host
            and _field(raw, "_SYSTEMD_UNIT") == EXECUTOR_UNIT
            and trusted_remote(raw)
            and _field(raw, "EVENT") == "plan.accepted"
        )
        return None if ok else UNTRUSTED

    kept, _ = _matching("PLAN_ID", plan_id, judge, files)
    return bool(kept)


def read_host_story(plan_id: str, host: str, files: tuple[Path, ...]) -> HostStory:
    """What ``host``'s files tell of ``plan_id``, by rules (a), (b), (c) of this module."""
    holds = _accepted_here(plan_id, host, files)

    def judge(raw: Mapping[str, Any]) -> str | None:
        claimed = _field(raw, "_HOSTNAME")
        if claimed != host:
            return f"claims to be host {claimed or '(none)'}, sent by {host}"
        if not trusted_remote(raw):
            return UNTRUSTED
        if not holds and plan_id in (_field(raw, "PLAN_ID"), _field(raw, "FOLLOW_UP_OF")):
            return f"{host}'s opsbot-executor.service never accepted plan {plan_id}"
        return None

    entries, ignored = _story(plan_id, judge, files)
    forged = [
        Forged(host, _field(raw, "_HOSTNAME") or "", reason)
        for reason, raw in ignored
        if reason != UNTRUSTED
    ]
    return HostStory(host, files, entries, len(ignored), forged)


def forged_of(stories: Iterable[HostStory]) -> list[Forged]:
    return [f for story in stories for f in story.forged]
