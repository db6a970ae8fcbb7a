"""A tamper-evident trail in the journal: every entry of a plan's story that the executor's
user or root writes carries the sha256 of the entry before it, in two chains per writer:
the plan's (``CHAIN_SEQ``, ``CHAIN_PREV``: 1, 2, 3 ... of that writer about that plan) and
the day's (``DAY_SEQ``, ``DAY_PREV``: every entry of that writer that UTC day, whatever
the plan). ``AUDIT_HASH`` is the sha256 of the entry's own fields, those two links
included, so an entry edited, deleted or moved breaks a link that ``opsbot audit
--verify`` names (opsbot_cli/audit_verify.py).

Each writer keeps its heads (``seq hash``) in a directory only it can write, one file a
plan and one a day, locked while an entry is made and sent, so that the processes of one
writer (the executor daemon and the apply; root's approver and console) chain in the
order journald receives them:

    executor   /var/lib/opsbot/audit               (opsbot-executor)
    root       /var/lib/opsbot-approvals/audit     (root)

The hash has no key: anyone who reads the journal can recompute it, and the next link's.
So each entry also carries ``AUDIT_MAC``, the HMAC-SHA256 of its hash under its writer's
secret key (``key`` in that directory, 0600, made by the writer at its first entry): only
the writer (and root) can mark a link, and a reader who makes up the next one cannot.

What it proves, honestly: an edit or deletion by anyone who does not rewrite the chain
from the edit on, and the heads; and, where the key is read (root on the host), that each
link was made by a holder of its writer's key. Root on the host can do all of that;
against root only a copy off the host helps (the fleet's journal collector,
``--against``; or journald's Forward Secure Sealing with the verification key kept
elsewhere).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

#: A plan id (shared_schema.units; not imported: the console loads this with every verb).
PLAN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")

GENESIS = "0" * 64
#: Fields the writer sends that are not hashed: the hash itself and its key's mark.
#: journald adds ``_*`` and ``__*`` fields, python-systemd ``CODE_*``: none of those is
#: the writer's to sign.
HASH_FIELD = "AUDIT_HASH"
MAC_FIELD = "AUDIT_MAC"
#: A writer's secret key, in its chain directory: 64 hex digits, its writer's alone.
KEY_FILE = "key"
_KEY_TEXT = re.compile(r"[0-9a-f]{64}")
CHAIN_FIELDS = ("CHAIN", "CHAIN_SEQ", "CHAIN_PREV", "AUDIT_DAY", "DAY_SEQ", "DAY_PREV")

EXECUTOR_CHAIN_DIR = Path("/var/lib/opsbot/audit")
ROOT_CHAIN_DIR = Path("/var/lib/opsbot-approvals/audit")


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


@dataclass(frozen=True)
class Key:
    """A writer's secret key, and since when it marks the writer's entries (its file's
    time, in microseconds since the epoch as journald counts an entry's)."""

    secret: bytes
    since_us: int

    def mark(self, digest: str) -> str:
        """The ``AUDIT_MAC`` of an entry whose ``AUDIT_HASH`` is ``digest``."""
        return hmac.new(self.secret, digest.encode(), hashlib.sha256).hexdigest()


def signed_fields(fields: Mapping[str, str]) -> dict[str, str]:
    """The fields an entry's hash covers: what its writer sent, but the hash."""
    return {
        k: v
        for k, v in fields.items()
        if not k.startswith("_") and not k.startswith("CODE_") and k not in (HASH_FIELD, MAC_FIELD)
    }


def entry_hash(fields: Mapping[str, str]) -> str:
    canonical = json.dumps(signed_fields(fields), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_head(path: Path) -> Head:
    """The head a writer left at ``path``; the genesis when there is none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Head(0, GENESIS)
    seq, _, digest = text.strip().partition(" ")
    return Head(int(seq), digest) if seq.isdigit() else Head(0, GENESIS)


def read_key(directory: Path) -> Key:
    """The key of the writer whose chains are in ``directory``; OSError when there is
    none, it is not this process's to read, or it is not a key (a symlink is not
    followed)."""
    path = directory / KEY_FILE
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        text = os.read(fd, 200).decode("ascii", "replace").strip()
        made = os.fstat(fd).st_mtime_ns // 1000
    finally:
        os.close(fd)
    if _KEY_TEXT.fullmatch(text) is None:
        raise OSError(f"{path}: not a key")
    return Key(bytes.fromhex(text), made)


def _own_key(directory: Path) -> Key:
    """The writer's key, made (32 random bytes, mode 0600) when it has none yet: written
    whole under another name, then linked in, so that of two processes of one writer
    making it at once, both use the one linked first."""
    try:
        return read_key(directory)
    except FileNotFoundError:
        pass
    made = directory / f".key-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"{secrets.token_hex(32)}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(made, directory / KEY_FILE)
    except FileExistsError:
        pass
    finally:
        made.unlink()
    return read_key(directory)


def plan_head_path(directory: Path, plan_id: str) -> Path:
    return directory / plan_id


def day_head_path(directory: Path, day: str) -> Path:
    return directory / f"day-{day}"


class _Locked:
    """A head file, open and locked."""

    #: The most of a head file read: a head is far shorter (a number, a space, 64 digits).
    READ = 200

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        raw = os.pread(self.fd, self.READ, 0)
        #: The file's length as read (READ: at least that); what a write must cut.
        self.length = len(raw)
        seq, _, digest = raw.decode("ascii", "replace").strip().partition(" ")
        self.head = Head(int(seq), digest) if seq.isdigit() and len(digest) == 64 else None

    def write(self, head: Head) -> None:
        data = f"{head.seq} {head.hash}\n".encode()
        os.pwrite(self.fd, data, 0)
        # A head only grows (its number never loses a digit): the file is cut only where
        # it held more than the new head (garbage, or a longer head put there by hand).
        if self.length > len(data) or self.length >= self.READ:
            os.ftruncate(self.fd, len(data))

    def close(self) -> None:
        os.close(self.fd)


class Chain:
    """One writer's chains in ``directory`` (its name ``name``: executor, root)."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.directory = directory
        self._key: Key | None = None
        self._turn = threading.Lock()

    @contextlib.contextmanager
    def link(self, fields: dict[str, str], now: datetime | None = None) -> Iterator[None]:
        """Add the chain fields, ``AUDIT_HASH`` and ``AUDIT_MAC`` to ``fields`` (an entry
        about a plan); the block sends it; the heads move when it is sent. An entry whose
        heads or key cannot be kept (the directory is not this process's to write) is
        left unchained."""
        plan_id = fields.get("PLAN_ID", "")
        if PLAN_ID.fullmatch(plan_id) is None:
            yield
            return
        day = (now or datetime.now(UTC)).strftime("%Y%m%d")
        try:
            key = self._own_key()
            # The plan's head outside the turn below: entries about different plans do
            # not wait for each other to create and lock theirs; its lock orders those
            # about one plan (of every process of this writer), taken before the day's.
            plan = self._locked(plan_head_path(self.directory, plan_id))
        except OSError:
            yield
            return
        try:
            # The day's head is one file, so its lock orders every entry anyway: threads
            # of this process wait their turn here, before opening it (at a burst of
            # submits, the executor's threads otherwise queued in the kernel with it
            # open, each waking at every release).
            with self._turn:
                try:
                    daily = _Locked(day_head_path(self.directory, day))
                except OSError:
                    yield
                    return
                try:
                    at_plan = plan.head or Head(0, GENESIS)
                    at_day = daily.head or Head(0, GENESIS)
                    fields.update(
                        CHAIN=self.name,
                        CHAIN_SEQ=str(at_plan.seq + 1),
                        CHAIN_PREV=at_plan.hash,
                        AUDIT_DAY=day,
                        DAY_SEQ=str(at_day.seq + 1),
                        DAY_PREV=at_day.hash,
                    )
                    digest = entry_hash(fields)
                    fields[HASH_FIELD] = digest
                    fields[MAC_FIELD] = key.mark(digest)
                    yield
                    daily.write(Head(at_day.seq + 1, digest))
                finally:
                    daily.close()
            # Still under the plan's lock: its next entry links to this one.
            plan.write(Head(at_plan.seq + 1, digest))
        finally:
            plan.close()

    def _own_key(self) -> Key:
        """The writer's key (shared_io.audit_chain._own_key), read once; the directory
        made first if need be."""
        if self._key is None:
            self.directory.mkdir(mode=0o750, exist_ok=True)
            self._key = _own_key(self.directory)
        return self._key

    def _locked(self, path: Path) -> _Locked:
        """``path`` open and locked; its directory made again if it went away since."""
        try:
            return _Locked(path)
        except FileNotFoundError:
            self.directory.mkdir(mode=0o750, exist_ok=True)
            return _Locked(path)


def writer_chain(identifier: str) -> Chain | None:
    """The chain a process logs into: the executor's units as the executor's user, and
    root's processes; None for everyone else (their entries are not chained)."""
    if os.geteuid() == 0:
        return Chain("root", ROOT_CHAIN_DIR)
    if identifier in ("opsbot-executor", "opsbot-apply"):
        return Chain("executor", EXECUTOR_CHAIN_DIR)
    return None
