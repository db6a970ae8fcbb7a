"""The cgroup2 tree, read unprivileged: which unit each cgroup belongs to, and the first
process of each unit that runs.

The directories of the cgroup2 mount (found in ``/proc/self/mountinfo``: ``/sys/fs/cgroup``,
or ``/sys/fs/cgroup/unified`` on hybrid hosts) are walked once per reading, bounded. A
cgroup's id is its directory's inode (what sock_diag gives a TCP socket); a unit's
directory lists its processes in ``cgroup.procs``, the main one first as a rule (it joined
first). Kernel reads only: no ``systemctl`` over every unit, which costs seconds on a host
with thousands of them.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: cgroup directories walked at most: a bound, not a figure.
MAX_CGROUPS = 20000
_UNIT = re.compile(r"[^/]+\.(?:service|scope|socket|mount|swap|timer)")


@dataclass(frozen=True)
class Cgroups:
    """One walk of the tree: cgroup id -> its unit (the deepest unit in its path:
    ``system.slice/app.service/worker`` is ``app.service``), and unit -> its directory."""

    units: dict[int, str] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)

    def first_pid(self, unit: str) -> int | None:
        """The first process of ``unit``'s cgroup or of its first sub-cgroup that has one
        (the main process, as a rule); None when it runs none, or its cgroup is gone."""
        top = self.dirs.get(unit)
        if top is None:
            return None
        todo = [top]
        while todo:
            path = todo.pop(0)
            with contextlib.suppress(OSError):
                with open(path / "cgroup.procs", "rb") as handle:
                    line = handle.readline().strip()
                if line.isdigit():
                    return int(line)
                with os.scandir(path) as entries:
                    todo += sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
            if len(todo) > 64:
                return None
        return None

    def uids(self, suffix: str = ".service") -> dict[int, list[str]]:
        """uid -> the running units (``suffix``) whose first process runs as it; root's
        is left out (a uid most of systemd's own services share names none of them)."""
        found: dict[int, list[str]] = {}
        for unit in self.dirs:
            if not unit.endswith(suffix):
                continue
            pid = self.first_pid(unit)
            if pid is None:
                continue
            try:
                uid = os.stat(f"/proc/{pid}").st_uid
            except OSError:
                continue  # it ended since: no client of anything now
            if uid:
                found.setdefault(uid, []).append(unit)
        return found


def cgroup_root(mountinfo: str | None = None) -> Path | None:
    """Where the cgroup2 hierarchy is mounted (``/sys/fs/cgroup``, or
    ``/sys/fs/cgroup/unified`` on a hybrid host), from /proc/self/mountinfo."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if sep and tail.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(fields[4].replace("\\040", " "))
    return None


def walk(root: Path | None) -> Cgroups:
    """The units of the tree under ``root`` (nothing when there is no cgroup2 mount)."""
    found = Cgroups()
    if root is None:
        return found
    todo: list[tuple[Path, str]] = [(root, "")]
    seen = 0
    while todo and seen < MAX_CGROUPS:
        path, unit = todo.pop()
        with contextlib.suppress(OSError), os.scandir(path) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                seen += 1
                mine = _UNIT.fullmatch(entry.name)
                own = entry.name if mine else unit
                if mine and not unit:  # a unit of the system's, not one nested in another
                    found.dirs[entry.name] = Path(entry.path)
                with contextlib.suppress(OSError):
                    if own:
                        found.units[entry.inode()] = own
                todo.append((Path(entry.path), own))
    return found


def cgroup_units(root: Path | None) -> dict[int, str]:
    """cgroup id (its directory's inode) -> the unit it belongs to."""
    return walk(root).units
