"""read_process_state: what a unit's processes are doing now, from /proc.

An "active" unit can be stopped (SIGSTOP), stuck in uninterruptible I/O or a zombie
behind systemd's back; only the process's own state and whether its CPU time moves tell.
The main and control processes are sampled twice, ``SAMPLE_SECONDS`` apart.
"""

from __future__ import annotations

import time
from typing import Literal

from diagnose_svc._model import Model
from diagnose_svc.tools._proc import STATE_WORDS, clock_ticks, read_stat, read_status_field
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_int, show

#: Long enough for CPU time (counted in 10 ms ticks) to show a process that spins;
#: a stopped or zombie process shows at the first reading.
SAMPLE_SECONDS = 0.2
PROPERTIES = ("Id", "ActiveState", "SubState", "MainPID", "ControlPID")


class ProcessArgs(UnitToolArgs):
    gives = "process"


class ProcessInfo(Model):
    pid: int
    role: Literal["main", "control"]
    visible: bool
    comm: str = ""
    state: str = ""
    state_words: str = ""
    threads: int = 0
    cpu_seconds: float = 0.0
    #: CPU time it used while it was watched (SAMPLE_SECONDS of wall time).
    cpu_seconds_while_watched: float = 0.0


class ProcessState(ToolOutput):
    """The unit's main and control processes: state (running, sleeping, stopped, zombie,
    waiting for I/O) and whether their CPU time moved while they were watched."""

    unit: str
    active_state: str
    sub_state: str
    watched_ms: int
    processes: list[ProcessInfo]

    @property
    def stopped(self) -> list[ProcessInfo]:
        return [p for p in self.processes if p.state in ("T", "t")]

    def summary(self) -> str:
        if not self.processes:
            return f"{self.unit} is {self.active_state}/{self.sub_state} and has no process"
        parts = []
        for p in self.processes:
            if not p.visible:
                parts.append(f"{p.role} pid {p.pid}: not visible")
            else:
                parts.append(
                    f"{p.role} pid {p.pid} ({p.comm}) is {p.state_words}, "
                    f"{p.cpu_seconds_while_watched:.2f}s CPU in {self.watched_ms} ms"
                )
        return f"{self.unit} is {self.active_state}/{self.sub_state}; " + "; ".join(parts)


def _sample(pid: int, role: Literal["main", "control"]) -> tuple[ProcessInfo, int | None]:
    stat = read_stat(pid)
    if stat is None:
        return ProcessInfo(pid=pid, role=role, visible=False), None
    threads = read_status_field(pid, "Threads")
    return (
        ProcessInfo(
            pid=pid,
            role=role,
            visible=True,
            comm=stat.comm,
            state=stat.state,
            state_words=STATE_WORDS.get(stat.state, stat.state),
            threads=int(threads) if threads and threads.isdigit() else 0,
            cpu_seconds=round(stat.cpu_ticks / clock_ticks(), 2),
        ),
        stat.cpu_ticks,
    )


@read_tool(ProcessArgs)
def read_process_state(args: ProcessArgs, context: ToolContext) -> ProcessState:
    """Read what one unit's main and control processes are doing now, from /proc.

    Returns, for each: pid, whether it is visible, its command name, its state (R
    running, S sleeping, D waiting for I/O, T stopped by a signal, Z zombie) in words, its
    threads, its CPU time, and the CPU time it used while watched for a fifth of a
    second. A unit can be "active" while its process is stopped or stuck: this tells.
    """
    [props] = show([args.unit], PROPERTIES)
    roles: list[tuple[int, Literal["main", "control"]]] = [
        (parse_int(props.get("MainPID", "")), "main"),
        (parse_int(props.get("ControlPID", "")), "control"),
    ]
    first = {pid: _sample(pid, role) for pid, role in roles if pid > 0}
    started = time.monotonic()
    if first:
        time.sleep(SAMPLE_SECONDS)
    watched = time.monotonic() - started
    processes: list[ProcessInfo] = []
    for pid, (info, ticks) in first.items():
        again = read_stat(pid)
        if ticks is not None and again is not None:
            used = max(0, again.cpu_ticks - ticks) / clock_ticks()
            info = info.model_copy(
                update={
                    "state": again.state,
                    "state_words": STATE_WORDS.get(again.state, again.state),
                    "cpu_seconds_while_watched": round(used, 2),
                }
            )
        elif ticks is not None:
            info = info.model_copy(update={"visible": False, "state_words": "exited"})
        processes.append(info)
    return ProcessState(
        unit=props.get("Id", args.unit),
        active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""),
        watched_ms=round(watched * 1000),
        processes=processes,
    )
