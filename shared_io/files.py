"""Files opsbot keeps: written atomically and durably, read without following a link.

A write is: a temp file in the same directory (created with O_EXCL, never through a
symlink), write, fsync, rename (or link, for files that must never be overwritten), fsync
the directory. A file that must never be overwritten is written unnamed instead
(O_TMPFILE) where the file system can, and linked in: no other name ever appears. A
process killed mid-write leaves at most a ``.tmp-*`` file, which no reader takes for the
real one. Run as root, a new file is given to its directory's owner (the executor's user
owns the plan store; root's approvals are chowned to it there).
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
    if exclusive and _link_unnamed(path, data, mode):
        return
    tmp = directory / f"{TMP_PREFIX}{path.name}.{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except OSError as exc:
        raise store_error("create", tmp, exc) from exc
    try:
        try:
            give_to_directory_owner(fd, directory)
            _write_all(fd, data)
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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: What open(2) says where a file system makes no unnamed file (O_TMPFILE).
_NO_UNNAMED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)


def _link_unnamed(path: Path, data: bytes, mode: int) -> bool:
    """A file that must never be overwritten, made without a temp name: written and
    fsynced unnamed in its directory (O_TMPFILE), linked in at ``path`` (FileExistsError
    if something is there), the directory fsynced. False, and nothing left behind, where
    the file system makes no unnamed file or ``/proc`` is not there to link one: the
    caller writes a temp file instead. No name but ``path`` ever appears (nothing for a
    watcher of the directory to be woken by, nothing for a sweep to remove), and it takes
    two system calls fewer and no random name. StoreError on any other failure."""
    directory = path.parent
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise store_error("open", directory, exc) from exc
    try:
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in _NO_UNNAMED:
                return False
            raise store_error("create", path, exc) from exc
        try:
            try:
                give_to_directory_owner(fd, directory)
                _write_all(fd, data)
                os.fsync(fd)
                # linkat(2) following /proc's link to the open file; link(2) would not.
                os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=dir_fd)
            finally:
                os.close(fd)
            os.fsync(dir_fd)
        except FileExistsError:
            raise
        except FileNotFoundError as exc:
            if not os.path.isdir("/proc/self/fd"):
                return False
            raise store_error("write", path, exc) from exc
        except OSError as exc:
            raise store_error("write", path, exc) from exc
    finally:
        os.close(dir_fd)
    return True


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
