"""Files opsbot keeps: written atomically and durably, read without following a link.

A write is: a temp file in the same directory (created with O_EXCL, never through a
symlink), write, fsync, rename (or link, for files that must never be overwritten), fsync
the directory. A process killed mid-write leaves at most a ``.tmp-*`` file, which no
reader takes for the real one. Run as root, a new file is given to its directory's owner
(the executor's user owns the plan store; root's approvals are chowned to it there).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from shared_io.errors import StoreError

__all__ = ["fsync_dir", "read_bounded", "write_atomic"]

#: The most a record file opsbot reads may hold, unless the caller says otherwise.
MAX_RECORD_BYTES = 1024 * 1024
#: What every temp file's name starts with (swept at start-up by its owner).
TMP_PREFIX = ".tmp-"


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_error(action: str, path: Path, exc: OSError) -> StoreError:
    """``cannot ACTION PATH: why``, the disk being full said as such."""
    if exc.errno == errno.ENOSPC:
        return StoreError(f"cannot {action} {path}: no space left on device")
    return StoreError(f"cannot {action} {path}: {exc.strerror or exc}")


def give_to_directory_owner(fd: int, directory: Path) -> None:
    """As root, hand a new file to its directory's owner (the executor's user)."""
    if os.geteuid() != 0:
        return
    st = os.stat(directory)
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        os.fchown(fd, st.st_uid, st.st_gid)


def write_atomic(path: Path, data: bytes, *, exclusive: bool = False, mode: int = 0o640) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one.

    ``exclusive``: fail with FileExistsError if ``path`` exists (no overwrite, ever).
    When run as root, the file is given to the owner of its directory, so the executor's
    user can read and later replace what an operator wrote. StoreError on any failure.
    """
    directory = path.parent
    tmp = directory / f"{TMP_PREFIX}{path.name}.{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except OSError as exc:
        raise store_error("create", tmp, exc) from exc
    try:
        try:
            give_to_directory_owner(fd, directory)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)
            os.unlink(tmp)
        else:
            os.rename(tmp, path)
        fsync_dir(directory)
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise store_error("write", path, exc) from exc


def read_bounded(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """Read a regular file without following a symlink, refusing anything larger than
    ``limit`` (StoreError). OSError as the system raised it (FileNotFoundError, ELOOP for
    a symlink): the caller says what a missing or linked file means."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{path} is not a regular file")
        if st.st_size > limit:
            raise StoreError(f"{path} is larger than {limit} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)
