"""A plan's story from the journal, believing only what opsbot itself wrote (what
``opsbot audit`` and the agent's ``plan_story`` read).

Any local user can log a ``PLAN_ID=`` field, and each of opsbot's users can log any
event. An entry counts only if its trusted fields (set by journald from the sender's
credentials, not by the sender) show it came from the writer of its event
(opsbot_cli/writers.py: decisions from root, steps and verdicts from the executor's
units as its user, diagnoses from the diagnosis units as theirs). One of opsbot's
writers logging another's event is shown apart, "not from its writer", never as the
plan's history; an entry from no writer is only counted.

On a journal collector (systemd-journal-remote ``--split-mode=host``), every sending host
has its own files, ``remote-NAME.journal`` under /var/log/journal/remote. There
``_UID``, ``_SYSTEMD_UNIT`` and ``_HOSTNAME`` are whatever the host sent, so trust is per
source (:func:`read_host_story`): an entry of NAME's files counts for NAME only if

(a) its ``_HOSTNAME`` is NAME's host: a host never speaks for another;
(b) it comes from its event's writer as that host's journald recorded it: root as
    uid 0, the others from their units (opsbot's users' uids on that host are unknown
    here, and the collector's own passwd says nothing about them);
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

from opsbot_cli.writers import EXECUTOR, NotItsWriter, Uids, judge, local_uids

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
class Apart:
    """An entry one of opsbot's writers sent about another writer's event (the diagnose
    user logging ``plan.approved``): shown apart, never as the plan's history."""

    entry: AuditEntry
    why: NotItsWriter

    def as_json(self) -> dict[str, Any]:
        return {**self.entry.as_json(), "not_from_its_writer": str(self.why)}


