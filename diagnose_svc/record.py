"""The record of every diagnosis, kept by the diagnose user for ``opsbot replay``.

A record holds what a replay needs to ask today's policy the same question and answer
it from what was seen then, never from the host:

* the question: the unit, the symptom, who asked, when, the plans already tried;
* each tool call that ran, by tool and canonical arguments (their sha256, as the
  dispatcher keys repeats), with the answer the policy was given: the tool's output
  after redaction (whole, before the cut to the observation limit), or its error;
* each submit's reply from the executor (ACCEPT, REVISE, REJECT), by plan fingerprint;
* the turns as the policy saw them, and the verdict.

Nothing in it is unredacted: the same redaction the policy's view had was applied before
anything was kept. One gzip'd JSON file per diagnosis, named by its run id (UTC time
first, so names sort by age), written whole or not at all (shared_io.files), in
``/var/lib/opsbot-diagnose/records`` (0700: the diagnose user and root). The store keeps
at most ``[diagnose.record] max_mib`` and ``max_days``: the oldest go first. Outcomes
come later: opsbot-verify (the diagnose user too) files each plan's VERIFIED or
UNRESOLVED beside the records (``outcomes/PLAN_ID``). A record that cannot be read, is
damaged, or is not the store owner's is skipped with a warning.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import stat
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from diagnose_svc.actions import TriedPlan, Turn
from diagnose_svc.tools._baseline_store import state_directory
from shared_io.errors import OpsbotError
from shared_io.files import store_error, write_atomic
from shared_schema import RecordSettings
from shared_schema.verdict import NoteVerdict, PlanVerdict

log = structlog.get_logger("diagnose_svc.record")

#: The records' format; a replay reads this version only.
VERSION = 1
SUFFIX = ".json.gz"
#: A record's name: its run id (diagnose_svc.runtime.loop.new_run_id).
_RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
#: A plan id as an outcome's file name.
_PLAN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: A record larger than this (compressed, or its JSON once inflated) is damaged.
MAX_RECORD_BYTES = 16 * 1024 * 1024
#: Writes between two scans of the whole directory (another process writes too).
RESCAN_EVERY = 200


#: Who asked for the diagnosis this thread runs (the diagnose server sets it per request).
ASKED_BY: ContextVar[str] = ContextVar("asked_by", default=f"uid {os.getuid()}")


def run_started(run_id: str) -> datetime | None:
    """When the run named ``run_id`` started (its id says it, to the second), or None."""
    if not _RUN_ID.match(run_id):
        return None
    return datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)


@dataclass
class Recording:
    """What one run saw, gathered while it goes on (the dispatcher adds each tool's answer
    and each submit's reply, from the threads of a step: a lock keeps them whole)."""

    unit: str
    symptom: str
    asked_by: str = field(default_factory=ASKED_BY.get)
    tried: tuple[TriedPlan, ...] = ()
    calls: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    policy: str = ""
    #: The tools the policy was offered (a replay offers these, as today defines them).
    tools: list[str] = field(default_factory=list)
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def answered(self, tool: str, digest: str, args: Mapping[str, Any], data: Any) -> None:
        """``tool`` ran with ``args`` and its output, redacted, was ``data``."""
        with self._lock:
            self.calls.append({"tool": tool, "digest": digest, "args": dict(args), "output": data})

    def failed(
        self, tool: str, digest: str, args: Mapping[str, Any], message: str, hint: str | None
    ) -> None:
        """``tool`` ran with ``args`` and failed with this (redacted) error."""
        with self._lock:
            self.calls.append(
                {
                    "tool": tool,
                    "digest": digest,
                    "args": dict(args),
                    "error": {"message": message, "hint": hint},
                }
            )

    def replied(
        self, sha256: str, reply: Mapping[str, Any] | None, *, error: str | None = None
    ) -> None:
        """The executor answered the submit of the plan whose fingerprint is ``sha256``
        (``reply``), or could not be asked (``error``)."""
        with self._lock:
            if reply is not None:
                self.replies.append({"sha256": sha256, "reply": dict(reply)})
            else:
                self.replies.append({"sha256": sha256, "error": error or ""})

    def saw(self, turns: Iterable[Turn], policy: str, tools: Iterable[str]) -> None:
        """Once the run has ended: the turns as the policy saw them, its name, and the
        tools it was offered."""
        self.turns = [_turn_json(turn) for turn in turns]
        self.policy = policy
        self.tools = sorted(tools)

    def document(self, verdict: PlanVerdict | NoteVerdict) -> dict[str, Any]:
        """The record of the run that ended with ``verdict``."""
        with self._lock:
            return {
                "version": VERSION,
                "run_id": verdict.run_id,
                "unit": self.unit,
                "symptom": self.symptom,
                "asked_by": self.asked_by,
                "started": self.started.isoformat(),
                "policy": self.policy,
                "tools": list(self.tools),
                "tried": [_tried_json(t) for t in self.tried],
                "calls": list(self.calls),
                "replies": list(self.replies),
                "turns": list(self.turns),
                "verdict": verdict.model_dump(mode="json"),
            }


def _turn_json(turn: Turn) -> dict[str, Any]:
    return {
        "step": turn.step,
        "action": _jsonable(asdict(turn.action)),
        "observation": turn.observation,
        "decided_by": turn.decided_by,
    }


def _jsonable(value: Any) -> Any:
    """A dataclass's fields as JSON can hold them (mappings and tuples made plain)."""
    return json.loads(
        json.dumps(value, default=lambda v: dict(v) if isinstance(v, Mapping) else str(v))
    )


def _tried_json(tried: TriedPlan) -> dict[str, Any]:
    return {
        "plan_id": tried.plan_id,
        "steps": [list(step) for step in tried.steps],
        "evidence": list(tried.evidence),
        "symptom": dict(tried.symptom) if tried.symptom is not None else None,
    }


def tried_from_json(raw: Iterable[Mapping[str, Any]]) -> tuple[TriedPlan, ...]:
    """The plans already tried, as a record keeps them."""
    return tuple(
        TriedPlan(
            plan_id=str(t["plan_id"]),
            steps=tuple((str(tool), str(unit)) for tool, unit in t["steps"]),
            evidence=tuple(str(e) for e in t.get("evidence", ())),
            symptom=t.get("symptom"),
        )
        for t in raw
    )


@dataclass(frozen=True)
class Skipped:
    """A record that could not be used, and why (said as a warning, never fatal)."""

    name: str
    why: str


class RecordStore:
    """The records directory: written by the diagnose service, read by ``opsbot replay``."""

    def __init__(self, directory: Path, settings: RecordSettings | None = None):
        self.directory = directory
        self.settings = settings or RecordSettings()
        self._sizes: dict[str, int] | None = None
        self._writes = 0
        self._lock = threading.Lock()

    @property
    def outcomes_dir(self) -> Path:
        return self.directory / "outcomes"

    # -- writing -----------------------------------------------------------------------

    def write(self, document: Mapping[str, Any], now: datetime | None = None) -> Path:
        """Keep ``document`` (a Recording's); then the oldest go past the bounds.
        StoreError when it cannot be written."""
        run_id = str(document["run_id"])
        if not _RUN_ID.match(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
        data = gzip.compress(body, compresslevel=6, mtime=0)
        self._ensure()
        path = self.directory / f"{run_id}{SUFFIX}"
        with self._lock:
            write_atomic(path, data, exclusive=True, mode=0o600)
            self._kept()[path.name] = len(data)
            self._writes += 1
            if self._writes % RESCAN_EVERY == 0:
                self._sizes = None
            self._prune(now or datetime.now(UTC))
        return path

    def file_outcome(self, plan_id: str, outcome: str, at: datetime | None = None) -> None:
        """Keep what became of plan ``plan_id`` (VERIFIED, UNRESOLVED ...)."""
        if not _PLAN_ID.match(plan_id):
            raise ValueError(f"not a plan id: {plan_id!r}")
        self._ensure()
        with contextlib.suppress(FileExistsError):
            self.outcomes_dir.mkdir(mode=0o700)
        when = (at or datetime.now(UTC)).isoformat()
        body = json.dumps({"plan_id": plan_id, "outcome": outcome, "at": when}).encode()
        write_atomic(self.outcomes_dir / plan_id, body, mode=0o600)

    def _ensure(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=False, exist_ok=True)
        except OSError as exc:
            raise store_error("create", self.directory, exc) from exc

    def _kept(self) -> dict[str, int]:
        """Each record's name and size on disk (scanned once, then kept up to date)."""
        if self._sizes is None:
            sizes: dict[str, int] = {}
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
            self._sizes = dict(sorted(sizes.items()))
        return self._sizes

    def _prune(self, now: datetime) -> None:
        """The oldest records go while the store is over its size or holds one older
        than its age limit."""
        sizes = self._kept()
        limit = self.settings.max_mib * 1024 * 1024
        oldest_kept = now - timedelta(days=self.settings.max_days)
        total = sum(sizes.values())
        for name in sorted(sizes):
            started = run_started(name.removesuffix(SUFFIX))
            too_old = started is not None and started < oldest_kept
            if total <= limit and not too_old:
                break
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
            total -= sizes.pop(name)
            log.info("record.pruned", record=name, reason="age" if too_old else "size")
        self._prune_outcomes(oldest_kept)

    def _prune_outcomes(self, oldest_kept: datetime) -> None:
        if self._writes % RESCAN_EVERY != 1:  # the first write of a process, then each 200th
            return
        with contextlib.suppress(OSError), os.scandir(self.outcomes_dir) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                    if datetime.fromtimestamp(mtime, UTC) < oldest_kept:
                        os.unlink(entry.path)

    # -- reading -----------------------------------------------------------------------

    def names(self) -> list[str]:
        """The records' run ids, oldest first."""
        try:
            with os.scandir(self.directory) as entries:
                found = [e.name.removesuffix(SUFFIX) for e in entries if e.name.endswith(SUFFIX)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise store_error("read", self.directory, exc) from exc
        return sorted(n for n in found if _RUN_ID.match(n))

    def load(
        self,
        *,
        since: datetime | None = None,
        unit: str | None = None,
        ids: Iterable[str] = (),
    ) -> Iterator[dict[str, Any] | Skipped]:
        """The records asked for, oldest first; each one that cannot be used a Skipped."""
        wanted = set(ids)
        for run_id in self.names():
            if wanted and run_id not in wanted:
                continue
            started = run_started(run_id)
            if since is not None and started is not None and started < since:
                continue
            loaded = self._read(run_id)
            if isinstance(loaded, dict) and unit is not None and loaded.get("unit") != unit:
                continue
            if isinstance(loaded, Skipped):
                log.warning("record.skipped", record=loaded.name, why=loaded.why)
            yield loaded
        for missing in sorted(wanted - set(self.names())):
            yield Skipped(missing, "no such record")

    def _read(self, run_id: str) -> dict[str, Any] | Skipped:
        name = f"{run_id}{SUFFIX}"
        try:
            owner, fd = self._open(self.directory, name)
        except OSError as exc:
            return Skipped(name, f"cannot open it: {exc.strerror or exc}")
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                return Skipped(name, "not a regular file")
            if st.st_uid != owner:
                return Skipped(name, f"written by uid {st.st_uid}, not the store's owner {owner}")
            if st.st_size > MAX_RECORD_BYTES:
                return Skipped(name, f"{st.st_size} bytes, more than a record may be")
            raw = handle.read(MAX_RECORD_BYTES + 1)  # it may have grown since fstat
        if len(raw) > MAX_RECORD_BYTES:
            return Skipped(name, f"more than {MAX_RECORD_BYTES} bytes, more than a record may be")
        try:
            inflater = zlib.decompressobj(wbits=31)
            body = inflater.decompress(raw, MAX_RECORD_BYTES)
            if inflater.unconsumed_tail or not inflater.eof:
                return Skipped(name, "damaged: cut short or too large once inflated")
            document = json.loads(body)
        except (zlib.error, ValueError, RecursionError) as exc:
            return Skipped(name, f"damaged: {exc}")
        if not isinstance(document, dict) or document.get("version") != VERSION:
            return Skipped(name, "not a record of this version")
        if document.get("run_id") != run_id:
            return Skipped(name, "its run id is not its name")
        return document

    @staticmethod
    def _open(directory: Path, name: str) -> tuple[int, int]:
        """The owner of ``directory`` and ``name`` in it opened to read. Neither may be a
        symlink (the diagnose user owns both: root's replay must not follow one into a
        directory root owns, where root's files would pass for the store owner's), and
        neither a FIFO (never blocks). OSError where either cannot be opened."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        dir_fd = os.open(directory, flags | os.O_DIRECTORY)
        try:
            return os.fstat(dir_fd).st_uid, os.open(name, flags, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def outcome(self, plan_id: str) -> str | None:
        """What opsbot-verify filed for ``plan_id``, if anything."""
        if not _PLAN_ID.match(plan_id):
            return None
        try:
            owner, fd = self._open(self.outcomes_dir, plan_id)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as handle:
                st = os.fstat(handle.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
                    return None
                value = json.loads(handle.read(4096)).get("outcome")
        except (OSError, ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None


def records_dir() -> Path:
    """Where the records are: ``records`` in the diagnose service's state directory."""
    return state_directory() / "records"


_stores: dict[tuple[Path, RecordSettings], RecordStore] = {}
_stores_lock = threading.Lock()


def _store(settings: RecordSettings) -> RecordStore:
    where = records_dir()
    with _stores_lock:
        store = _stores.get((where, settings))
        if store is None:
            _stores.clear()  # one store per process: the config changed
            store = _stores[(where, settings)] = RecordStore(where, settings)
    return store


def file_outcome(plan_id: str, outcome: str, settings: RecordSettings) -> None:
    """Keep what became of a plan beside the records (opsbot-verify's VERIFIED or
    UNRESOLVED); one that cannot be written is said as a warning."""
    try:
        _store(settings).file_outcome(plan_id, outcome)
    except (OpsbotError, OSError, ValueError) as exc:
        log.warning("record.outcome_not_kept", plan_id=plan_id, error=str(exc))


def keep(document: Mapping[str, Any], settings: RecordSettings) -> Path | None:
    """Keep a diagnosis's record in this process's store; a record that cannot be
    written is said as a warning: the diagnosis itself is not lost for it."""
    try:
        return _store(settings).write(document)
    except (OpsbotError, OSError, ValueError) as exc:
        log.warning("record.not_kept", run_id=document.get("run_id"), error=str(exc))
        return None
