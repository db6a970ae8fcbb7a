"""The plan store: one file per plan under the state directory, written atomically.

Layout (all written only by the executor's user; root's writes are chowned to it)::

    plans/<id>.json      PlanRecord, written once, before ACCEPT is sent
    status/<id>.json     StatusRecord, rewritten on every transition and step
    consumed/<id>.json   the approval that authorised an apply; created with O_EXCL,
                         so of two racing applies exactly one gets it
    verify/<id>          empty: the plan's steps ran and it waits for opsbot-verify
                         (opsbot-verify.path watches this directory)
    apply.lock           flock held by a running apply

Every file is written with shared_io.files.write_atomic (temp file, fsync, rename or
link, fsync the directory): a daemon killed mid-write leaves at most a ``.tmp-*`` file,
which is never read as a plan and is swept at start-up.
"""

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from plans._listing import PlanIds
from plans._waiting import Open, OpenPlans
from plans.approval_archive import consumed_marker, is_consumed
from plans.errors import PlanError, PlanNotFound, StoreError, TamperedPlan, TooManyWaiting
from plans.records import PlanRecord, Provenance, StatusRecord, Transition
from shared_io.files import (
    TMP_PREFIX,
    fsync_dir,
    give_to_directory_owner,
    read_bounded,
    store_error,
    write_atomic,
)
from shared_schema import Plan, PlanState, is_valid_plan_id, parse_plan, sha256_hex

__all__ = ["PlanStore", "WaitingCaps", "new_plan_id", "utcnow"]


def new_plan_id(now: datetime) -> str:
    return f"{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class WaitingCaps:
    """How many plans may wait for approval (open, younger than the plan TTL) at once:
    from one submitter (a uid), and in all."""

    ttl_seconds: float
    per_submitter: int
    total: int


def _plain_lock_file(fd: int, path: Path, directory: Path) -> None:
    """StoreError unless ``fd`` is a regular file with one link, of this uid or of the
    directory's owner: what the executor's user could plant at the lock's name (a FIFO, a
    device, a hard link to a file of root's) is refused before root changes its owner."""
    st = os.fstat(fd)
    owners = {os.geteuid(), os.stat(directory).st_uid}
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid not in owners:
        raise StoreError(
            f"{path} is not a plain file of the executor's (it is "
            f"{stat.filemode(st.st_mode)}, {st.st_nlink} link(s), uid {st.st_uid}); "
            "refusing to lock or chown it",
            hint="find out who put it there; remove it and apply again",
        )


def _open(record: PlanRecord) -> Open:
    return Open(record.plan_id, record.submitted_by.uid, record.submitted_at)


