"""read_limits: how close a unit runs to the limits systemd and the kernel hold it to:
file descriptors against ``LimitNOFILE=``, tasks against ``TasksMax=`` (and how often its
cgroup refused a fork: ``pids.events``), so that a process's "Too many open files" or
"Resource temporarily unavailable" is checked against the present, not believed.

Its main process's open descriptors are counted where the diagnose user may look
(``/proc/PID/fd`` of another user's process is not readable); elsewhere the size of its
descriptor table (``FDSize`` in ``/proc/PID/status``, which every user may read: the
kernel grows it past the highest descriptor open, in powers of two) tells whether it
reached its limit. Nothing is guessed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_int, show

__all__ = ["Limits", "LimitsArgs", "limits_of", "read_limits"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROPERTIES = (
    "Id",
    "ActiveState",
    "MainPID",
    "ControlGroup",
    "LimitNOFILE",
    "LimitNOFILESoft",
    "TasksCurrent",
    "TasksMax",
)
#: What systemd prints for "no limit" (UINT64_MAX), and what it means.
_INFINITY = ("infinity", "18446744073709551615", "")
#: At or above this share of a limit, a unit runs at it.
AT_LIMIT = 0.95


class LimitsArgs(UnitToolArgs):
    gives = "limits"


class Limits(ToolOutput):
    """``unit``'s descriptors and tasks against their limits (None: no limit, or not
    readable here)."""

    unit: str
    active_state: str
    open_files: int | None
    #: The size of its main process's descriptor table (FDSize), when the count is not
    #: readable: at or above the limit, its descriptors reached it.
    fd_table: int | None = None
    files_limit: int | None
    tasks: int | None
    tasks_limit: int | None
    #: How many times the kernel refused it a new task at TasksMax= (pids.events max).
    tasks_refused: int | None

    @property
    def files_at_limit(self) -> bool:
        if self.open_files is None:
            return _at(self.fd_table, self.files_limit)
        return _at(self.open_files, self.files_limit)

    @property
    def tasks_at_limit(self) -> bool:
        return _at(self.tasks, self.tasks_limit) or bool(self.tasks_refused)

    def summary(self) -> str:
        count = self.open_files if self.open_files is not None else "unknown"
        table = f" (descriptor table {self.fd_table})" if self.fd_table else ""
        files = (
            f"{count} open files{table} of "
            f"LimitNOFILE={self.files_limit if self.files_limit is not None else 'infinity'}"
        )
        tasks = (
            f"{self.tasks if self.tasks is not None else 'unknown'} tasks of TasksMax="
            f"{self.tasks_limit if self.tasks_limit is not None else 'infinity'}"
        )
        refused = f" (a fork refused {self.tasks_refused} times)" if self.tasks_refused else ""
        return f"{self.unit} is {self.active_state}: {files}; {tasks}{refused}"


def _at(value: int | None, limit: int | None) -> bool:
    return value is not None and limit is not None and limit > 0 and value >= limit * AT_LIMIT


def _limit(value: str) -> int | None:
    return None if value in _INFINITY else parse_int(value) or None


def _open_files(pid: int) -> int | None:
    if pid <= 0:
        return None
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None  # another user's process: its descriptors are not ours to count


def _fd_table(pid: int) -> int | None:
    if pid <= 0:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "FDSize" and value.strip().isdigit():
            return int(value)
    return None


def _refused(group: str) -> int | None:
    for base in (CGROUP_ROOT, CGROUP_ROOT / "unified", CGROUP_ROOT / "pids"):
        try:
            text = (base / group.lstrip("/") / "pids.events").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count)
    return None


def limits_of(
    props: Mapping[str, str],
    open_files: int | None,
    refused: int | None,
    fd_table: int | None = None,
) -> Limits:
    current = props.get("TasksCurrent", "")
    return Limits(
        unit=props.get("Id", ""),
        active_state=props.get("ActiveState", ""),
        open_files=open_files,
        fd_table=fd_table if open_files is None else None,
        files_limit=_limit(props.get("LimitNOFILESoft", "") or props.get("LimitNOFILE", "")),
        tasks=None if current in _INFINITY else parse_int(current),
        tasks_limit=_limit(props.get("TasksMax", "")),
        tasks_refused=refused,
    )


@read_tool(LimitsArgs)
def read_limits(args: LimitsArgs, context: ToolContext) -> Limits:
    """Read how close one unit runs to its limits: its main process's open file
    descriptors against LimitNOFILE= (the count where it may be read), its tasks against
    TasksMax=, and how many times its cgroup refused it a new task (pids.events). Use it
    to check a process's own "Too many open files" or "Resource temporarily unavailable".
    """
    [props] = show([args.unit], PROPERTIES)
    pid = parse_int(props.get("MainPID", ""))
    return limits_of(
        props, _open_files(pid), _refused(props.get("ControlGroup", "")), _fd_table(pid)
    )