@dataclass(frozen=True)
class Story:
    """A plan's story on this host: the entries that count, oldest first; those shown
    apart (``apart``: not from their event's writer); how many entries naming the plan
    none of opsbot's writers sent (``ignored``)."""

    entries: list[AuditEntry]
    apart: list[Apart]
    ignored: int


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
    or forged), the forged ones with their reason, and those shown apart (not from their
    event's writer)."""

    host: str
    files: tuple[Path, ...]
    entries: list[AuditEntry]
    ignored: int
    forged: list[Forged] = field(default_factory=list)
    apart: list[Apart] = field(default_factory=list)


#: An entry's verdict: None when it counts; the writer of its event when one of opsbot's
#: other writers sent it (shown apart); else why it is ignored.
Judge = Callable[[Mapping[str, Any]], str | NotItsWriter | None]
#: The reason of an entry ignored for its trusted fields alone (not counted as forged).
UNTRUSTED = "not written by opsbot"


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


def judged(uids: Uids) -> Judge:
    """The judge of a story read with ``uids`` (None on a collector): its event's writer
    counts (opsbot_cli/writers.py), another of opsbot's is shown apart, anyone else is
    ignored."""

    def judge_entry(raw: Mapping[str, Any]) -> str | NotItsWriter | None:
        verdict = judge(raw, uids)
        if verdict is None:
            return UNTRUSTED
        return verdict if isinstance(verdict, NotItsWriter) else None

    return judge_entry


def _open(files: tuple[Path, ...] | None) -> Any:
    from systemd import journal

    if files is None:
        return journal.Reader()
    return journal.Reader(files=[str(f) for f in files])


#: Entries a judge did not keep, each with its verdict.
Rest = list[tuple[str | NotItsWriter, dict[str, Any]]]


def _matching(
    field_name: str, value: str, judge_entry: Judge, files: tuple[Path, ...] | None = None
) -> tuple[list[dict[str, Any]], Rest]:
    """Entries with ``field_name=value`` (of ``files``, else of the local journal): the
    ones ``judge_entry`` keeps, and the others with its verdict."""
    reader = _open(files)
    try:
        reader.add_match(**{field_name: value})
        kept: list[dict[str, Any]] = []
        rest: Rest = []
        for raw in reader:
            verdict = judge_entry(raw)
            if verdict is None:
                kept.append(raw)
            else:
                rest.append((verdict, raw))
        return kept, rest
    finally:
        reader.close()


def _entry(raw: Mapping[str, Any], named: bool) -> AuditEntry:
    unit = str(raw.get("_SYSTEMD_UNIT") or raw.get("SYSLOG_IDENTIFIER") or "?")
    user = "root" if raw.get("_UID") == 0 else str(raw.get("_UID"))
    return AuditEntry(
        time=raw["__REALTIME_TIMESTAMP"],
        source=f"{unit} (uid {user})",
        event=str(raw.get("EVENT", raw.get("MESSAGE", ""))),
        fields={k: str(raw[k]) for k in FIELDS_SHOWN if k in raw},
        plan_id=str(raw.get("PLAN_ID") or ""),
        peer=_user(raw.get("PEER_UID"), named=named),
    )


def _story(
    plan_id: str, judge_entry: Judge, files: tuple[Path, ...] | None = None
) -> tuple[list[AuditEntry], list[Apart], list[tuple[str, dict[str, Any]]]]:
    """The entries ``judge_entry`` keeps of ``plan_id``'s story, oldest first; those it
    shows apart, oldest first; and each entry it ignored (once) with its reason. Run ids
    are looked up in the same files, from the kept entries only."""
    raws, rest = _matching("PLAN_ID", plan_id, judge_entry, files)
    follow, follow_rest = _matching("FOLLOW_UP_OF", plan_id, judge_entry, files)
    raws += follow
    rest += follow_rest
    # An incident's id is its first plan's: the plans the executor put in it (its
    # plan.accepted entries say INCIDENT=) tell the rest of the story, each with its own.
    joined, joined_rest = _matching("INCIDENT", plan_id, judge_entry, files)
    rest += joined_rest
    for other in sorted({str(r["PLAN_ID"]) for r in joined if r.get("PLAN_ID")} - {plan_id}):
        for field_name in ("PLAN_ID", "FOLLOW_UP_OF"):
            more, more_rest = _matching(field_name, other, judge_entry, files)
            raws += more
            rest += more_rest
    for run_id in sorted({str(r["RUN_ID"]) for r in raws if r.get("RUN_ID")}):
        more, more_rest = _matching("RUN_ID", run_id, judge_entry, files)
        raws += more
        rest += more_rest
    seen: set[str] = set()
    entries: list[AuditEntry] = []
    for raw in sorted(raws, key=lambda r: r["__REALTIME_TIMESTAMP"]):
        cursor = str(raw["__CURSOR"])
        if cursor not in seen:
            seen.add(cursor)
            entries.append(_entry(raw, named=files is None))
    once = {str(raw["__CURSOR"]): (verdict, raw) for verdict, raw in rest}
    apart: list[Apart] = []
    ignored: list[tuple[str, dict[str, Any]]] = []
    for cursor in sorted(once):
        verdict, raw = once[cursor]
        if isinstance(verdict, NotItsWriter):
            apart.append(Apart(_entry(raw, named=files is None), verdict))
        else:
            ignored.append((verdict, raw))
    apart.sort(key=lambda a: a.entry.time)
    return entries, apart, ignored


def read_story(plan_id: str) -> Story:
    """The entries of ``plan_id``'s story that count, oldest first; those shown apart; how
    many were ignored.

    The story starts with the diagnosis that proposed the plan: its run id, recorded in
    trusted entries when the plan was accepted, brings in every step of that run; and it
    ends with the follow-up diagnosis an UNRESOLVED plan started (FOLLOW_UP_OF=). The id
    of an incident's first plan is the incident's: its story goes on with every plan
    the executor put in the incident (INCIDENT=), in order.
    """
    entries, apart, ignored = _story(plan_id, judged(local_uids()))
    return Story(entries, apart, len(ignored))


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
    entry of its files that says it is ``host``'s and comes from the executor's unit)."""

    def judge_entry(raw: Mapping[str, Any]) -> str | None:
        ok = (
            _field(raw, "_HOSTNAME") == host
            and _field(raw, "EVENT") == "plan.accepted"
            and judge(raw, None) is EXECUTOR
        )
        return None if ok else UNTRUSTED

    kept, _ = _matching("PLAN_ID", plan_id, judge_entry, files)
    return bool(kept)


def read_host_story(plan_id: str, host: str, files: tuple[Path, ...]) -> HostStory:
    """What ``host``'s files tell of ``plan_id``, by rules (a), (b), (c) of this module."""
    holds = _accepted_here(plan_id, host, files)
    by_writer = judged(None)

    def judge_entry(raw: Mapping[str, Any]) -> str | NotItsWriter | None:
        claimed = _field(raw, "_HOSTNAME")
        if claimed != host:
            return f"claims to be host {claimed or '(none)'}, sent by {host}"
        verdict = by_writer(raw)
        if verdict == UNTRUSTED:
            return verdict
        if not holds and plan_id in (_field(raw, "PLAN_ID"), _field(raw, "FOLLOW_UP_OF")):
            return f"{host}'s opsbot-executor.service never accepted plan {plan_id}"
        return verdict

    entries, apart, ignored = _story(plan_id, judge_entry, files)
    forged = [
        Forged(host, _field(raw, "_HOSTNAME") or "", reason)
        for reason, raw in ignored
        if reason != UNTRUSTED
    ]
    return HostStory(host, files, entries, len(ignored), forged, apart)


def forged_of(stories: Iterable[HostStory]) -> list[Forged]:
    return [f for story in stories for f in story.forged]
