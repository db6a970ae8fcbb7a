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

from executor_svc.client import request
from executor_svc.store import PlanStore
from shared_schema import ListPlans, PlanList, parse_reply
from tests.attacks.inproc import daemon_process, memory_kib, plan, report, submit_bytes

CLIENTS = 100
PLANS_EACH = 50
RSS_GROWTH_LIMIT_KIB = 64 * 1024


def test_100_clients_50_plans_each_every_plan_accepted_once(tmp_path: Path) -> None:
    """100 concurrent connections, 50 distinct submits each (5000 plans): every submit
    gets ACCEPT, not a duplicate; the 5000 ids are unique; every plan is on disk, whole
    and verified; `opsbot plans` (the CLI's request) still lists all 5000; and the
    daemon's resident memory grows by less than 64 MiB (before and after reported)."""
    state = tmp_path / "state"
    with daemon_process(tmp_path, state) as (proc, sock):
        warm = request(Path(sock), ListPlans())
        assert isinstance(warm, PlanList) and warm.plans == []
        before = memory_kib(proc.pid)
        replies: list[list[tuple[str, str, bool]]] = [[] for _ in range(CLIENTS)]
        errors: list[BaseException] = []
        gate = threading.Barrier(CLIENTS)

        def client(number: int) -> None:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                    conn.settimeout(60)
                    conn.connect(sock)
                    gate.wait(timeout=30)
                    buffer = b""
                    for index in range(PLANS_EACH):
                        conn.sendall(submit_bytes(plan(f"load: client {number} plan {index}")))
                        while b"\n" not in buffer:
                            chunk = conn.recv(65536)
                            assert chunk, "the executor hung up"
                            buffer += chunk
                        line, buffer = buffer.split(b"\n", 1)
                        reply = parse_reply(line)
                        assert reply.verdict == "ACCEPT", reply
                        replies[number].append((reply.plan_id, reply.sha256, reply.duplicate))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        started = time.monotonic()
        peak_threads = 0
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak_threads = max(peak_threads, memory_kib(proc.pid)["Threads"])
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        assert errors == [], errors[:3]
        after = memory_kib(proc.pid)

        flat = [r for per_client in replies for r in per_client]
        assert len(flat) == CLIENTS * PLANS_EACH
        assert not any(duplicate for _, _, duplicate in flat)
        ids = {plan_id for plan_id, _, _ in flat}
        assert len(ids) == CLIENTS * PLANS_EACH, "two plans got the same id"
        assert len({sha for _, sha, _ in flat}) == CLIENTS * PLANS_EACH

        listing = request(Path(sock), ListPlans(), timeout=120)
        assert isinstance(listing, PlanList)
        assert {p.plan_id for p in listing.plans} == ids
        final = memory_kib(proc.pid)

    store = PlanStore(state)
    assert set(store.ids()) == ids
    for plan_id, sha, _ in flat:
        record = store.load(plan_id)
        assert record.sha256 == sha
        store.verified_plan(record)
    growth = after["VmRSS"] - before["VmRSS"]
    assert growth < RSS_GROWTH_LIMIT_KIB, (before, after)
    report("load", clients=CLIENTS, plans=len(ids), seconds=round(elapsed, 1),
           submits_per_s=round(len(ids) / elapsed), rss_before_kib=before["VmRSS"],
           rss_after_kib=after["VmRSS"], rss_after_list_kib=final["VmRSS"],
           rss_peak_kib=final["VmHWM"], peak_threads=peak_threads, lost=0)
