"""disk_usage: how full the filesystems are that a unit writes to.

A journal's "No space left on device" is a lead; this checks the present: for each of
the unit's state, logs, cache and runtime directories (StateDirectory= and the like),
its WorkingDirectory= and its ReadWritePaths=, the filesystem's size, free space and
free inodes, from statvfs(2); and the mount it is on as systemd sees it (the deepest
``.mount`` unit above it, active): where, and whether it is mounted read-only. (The
diagnose user's own view cannot tell: its sandbox, ProtectSystem=strict, mounts
everything read-only for it.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from diagnose_svc._model import Model
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import show

PROPERTIES = (
    "Id",
    "StateDirectory",
    "LogsDirectory",
    "CacheDirectory",
    "RuntimeDirectory",
    "WorkingDirectory",
    "ReadWritePaths",
)
ROOTS = {
    "StateDirectory": "/var/lib",
    "LogsDirectory": "/var/log",
    "CacheDirectory": "/var/cache",
    "RuntimeDirectory": "/run",
}
#: Directories looked at, at most.
MAX_DIRECTORIES = 8
#: Free space under which a filesystem counts as full.
FULL_FREE_BYTES = 64 * 1024
FULL_PERCENT = 99.0


class DiskArgs(UnitToolArgs):
    gives = "disk"


class Usage(Model):
    """One directory the unit writes to, and the filesystem it is on."""

    path: str
    role: str
    exists: bool
    size_bytes: int = 0
    free_bytes: int = 0
    used_percent: float = 0.0
    free_inodes: int = 0
    full: bool = False
    #: The mount point it is on (systemd's .mount unit), and whether that is read-only.
    mount: str = ""
    read_only: bool = False

    def words(self) -> str:
        if not self.exists:
            return f"{self.path} is missing"
        full = " (FULL)" if self.full else ""
        ro = f" (READ-ONLY: {self.mount} is mounted ro)" if self.read_only else ""
        return f"{self.path} {self.used_percent:.0f}% used, {self.free_bytes} bytes free{full}{ro}"


class DiskUsage(ToolOutput):
    """The filesystems a unit writes to: size, free bytes and inodes, and which are full."""

    unit: str
    directories: list[Usage]

    @property
    def full(self) -> list[Usage]:
        return [d for d in self.directories if d.full]

    @property
    def read_only(self) -> list[Usage]:
        return [d for d in self.directories if d.read_only]

    def summary(self) -> str:
        if not self.directories:
            return f"{self.unit} names no directory it writes to"
        return f"{self.unit}: " + "; ".join(d.words() for d in self.directories)


def directories(props: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, role) of every directory the unit says it writes to."""
    out: dict[str, str] = {}
    for key, root in ROOTS.items():
        for name in props.get(key, "").split():
            out.setdefault(os.path.join(root, name), key)
    working = props.get("WorkingDirectory", "").lstrip("!-")
    if working.startswith("/"):
        out.setdefault(working, "WorkingDirectory")
    for path in props.get("ReadWritePaths", "").split():
        path = path.lstrip("-+")
        if path.startswith("/"):
            out.setdefault(path, "ReadWritePaths")
    return list(out.items())[:MAX_DIRECTORIES]


def _measurable(path: str) -> str | None:
    """Where to measure a directory the diagnose user may not enter: a DynamicUser=
    state directory is a symlink into /var/lib/private (0700 root), which exists; the
    filesystem it is on is that of the link's target's nearest directory it may stat."""
    if not os.path.islink(path):
        return None
    target = os.path.join(os.path.dirname(path), os.readlink(path))
    parent = os.path.dirname(os.path.normpath(target))
    while parent and parent != "/":
        try:
            os.statvfs(parent)
            return parent
        except OSError:
            parent = os.path.dirname(parent)
    return "/"


def usage(path: str, role: str) -> Usage:
    try:
        vfs = os.statvfs(path)
    except FileNotFoundError:
        return Usage(path=path, role=role, exists=False)
    except OSError:
        measured = _measurable(path)
        if measured is None:
            return Usage(path=path, role=role, exists=False)
        vfs = os.statvfs(measured)
    size = vfs.f_blocks * vfs.f_frsize
    free = vfs.f_bavail * vfs.f_frsize
    used = 100.0 * (size - free) / size if size else 0.0
    full = size > 0 and (free < FULL_FREE_BYTES or used >= FULL_PERCENT)
    full = full or (vfs.f_files > 0 and vfs.f_favail == 0)
    return Usage(
        path=path,
        role=role,
        exists=True,
        size_bytes=size,
        free_bytes=free,
        used_percent=round(used, 1),
        free_inodes=vfs.f_favail,
        full=full,
    )


def mount_unit(path: str) -> str:
    """The ``.mount`` unit systemd names a mount point by (``systemd-escape --path``)."""
    trimmed = os.path.normpath(path).strip("/")
    if not trimmed:
        return "-.mount"
    out: list[str] = []
    for index, char in enumerate(trimmed):
        if char == "/":
            out.append("-")
        elif char.isascii() and (char.isalnum() or char in ":_.") and (index or char != "."):
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
    return "".join(out) + ".mount"


def _ancestors(path: str) -> list[str]:
    parts = os.path.normpath(path).strip("/").split("/")
    return ["/", *("/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0])]


def mounts(paths: list[str]) -> dict[str, tuple[str, bool]]:
    """For each path, the deepest active mount above it systemd knows: (its mount point,
    mounted read-only). One ``systemctl show`` of every candidate."""
    candidates = {mount_unit(a): a for p in paths for a in _ancestors(p)}
    if not candidates:
        return {}
    active: dict[str, bool] = {}
    for props in show(list(candidates), ("Id", "LoadState", "ActiveState", "Options")):
        where = candidates.get(props.get("Id", ""))
        if where is not None and props.get("ActiveState") == "active":
            active[where] = "ro" in props.get("Options", "").split(",")
    out: dict[str, tuple[str, bool]] = {}
    for path in paths:
        deepest = [a for a in _ancestors(path) if a in active]
        if deepest:
            out[path] = (deepest[-1], active[deepest[-1]])
    return out


@read_tool(DiskArgs)
def disk_usage(args: DiskArgs, context: ToolContext) -> DiskUsage:
    """Check how full the filesystems are that one unit writes to: its StateDirectory=,
    LogsDirectory=, CacheDirectory=, RuntimeDirectory=, WorkingDirectory= and
    ReadWritePaths=. For each: whether it exists, the filesystem's size, free bytes, used
    percent, free inodes, whether it is full, and the mount it is on and whether that is
    mounted read-only. Use it to check a journal's "No space left on device" or
    "Read-only file system".
    """
    [props] = show([args.unit], PROPERTIES)
    found = [usage(path, role) for path, role in directories(props)]
    on = mounts([d.path for d in found if d.exists])
    return DiskUsage(
        unit=props.get("Id", args.unit),
        directories=[
            d.model_copy(update={"mount": on[d.path][0], "read_only": on[d.path][1]})
            if d.path in on
            else d
            for d in found
        ],
    )
