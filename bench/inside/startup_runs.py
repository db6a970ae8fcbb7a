"""Inside the container: the executor's cold start (first connection to a stopped,
socket-activated executor until its reply), and both daemons' VmRSS idle and after many
requests. Prints JSON.

    startup_runs.py --cold-runs 12 --requests 1000 --diagnose-seconds 120 --unit UNIT
                    [--stored 10000]

Then a store of ``--stored`` plans: the executor started again over it, idle, its list
timed (the 200 newest, as `opsbot plans` asks) against the list over the few hundred
plans the mix stored, and its RSS after 100 lists and 100 submits more.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from _util import (
    EXECUTOR_SOCKET,
    exchange,
    main_pid,
    restart_plan,
    run,
    submit_line,
    timed,
    vmrss_kb,
)

from shared_io import framing
from shared_schema import MAX_MESSAGE_BYTES

DIAGNOSE_SOCKET = "/run/opsbot/diagnose.sock"
LIST = b'{"v":1,"op":"list"}\n'


def rss(unit: str) -> dict[str, Any]:
    time.sleep(1.0)  # let finished connection threads go
    pid = main_pid(unit)
    with open(f"/proc/{pid}/status") as fh:
        threads = next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))
    return {"pid": pid, "vmrss_kb": vmrss_kb(pid), "threads": threads}


def diagnose(unit: str) -> str:
    """One diagnosis over the diagnose socket, as `opsbot diagnose` asks for it; the
    verdict's kind."""
    request = json.dumps({"v": 1, "op": "diagnose", "unit": unit}).encode() + b"\n"
    for line in framing.stream(DIAGNOSE_SOCKET, request, limit=MAX_MESSAGE_BYTES, timeout=120):
        doc = json.loads(line)
        if doc.get("event") == "diagnose.verdict":
            return str(doc["verdict"]["kind"])
        if doc.get("event") == "diagnose.error":
            raise RuntimeError(f"diagnosis failed: {doc}")
    raise RuntimeError("no verdict")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cold-runs", type=int, default=12)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--diagnose-seconds", type=float, default=120)
    p.add_argument("--unit", required=True)
    p.add_argument("--stored", type=int, default=10000)
    args = p.parse_args()
    out: dict[str, Any] = {}

    # -- executor cold start ---------------------------------------------------------------
    cold: list[float] = []
    for _ in range(args.cold_runs + 1):  # the first one (page cache) is not counted
        run(["systemctl", "stop", "opsbot-executor.service"])
        state = run(["systemctl", "show", "-P", "ActiveState", "opsbot-executor.service"])
        if state.stdout.strip() != "inactive":
            raise RuntimeError(f"executor not stopped: {state.stdout}")
        started = time.perf_counter()
        reply = exchange(EXECUTOR_SOCKET, LIST)
        cold.append(time.perf_counter() - started)
        if json.loads(reply).get("verdict") != "PLANS":
            raise RuntimeError(f"unexpected reply {reply[:200]!r}")
    out["cold_start_s"] = cold[1:]
    # Warm round trips of the same request, for comparison.
    warm = []
    for _ in range(20):
        started = time.perf_counter()
        exchange(EXECUTOR_SOCKET, LIST)
        warm.append(time.perf_counter() - started)
    out["warm_list_s"] = warm
    # Where a cold start's time goes: the interpreter, and importing the daemon.
    for name, code in (
        ("python_startup_s", "pass"),
        ("import_daemon_s", "import executor_svc.daemon"),
    ):
        samples = []
        for _ in range(7):
            elapsed, _ = timed(["/opt/opsbot/venv/bin/python", "-c", code])
            samples.append(elapsed)
        out[name] = samples

    # -- executor memory -------------------------------------------------------------------
    # First submits only (a fresh executor, a fresh store), to tell growth per request
    # from the high-water mark of answering `list` over hundreds of stored plans.
    run(["systemctl", "stop", "opsbot-executor.service"])
    run(["systemctl", "start", "opsbot-executor.service"])
    out["submits_only_idle"] = rss("opsbot-executor.service")
    for i in range(args.requests):
        line = submit_line(restart_plan(f"bench memory, submits only #{i}", [args.unit]))
        if json.loads(exchange(EXECUTOR_SOCKET, line)).get("verdict") != "ACCEPT":
            raise RuntimeError("a submit was not accepted")
    out["submits_only_after"] = rss("opsbot-executor.service")
    run(["systemctl", "stop", "opsbot-executor.service"])
    for name in os.listdir("/var/lib/opsbot/plans"):
        os.unlink(f"/var/lib/opsbot/plans/{name}")
    # Then the mix: 4 submits to 1 list.
    run(["systemctl", "start", "opsbot-executor.service"])
    out["executor_idle"] = rss("opsbot-executor.service")
    kinds = {"submit": 0, "list": 0}
    trajectory = []
    for i in range(args.requests):
        if i % 100 == 0:
            trajectory.append(vmrss_kb(main_pid("opsbot-executor.service")))
        if i % 5 == 4:
            line = LIST
            kinds["list"] += 1
        else:
            line = submit_line(restart_plan(f"bench memory #{i}", [args.unit]))
            kinds["submit"] += 1
        reply = json.loads(exchange(EXECUTOR_SOCKET, line))
        if reply.get("verdict") not in ("ACCEPT", "PLANS"):
            raise RuntimeError(f"unexpected reply {reply}")
        if i == 9:
            out["executor_warm"] = rss("opsbot-executor.service")
    out["executor_after"] = rss("opsbot-executor.service")
    out["executor_trajectory_kb"] = trajectory
    out["executor_requests"] = kinds
    if out["executor_after"]["pid"] != out["executor_idle"]["pid"]:
        raise RuntimeError("the executor restarted during the run")

    # -- a big store ----------------------------------------------------------------------
    # The baseline: the list over the store the mix left (a few hundred plans).
    out["small_stored"] = len(os.listdir("/var/lib/opsbot/plans"))
    small_lists = []
    for _ in range(100):
        started = time.perf_counter()
        exchange(EXECUTOR_SOCKET, LIST)
        small_lists.append(time.perf_counter() - started)
    out["small_list_s"] = small_lists
    have = len(os.listdir("/var/lib/opsbot/plans"))
    for i in range(max(0, args.stored - have)):
        line = submit_line(restart_plan(f"bench store #{i}", [args.unit]))
        if json.loads(exchange(EXECUTOR_SOCKET, line)).get("verdict") != "ACCEPT":
            raise RuntimeError("a submit was not accepted")
    run(["systemctl", "stop", "opsbot-executor.service"])
    run(["systemctl", "start", "opsbot-executor.service"])
    out["stored"] = len(os.listdir("/var/lib/opsbot/plans"))
    out["stored_idle"] = rss("opsbot-executor.service")
    time.sleep(5)  # what the submits set going (the notifier) has settled, as for the baseline
    big_lists = []
    for _ in range(100):  # as the baseline's: lists only, one after another
        started = time.perf_counter()
        reply = json.loads(exchange(EXECUTOR_SOCKET, LIST))
        big_lists.append(time.perf_counter() - started)
        if reply.get("verdict") != "PLANS":
            raise RuntimeError(f"unexpected reply {str(reply)[:200]}")
    for i in range(100):
        line = submit_line(restart_plan(f"bench store, more #{i}", [args.unit]))
        if json.loads(exchange(EXECUTOR_SOCKET, line)).get("verdict") != "ACCEPT":
            raise RuntimeError("a submit was not accepted")
    out["stored_list_s"] = big_lists
    out["stored_listed"] = len(reply["plans"])
    out["stored_after"] = rss("opsbot-executor.service")

    # -- diagnose memory -------------------------------------------------------------------
    run(["systemctl", "start", "opsbot-diagnose.service"])
    out["diagnose_idle"] = rss("opsbot-diagnose.service")
    verdicts: dict[str, int] = {}
    times: list[float] = []
    deadline = time.monotonic() + args.diagnose_seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        kind = diagnose(args.unit)
        times.append(time.perf_counter() - started)
        verdicts[kind] = verdicts.get(kind, 0) + 1
        if len(times) == 3:
            out["diagnose_warm"] = rss("opsbot-diagnose.service")
    out["diagnose_after"] = rss("opsbot-diagnose.service")
    out["diagnoses"] = len(times)
    out["diagnose_s"] = times
    out["diagnose_verdicts"] = verdicts
    if out["diagnose_after"]["pid"] != out["diagnose_idle"]["pid"]:
        raise RuntimeError("the diagnose service restarted during the run")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