class PlanStore:
    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir
        self.plans = state_dir / "plans"
        self.status_dir = state_dir / "status"
        self.consumed = state_dir / "consumed"
        self.verify = state_dir / "verify"
        self.archive = state_dir / "archive"
        self._lock = threading.Lock()
        self._open: OpenPlans | None = None
        #: The plan ids in plans/, listed again only when the directory changed.
        self._ids = PlanIds(self.plans)
        self._plans_at, self._status_at = os.fspath(self.plans), os.fspath(self.status_dir)
        #: Plans being written now, by fingerprint; set when the write is over.
        self._writing: dict[str, threading.Event] = {}

    # -- setup ------------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the sub-directories (the state directory itself comes from tmpfiles.d)."""
        for directory in (self.plans, self.status_dir, self.consumed, self.verify):
            try:
                directory.mkdir(mode=0o750, exist_ok=True)
            except OSError as exc:
                raise store_error("create", directory, exc) from exc
            if os.geteuid() == 0:
                st = os.stat(self.root)
                if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                    os.chown(directory, st.st_uid, st.st_gid)

    def sweep_temp_files(self, older_than: float = 60.0) -> int:
        """Remove temp files a killed writer left behind; returns how many."""
        removed = 0
        cutoff = time.time() - older_than
        for directory in (self.plans, self.status_dir, self.consumed):
            try:
                with os.scandir(directory) as scan:
                    entries = [e for e in scan if e.name.startswith(TMP_PREFIX)]
            except FileNotFoundError:
                continue
            for entry in entries:
                # An entry may vanish under us (its writer renamed it): skip just that one.
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed

    # -- plans ------------------------------------------------------------------------

    def _plan_path(self, plan_id: str) -> Path:
        if not is_valid_plan_id(plan_id):
            raise PlanNotFound(
                f"{plan_id[:80]!r} is not a plan id (ids look like 20261129-213500-1a2b3c4d)"
            )
        return self.plans / f"{plan_id}.json"

    def ids(self) -> list[str]:
        """Every stored plan id, oldest first (the directory is listed again only when
        it changed: plans._listing)."""
        return self._ids.ids()

    def stamp(self, plan_id: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """What identifies the bytes of ``plan_id``'s record and of its status now: each
        file's inode, size and times (None for a file that is not there). A file is only
        ever replaced whole (shared_io.files.write_atomic), and an edit in place moves
        its change time, which no one but root can set: while both stamps are the ones
        something was read under, the files hold what was read."""
        if not is_valid_plan_id(plan_id):
            self._plan_path(plan_id)  # PlanNotFound, saying what a plan id looks like
        stamps: list[tuple[int, ...] | None] = []
        # Strings, not Paths: a listing stamps hundreds of files.
        for directory in (self._plans_at, self._status_at):
            path = f"{directory}/{plan_id}.json"
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                stamps.append(None)
                continue
            except OSError as exc:
                raise store_error("read", Path(path), exc) from exc
            stamps.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return stamps[0], stamps[1]

    def _index(self) -> OpenPlans:
        if self._open is None:
            index = OpenPlans()
            for plan_id in self.ids():
                # A file that is no record (unreadable, tampered with, another plan's) is
                # no open plan a new one could duplicate: it keeps no submit out.
                with contextlib.suppress(StoreError, PlanError):
                    record = self.load(plan_id)
                    if not self.status(plan_id).state.is_final:
                        index.put(record.sha256, _open(record))
            self._open = index
        return self._open

    def _still_open(self, index: OpenPlans, sha: str) -> bool:
        """Whether the indexed plan ``sha`` is still open (read now); dropped if not."""
        try:
            if not self.status(index[sha].plan_id).state.is_final:
                return True
        except (StoreError, PlanNotFound):
            pass
        index.drop(sha)
        return False

    def _check_waiting(self, index: OpenPlans, caps: WaitingCaps, uid: int, now: datetime) -> None:
        """TooManyWaiting if one more plan from ``uid`` would pass ``caps`` (plans being
        written count: racing submits cannot pass it together). Called with the lock.
        The index counts as it changes: a submit below the caps walks none of it."""
        # Plans past their TTL wait for nothing (and are no duplicate of a new one): out
        # of the index, which so holds at most the plans that may still wait.
        index.expire(now - timedelta(seconds=caps.ttl_seconds))

        def counts() -> tuple[int, int]:
            writing = len(self._writing)
            return writing + index.of(uid), writing + len(index)

        mine, total = counts()
        if mine >= caps.per_submitter or total >= caps.total:
            # The index may still hold plans decided since (by the apply, or root): only
            # at the cap is each read again, so a submit reads no file below it.
            for sha in index.shas():
                self._still_open(index, sha)
            mine, total = counts()
        if mine >= caps.per_submitter or total >= caps.total:
            whose = "from this submitter" if mine >= caps.per_submitter else "in all"
            cap = caps.per_submitter if mine >= caps.per_submitter else caps.total
            raise TooManyWaiting(
                f"{cap} plans already wait for approval {whose} ({mine} from uid {uid}, "
                f"{total} in all); this one was not stored",
                hint="approve, reject or let them expire (`opsbot plans`); the caps are "
                "[executor] max_waiting_plans and max_waiting_plans_per_submitter",
            )

    def add(
        self,
        plan: Plan,
        provenance: Provenance,
        now: datetime,
        incident: str | None = None,
        caps: WaitingCaps | None = None,
    ) -> tuple[str, str, bool]:
        """Store ``plan`` (in ``incident``, a follow-up's); returns (plan id,
        fingerprint, duplicate).

        A plan identical to one still open (PROPOSED or APPROVED) returns that plan's id.
        A new one past ``caps`` raises TooManyWaiting. The record is durable on disk when
        this returns.
        """
        canonical = plan.canonical()
        sha = sha256_hex(canonical)
        while True:
            with self._lock:
                index = self._index()
                if sha in index and self._still_open(index, sha):
                    return index[sha].plan_id, sha, True
                writing = self._writing.get(sha)
                if writing is None:
                    if caps is not None:
                        self._check_waiting(index, caps, provenance.uid, now)
                    mine = self._writing[sha] = threading.Event()
                    break
            # The same plan is being written by another thread: its id is the answer.
            writing.wait()
        # The write (two fsyncs) runs outside the lock, so that different plans are made
        # durable concurrently; the same plan is written once (the event above).
        try:
            for _ in range(5):
                plan_id = new_plan_id(now)
                record = PlanRecord(
                    plan_id=plan_id,
                    sha256=sha,
                    plan=canonical.decode("utf-8"),
                    submitted_at=now,
                    submitted_by=provenance,
                    incident=incident,
                )
                data = record.model_dump_json().encode() + b"\n"
                try:
                    write_atomic(self._plan_path(plan_id), data, exclusive=True)
                except FileExistsError:
                    continue
                with self._lock:
                    index.put(sha, _open(record))
                return plan_id, sha, False
            raise StoreError("could not allocate a unique plan id")
        finally:
            with self._lock:
                del self._writing[sha]
            mine.set()

    def load(self, plan_id: str) -> PlanRecord:
        path = self._plan_path(plan_id)
        try:
            data = read_bounded(path)
        except FileNotFoundError as exc:
            month = self.archive / f"{plan_id[:4]}-{plan_id[4:6]}"
            if (month / path.name).exists():
                raise PlanNotFound(
                    f"plan {plan_id} is archived (older than [executor] retention_days)",
                    hint=f"its record is {month / path.name}; its story is in the journal "
                    f"(`journalctl PLAN_ID={plan_id}`)",
                ) from exc
            raise PlanNotFound(f"no plan {plan_id}", hint="`opsbot plans` lists them") from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TamperedPlan(f"{path} is a symlink; refusing it") from exc
            raise store_error("read", path, exc) from exc
        try:
            record = PlanRecord.model_validate_json(data)
        except ValidationError as exc:
            raise TamperedPlan(
                f"{path} is not a valid plan record: {exc.error_count()} error(s)"
            ) from exc
        if record.plan_id != plan_id:
            raise TamperedPlan(f"{path} holds plan {record.plan_id}, not {plan_id}")
        return record

    def verified_plan(self, record: PlanRecord) -> Plan:
        """The plan in ``record``, after checking its bytes still hash to its fingerprint and
        are still the canonical form of a valid plan."""
        raw = record.plan.encode("utf-8")
        if sha256_hex(raw) != record.sha256:
            raise TamperedPlan(
                f"plan {record.plan_id} was modified after it was stored: its bytes no longer "
                "match its fingerprint"
            )
        try:
            parsed = parse_plan(json.loads(raw))
        except ValueError as exc:
            raise TamperedPlan(f"plan {record.plan_id} is not valid JSON") from exc
        if not isinstance(parsed, Plan) or parsed.canonical() != raw:
            raise TamperedPlan(f"plan {record.plan_id} is no longer a valid canonical plan")
        return parsed

    def retire(self, before: datetime, limit: int = 1000) -> list[str]:
        """Move the plans submitted before ``before`` that ended (or, still PROPOSED or
        APPROVED, expired long ago) into ``archive/YYYY-MM/``, with their status; their
        ids, at most ``limit`` a call. Known from the ids alone (they are times): below
        the cut, no file is read. A plan APPLYING stays, for someone to look at."""
        cut = before.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
        old = [i for i in self.ids() if i < cut][:limit]
        moved: list[str] = []
        for plan_id in old:
            try:
                if self.status(plan_id).state is PlanState.APPLYING:
                    continue
            except (StoreError, PlanNotFound, TamperedPlan):
                pass  # unreadable, and old: archived as it is
            month = self.archive / f"{plan_id[:4]}-{plan_id[4:6]}"
            try:
                month.mkdir(mode=0o750, parents=True, exist_ok=True)
                # The plan first: a crash between leaves a status without a plan (read by
                # no one), never a plan without its status (which would read PROPOSED).
                os.rename(self._plan_path(plan_id), month / f"{plan_id}.json")
                status = self.status_dir / f"{plan_id}.json"
                if status.exists():
                    os.rename(status, month / f"{plan_id}.status.json")
                head = self.root / "audit" / plan_id  # its audit chain's head
                if head.exists():
                    os.rename(head, month / f"{plan_id}.chain-head")
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise store_error("archive", month, exc) from exc
            moved.append(plan_id)
        if moved:
            fsync_dir(self.plans)
            fsync_dir(self.status_dir)
        return moved

    # -- status -----------------------------------------------------------------------

    def status(self, plan_id: str, record: PlanRecord | None = None) -> StatusRecord:
        path = self.status_dir / f"{plan_id}.json"
        try:
            data = read_bounded(path)
        except FileNotFoundError:
            record = record or self.load(plan_id)
            return StatusRecord(
                plan_id=plan_id,
                state=PlanState.PROPOSED,
                history=[
                    Transition(
                        state=PlanState.PROPOSED,
                        at=record.submitted_at,
                        by=record.submitted_by.user,
                    )
                ],
            )
        except OSError as exc:
            raise store_error("read", path, exc) from exc
        try:
            return StatusRecord.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(f"{path} is not a valid status record") from exc

    def save_status(self, status: StatusRecord) -> None:
        path = self.status_dir / f"{status.plan_id}.json"
        write_atomic(path, status.model_dump_json().encode() + b"\n")

    # -- approvals consumed -----------------------------------------------------------

    def consume(self, plan_id: str, approval_sha256: str, by: str, now: datetime) -> bool:
        """Mark the approval of ``plan_id`` used. False if it already was (a replay or a
        racing apply): the caller must then run nothing."""
        data = json.dumps(
            {
                "plan_id": plan_id,
                "approval_sha256": approval_sha256,
                "by": by,
                "at": now.isoformat(),
                "pid": os.getpid(),
            }
        ).encode()
        try:
            write_atomic(consumed_marker(self.root, plan_id), data, exclusive=True)
        except FileExistsError:
            return False
        return True

    def is_consumed(self, plan_id: str) -> bool:
        """Whether an apply used the approval of ``plan_id``: anything at its marker's name
        counts (a symlink too, even a dangling one). Root's archiver (``opsbot
        archive-approvals``) reads it (plans.approval_archive) to move that approval out of
        the apply's reach."""
        return is_consumed(self.root, plan_id)

    # -- apply lock -------------------------------------------------------------------

    def apply_running(self) -> bool:
        """Whether an apply holds the lock now (read-only: the dry run asks this, and
        neither creates the lock file nor takes it)."""
        try:
            fd = os.open(self.root / "apply.lock", os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock taken here
        return False

    @contextlib.contextmanager
    def apply_lock(self, timeout: float = 30.0) -> Iterator[None]:
        path = self.root / "apply.lock"
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            # O_NONBLOCK: a FIFO planted at the name must not hold root's open for ever.
            fd = os.open(path, flags, 0o640)
        except OSError as exc:
            raise store_error("open", path, exc) from exc
        try:
            _plain_lock_file(fd, path, self.root)
            give_to_directory_owner(fd, self.root)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"another apply holds {path} for more than {timeout:g}s"
                        ) from None
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)
