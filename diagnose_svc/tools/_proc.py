"""Reading /proc, read-only and bounded: a process's state and CPU time, its user, the unit
its cgroup belongs to; the sockets listening in this network namespace.

Everything here reads what any user may read (``/proc/PID/stat``, ``status``, ``cgroup``,
``/proc/self/net/tcp``): nothing needs a privilege, and nothing is written. A process that
vanishes while it is read is simply not there.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
#: Processes scanned at most when mapping a socket's user to processes.
MAX_PROCESSES = 4096
#: What the state letters of /proc/PID/stat mean (proc(5)).
STATE_WORDS = {
    "R": "running",
    "S": "sleeping",
    "D": "waiting for I/O (uninterruptible)",
    "Z": "zombie",
    "T": "stopped (by a signal)",
    "t": "stopped (traced)",
    "X": "dead",
    "I": "idle",
    "P": "parked",
}
_UNIT = re.compile(r"/([^/]+\.(?:service|scope|socket|mount|swap|timer))$")


@dataclass(frozen=True)
class Stat:
    pid: int
    comm: str
    state: str
    cpu_ticks: int  # utime + stime, in clock ticks


def clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def read_stat(pid: int) -> Stat | None:
    """/proc/PID/stat, or None if the process is not there (or not visible)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm is in parentheses and may itself hold spaces and parentheses.
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    if len(fields) < 13:
        return None
    return Stat(pid, comm[:32], fields[0], int(fields[11]) + int(fields[12]))


def read_status_field(pid: int, name: str) -> str | None:
    """One ``Name:`` line of /proc/PID/status, without its name."""
    try:
        with open(PROC / str(pid) / "status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key == name:
                    return value.strip()
    except OSError:
        return None
    return None


def uid_of(pid: int) -> int | None:
    real = read_status_field(pid, "Uid")
    return int(real.split()[0]) if real else None


def unit_of(pid: int) -> str | None:
    """The systemd unit whose cgroup the process is in, if it is in one."""
    try:
        lines = (PROC / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    paths = [line.split(":", 2)[2] for line in lines if line.count(":") >= 2]
    for path in paths:  # the unified line (0::) first on cgroup v2, name=systemd on hybrid
        match = _UNIT.search(path)
        if match:
            return match.group(1)
    return None


def pids() -> Iterator[int]:
    """Every process id this service can see, at most MAX_PROCESSES."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                yield int(entry.name)
                count += 1
                if count >= MAX_PROCESSES:
                    return


@dataclass(frozen=True)
class Socket:
    address: str
    port: int
    uid: int
    inode: int


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ".".join(str(b) for b in reversed(raw))
    # IPv6: four little-endian 32-bit words.
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    joined = b"".join(words)
    groups = [joined[i : i + 2].hex() for i in range(0, 16, 2)]
    return ":".join(g.lstrip("0") or "0" for g in groups)


def listening_tcp() -> list[Socket]:
    """The TCP sockets in state LISTEN in this network namespace (IPv4 and IPv6)."""
    sockets: list[Socket] = []
    for name in ("tcp", "tcp6"):
        try:
            lines = (PROC / "self" / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: TCP_LISTEN
                continue
            address, _, port = fields[1].partition(":")
            sockets.append(Socket(_address(address), int(port, 16), int(fields[7]), int(fields[9])))
    return sockets
