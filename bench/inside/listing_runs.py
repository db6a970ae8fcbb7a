"""Inside the container: the executor's ``list`` over stores of different sizes, and
`opsbot plans` against `python -c pass`. Prints JSON.

    listing_runs.py --sizes 100,1000,10000 --rounds 30 --unit UNIT --root DIR

For each size, a state directory ``DIR/store-SIZE`` filled with that many plans by the
executor's own store (plans.PlanStore.add, as the executor's user: each plan durable, as
a submit leaves it), and an executor of its own on ``/run/opsbot-bench/list-SIZE.sock``
(the installed program as the executor's user, started with systemd-run, over that
directory). Once the stores have not changed for longer than the executor waits before
it keeps a listing (plans._listing.SETTLE_SECONDS), rounds, each over every store in
turn, so that a machine that slows down slows all of them alike:

- ``list`` of the 100 newest (the same 100 plans shown in every store);
- ``list`` as `opsbot plans` asks it (the 200 newest: 100 in the store of 100);
- `opsbot plans` (as root) over the largest store, and `python -c pass`;

then, last, rounds of ``list`` of the 100 newest right after each store's directory
changed (its times touched, as a plan stored or archived moves them): the names are
listed again. Two rounds first of each are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import sys
import time
from typing import Any

from _util import ENV, as_user, exchange, restart_plan, run, timed

SOCKETS = "/run/opsbot-bench"
PYTHON = "/opt/opsbot/venv/bin/python"
OPSBOT = "/opt/opsbot/venv/bin/opsbot"
EXECUTOR_USER = "opsbot-executor"
LIST_100 = b'{"v":1,"op":"list","limit":100}\n'
LIST_DEFAULT = b'{"v":1,"op":"list"}\n'


def fill(state: str, count: int, unit: str) -> bytes:
    """As the executor's user: ``count`` plans stored in ``state`` by plans.PlanStore."""
    from pathlib import Path

    from plans import PlanStore, Provenance, utcnow
    from shared_schema import Plan

    store = PlanStore(Path(state))
    store.ensure()
    diagnose = Provenance(uid=os.getuid(), user="opsbot-diagnose", pid=os.getpid())
    for i in range(count):
        plan = Plan.model_validate(restart_plan(f"bench listing, {count} stored: #{i}", [unit]))
        store.add(plan, diagnose, utcnow())
    return str(len(store.ids())).encode()


def socket_of(size: int) -> str:
    return f"{SOCKETS}/list-{size}.sock"


def listed(path: str, line: bytes) -> tuple[float, int]:
    """Seconds from connect to the whole reply, and how many plans it listed."""
    started = time.perf_counter()
    reply = exchange(path, line)
    seconds = time.perf_counter() - started
    doc = json.loads(reply)
    if doc.get("verdict") != "PLANS":
        raise RuntimeError(f"{path}: not a listing: {reply[:300]!r}")
    return seconds, len(doc["plans"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--unit", required=True)
    p.add_argument("--root", default="/var/lib/opsbot-bench")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    executor = pwd.getpwnam(EXECUTOR_USER)
    os.makedirs(SOCKETS, exist_ok=True)
    os.chown(SOCKETS, executor.pw_uid, executor.pw_gid)
    os.chmod(args.root, 0o755)  # the executor's user goes through it to its store
    out: dict[str, Any] = {"sizes": sizes, "stored": {}, "fill_s": {}}
    for size in sizes:
        state = f"{args.root}/store-{size}"
        os.makedirs(state, mode=0o750, exist_ok=True)
        os.chown(state, executor.pw_uid, executor.pw_gid)
        started = time.perf_counter()
        stored = as_user(EXECUTOR_USER, lambda s=state, n=size: fill(s, n, args.unit))
        out["stored"][size] = int(stored)
        out["fill_s"][size] = time.perf_counter() - started
        run(
            [
                "systemd-run",
                f"--unit=bench-list-{size}",
                f"--uid={EXECUTOR_USER}",
                f"--gid={EXECUTOR_USER}",
                f"--setenv=OPSBOT_STATE_DIR={state}",
                "--setenv=PYTHONDONTWRITEBYTECODE=1",
                "/opt/opsbot/venv/bin/opsbot-executor",
                "--socket",
                socket_of(size),
                "--idle-timeout",
                "0",
            ]
        )
    for size in sizes:
        for _ in range(200):
            if os.path.exists(socket_of(size)):
                break
            time.sleep(0.05)
    # Wait until every store has been quiet long enough for its listing to be kept.
    time.sleep(3.0)
    samples: dict[str, list[float]] = {}
    shown: dict[str, int] = {}

    def keep(name: str, counted: bool, seconds: float) -> None:
        if counted:
            samples.setdefault(name, []).append(seconds)

    largest = max(sizes)
    plans_env = {**ENV, "OPSBOT_SOCKET": socket_of(largest)}
    for round_ in range(args.rounds + 2):
        counted = round_ >= 2
        for size in sizes:
            seconds, count = listed(socket_of(size), LIST_100)
            keep(f"list100_{size}", counted, seconds)
            shown[f"list100_{size}"] = count
        for size in sizes:
            seconds, count = listed(socket_of(size), LIST_DEFAULT)
            keep(f"default_{size}", counted, seconds)
            shown[f"default_{size}"] = count
        seconds, proc = timed([OPSBOT, "plans"], env=plans_env)
        if f"{min(largest, 200)} plans listed." not in proc.stdout:
            raise RuntimeError(f"opsbot plans said: {proc.stdout[-500:]}{proc.stderr[-500:]}")
        keep("opsbot_plans", counted, seconds)
        seconds, _ = timed([PYTHON, "-c", "pass"])
        keep("python_pass", counted, seconds)
    # Last (the stores do not settle again before the end): each list right after its
    # store's directory changed.
    for round_ in range(args.rounds + 2):
        for size in sizes:
            os.utime(f"{args.root}/store-{size}/plans")
            seconds, _ = listed(socket_of(size), LIST_100)
            keep(f"changed_{size}", round_ >= 2, seconds)
    out["samples_s"] = samples
    out["shown"] = shown
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
