"""Load: many diagnose clients at once against the real daemon program.

``python -m executor_svc.daemon --socket ...`` runs in a subprocess on a tmp state
directory (so its memory can be read from /proc), and 100 client threads each submit 50
distinct plans over one connection of their own, all at the same time.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from opsbot_cli.clients import request
from plans import PlanStore
from shared_io.framing import LineReader
from shared_schema import MAX_REPLY_BYTES, ListPlans, PlanList, parse_reply
from testbed.inproc import daemon_process, memory_kib, plan, report, submit_bytes

#: Timing and load: run alone, after the parallel pass (scripts/test).
pytestmark = pytest.mark.serial

CLIENTS = 100
WARM_UP_EACH = 5
PLANS_EACH = 50
#: Resident memory the daemon may gain per plan once warm (its index keeps one short
#: entry per open plan; the allocator keeps some slack). A leak of a plan's worth of
#: bytes per submit (several KiB) fails this by far.
GROWTH_PER_PLAN_LIMIT_BYTES = 2048


def test_100_clients_50_plans_each_every_plan_accepted_once(tmp_path: Path) -> None:
    """100 concurrent connections, 50 distinct submits each (5000 plans): every submit
        gets ACCEPT, not a duplicate; the 5000 ids are unique; every plan is on disk, whole
        and verified; `opsbot plans --limit 5000` lists all 5000 (and the default list the 200
    newest, saying there are 5000); and once
        warm (after the first 5 plans of every client: threads and caches made), the
        daemon's resident memory grows by less than 2 KiB per further plan."""
    state = tmp_path / "state"
    with daemon_process(tmp_path, state) as (proc, sock):
        warm = request(Path(sock), ListPlans())
        assert isinstance(warm, PlanList) and warm.plans == []
        before = memory_kib(proc.pid)
        replies: list[list[tuple[str, str, bool]]] = [[] for _ in range(CLIENTS)]
        errors: list[BaseException] = []
        gate = threading.Barrier(CLIENTS)
        warmed = threading.Barrier(CLIENTS + 1)
        finished = threading.Barrier(CLIENTS + 1)
        release = threading.Event()

        def client(number: int) -> None:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                    conn.settimeout(60)
                    conn.connect(sock)
                    reader = LineReader(conn, MAX_REPLY_BYTES)
                    gate.wait(timeout=30)
                    for index in range(PLANS_EACH):
                        if index == WARM_UP_EACH:
                            warmed.wait(timeout=120)
                        conn.sendall(submit_bytes(plan(f"load: client {number} plan {index}")))
                        line = reader.readline(60)
                        assert line is not None, "the executor hung up"
                        reply = parse_reply(line)
                        assert reply.verdict == "ACCEPT", reply
                        replies[number].append((reply.plan_id, reply.sha256, reply.duplicate))
                    finished.wait(timeout=120)
                    release.wait(timeout=120)  # connections still open: measured alike
            except BaseException as exc:
                errors.append(exc)
                warmed.abort()
                finished.abort()
                release.set()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        started = time.monotonic()
        for t in threads:
            t.start()
        warmed.wait(timeout=120)
        # Every client has sent its warm-up plans and waits: the daemon is quiet and warm.
        time.sleep(0.5)
        baseline = memory_kib(proc.pid)
        finished.wait(timeout=300)
        elapsed = time.monotonic() - started
        time.sleep(0.5)
        after = memory_kib(proc.pid)  # the same 100 connections open, all plans stored
        peak_threads = after["Threads"]
        release.set()
        for t in threads:
            t.join(timeout=30)
        assert errors == [], errors[:3]

        flat = [r for per_client in replies for r in per_client]
        assert len(flat) == CLIENTS * PLANS_EACH
        assert not any(duplicate for _, _, duplicate in flat)
        ids = {plan_id for plan_id, _, _ in flat}
        assert len(ids) == CLIENTS * PLANS_EACH, "two plans got the same id"
        assert len({sha for _, sha, _ in flat}) == CLIENTS * PLANS_EACH

        listing = request(Path(sock), ListPlans(limit=CLIENTS * PLANS_EACH), timeout=120)
        assert isinstance(listing, PlanList)
        assert {p.plan_id for p in listing.plans} == ids
        newest = request(Path(sock), ListPlans(), timeout=120)
        assert isinstance(newest, PlanList) and newest.total == CLIENTS * PLANS_EACH
        assert [p.plan_id for p in newest.plans] == sorted(ids)[-200:]
        final = memory_kib(proc.pid)

    store = PlanStore(state)
    assert set(store.ids()) == ids
    for plan_id, sha, _ in flat:
        record = store.load(plan_id)
        assert record.sha256 == sha
        store.verified_plan(record)
    after_warm_up = CLIENTS * (PLANS_EACH - WARM_UP_EACH)
    per_plan = (after["VmRSS"] - baseline["VmRSS"]) * 1024 / after_warm_up
    assert per_plan < GROWTH_PER_PLAN_LIMIT_BYTES, (before, baseline, after)
    report(
        "load",
        clients=CLIENTS,
        plans=len(ids),
        seconds=round(elapsed, 1),
        submits_per_s=round(len(ids) / elapsed),
        rss_before_kib=before["VmRSS"],
        rss_warm_kib=baseline["VmRSS"],
        rss_after_kib=after["VmRSS"],
        rss_growth_per_plan_bytes=round(per_plan),
        rss_after_list_kib=final["VmRSS"],
        rss_peak_kib=final["VmHWM"],
        peak_threads=peak_threads,
        lost=0,
    )
