"""Small helpers of the in-container drivers (plain scripts next to this file, which
import it as ``_util``): one socket exchange, one timed command, workers as a user."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from shared_io import framing
from shared_schema import MAX_REPLY_BYTES

EXECUTOR_SOCKET = "/run/opsbot/executor.sock"
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "cat",
}


def exchange(path: str, line: bytes, timeout: float = 30.0) -> bytes:
    """Connect, send one newline-terminated message, read one reply line, close (opsbot's
    own framing, as every client of its sockets)."""
    return framing.exchange(path, line, limit=MAX_REPLY_BYTES, timeout=timeout)


def submit_line(plan: dict[str, Any], run_id: str | None = None) -> bytes:
    message: dict[str, Any] = {"v": 1, "op": "submit", "plan": plan}
    if run_id:
        message["run_id"] = run_id
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def restart_plan(goal: str, units: Sequence[str]) -> dict[str, Any]:
    return {
        "goal": goal,
        "steps": [
            {"tool": "restart_unit", "args": {"unit": u}, "reason": "bench: restart"} for u in units
        ],
    }


def as_user(user: str, fn: Callable[[], bytes]) -> bytes:
    """Run ``fn`` in a child that has become ``user``; return what it returned."""
    entry = pwd.getpwnam(user)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(read_fd)
            os.initgroups(user, entry.pw_gid)
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            data = fn()
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        except BaseException as exc:  # noqa: B036 - report anything, then leave the child
            os.write(2, f"as_user({user}): {exc!r}\n".encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as src:
        data = src.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"child as {user} failed")
    return data


def timed(
    argv: Sequence[str],
    check: bool = True,
    env: dict[str, str] | None = None,
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time of one command (argv, no shell), and what it did."""
    started = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env or ENV,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{list(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}{proc.stdout[-2000:]}"
        )
    return elapsed, proc


def run(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=ENV,
        check=True,
        **kw,
    )


def invocation_ids(units: Sequence[str]) -> list[str]:
    out = run(["systemctl", "show", "-P", "InvocationID", *units]).stdout.split()
    return out


def vmrss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main_pid(unit: str) -> int:
    return int(run(["systemctl", "show", "-P", "MainPID", unit]).stdout.strip() or 0)


def fork_workers(user: str, n: int, fn: Callable[[int], Any]) -> tuple[float, list[Any]]:
    """Run ``fn(worker_index)`` in ``n`` children that have become ``user``, released at
    once; return (seconds from release until the last one finished, their results).

    Each result must be JSON-serialisable; each child reports its own finishing time
    (CLOCK_MONOTONIC is shared by all processes).
    """
    entry = pwd.getpwnam(user)
    go_read, go_write = os.pipe()
    kids: list[tuple[int, int]] = []
    for index in range(n):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                os.close(read_fd)
                os.close(go_write)
                os.initgroups(user, entry.pw_gid)
                os.setgid(entry.pw_gid)
                os.setuid(entry.pw_uid)
                os.read(go_read, 1)  # EOF when the parent releases everyone
                result = fn(index)
                done = time.monotonic()
                with os.fdopen(write_fd, "w") as out:
                    json.dump({"done": done, "result": result}, out)
            except BaseException as exc:  # noqa: B036 - report anything, then leave the child
                os.write(2, f"worker {index}: {exc!r}\n".encode())
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        kids.append((pid, read_fd))
    os.close(go_read)
    time.sleep(0.3)  # let every child reach its read
    released = time.monotonic()
    os.close(go_write)
    results: list[Any] = []
    finished = released
    failed = 0
    for pid, read_fd in kids:
        with os.fdopen(read_fd) as src:
            text = src.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not text:
            failed += 1
            continue
        doc = json.loads(text)
        finished = max(finished, doc["done"])
        results.append(doc["result"])
    if failed:
        raise RuntimeError(f"{failed} of {n} workers failed")
    return finished - released, results
