"""Inside the container: submit latency and throughput over the executor's real socket,
against a floor (echo + one fsync, bench/inside/echo_server.py). Prints JSON.

    submit_runs.py --single 2000 --clients 16 --per-client 150 --unit UNIT

Clients run as opsbot-diagnose, one connection per submit (as diagnose_svc's
ExecutorClient does). Every plan is distinct (its goal names the run, worker and number).
Single-client runs are done in 10 blocks, concurrent ones in 3 rounds, alternating the
executor and the floor. Afterwards: every ACCEPT's plan_id unique, none a duplicate, and
every plan file present in /var/lib/opsbot/plans.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from _util import EXECUTOR_SOCKET, exchange, fork_workers, restart_plan, submit_line

ECHO_SOCKET = "/run/opsbot-bench/echo.sock"
PYTHON = "/opt/opsbot/venv/bin/python"
USER = "opsbot-diagnose"


def worker(path: str, tag: str, unit: str, count: int) -> Any:
    def run(index: int) -> dict[str, Any]:
        latencies: list[float] = []
        ids: list[str] = []
        bad: list[str] = []
        for j in range(count):
            line = submit_line(restart_plan(f"bench {tag} w{index} #{j}", [unit]))
            started = time.perf_counter()
            reply = exchange(path, line)
            latencies.append(time.perf_counter() - started)
            if path == ECHO_SOCKET:
                if reply + b"\n" != line:
                    bad.append("echo mismatch")
                continue
            doc = json.loads(reply)
            if doc.get("verdict") != "ACCEPT" or doc.get("duplicate"):
                bad.append(reply.decode()[:300])
            else:
                ids.append(doc["plan_id"])
        return {"latencies": latencies, "ids": ids, "bad": bad}

    return run


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--single", type=int, default=2000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--per-client", type=int, default=150)
    p.add_argument("--unit", required=True)
    p.add_argument("--echo-dir", default="/var/lib/opsbot-bench/echo")
    args = p.parse_args()
    os.makedirs(os.path.dirname(ECHO_SOCKET), exist_ok=True)
    echo = subprocess.Popen(
        [
            PYTHON,
            os.path.join(os.path.dirname(__file__), "echo_server.py"),
            ECHO_SOCKET,
            args.echo_dir,
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if os.path.exists(ECHO_SOCKET):
                break
            time.sleep(0.05)
        nonce = uuid.uuid4().hex[:8]
        targets = {"executor": EXECUTOR_SOCKET, "floor": ECHO_SOCKET}
        out: dict[str, Any] = {}
        ids: list[str] = []
        bad: list[str] = []
        # Warm-up: starts the executor (socket activation) and the floor; not counted.
        for path in targets.values():
            _, res = fork_workers(USER, 1, worker(path, f"{nonce} warm", args.unit, 20))
            ids += res[0]["ids"]
            bad += res[0]["bad"]
        for mode, workers, per_worker, rounds in (
            ("single", 1, args.single // 10, 10),
            ("concurrent", args.clients, args.per_client // 3, 3),
        ):
            for name in targets:
                out[f"{mode}_{name}"] = {"latencies": [], "walls": [], "count": 0}
            for r in range(rounds):
                order = list(targets) if r % 2 == 0 else list(targets)[::-1]
                for name in order:
                    wall, results = fork_workers(
                        USER,
                        workers,
                        worker(targets[name], f"{nonce} {mode} r{r}", args.unit, per_worker),
                    )
                    slot = out[f"{mode}_{name}"]
                    slot["walls"].append(wall)
                    for res in results:
                        slot["latencies"] += res["latencies"]
                        slot["count"] += len(res["latencies"])
                        ids += res["ids"]
                        bad += res["bad"]
        missing = [i for i in ids if not os.path.exists(f"/var/lib/opsbot/plans/{i}.json")]
        stored = len([n for n in os.listdir("/var/lib/opsbot/plans") if n.endswith(".json")])
        out["check"] = {
            "accepted": len(ids),
            "unique_ids": len(set(ids)),
            "bad_replies": len(bad),
            "bad_examples": bad[:5],
            "missing_files": len(missing),
            "plan_files": stored,
        }
        print(json.dumps(out))
    finally:
        echo.terminate()
        echo.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
