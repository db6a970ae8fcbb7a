"""A queue's worker through three incidents, on real redis, nginx or haproxy and a worker
that drains the queue (testbed/daemons.py's queue graph).

The worker is killed and the queue backs up until the front answers 503 ("queue
full"): opsbot starts the worker, not the producer the front reaches, and the incident
ends VERIFIED. Killed again an hour's minutes later, the same steps are a new incident's
fix and are accepted again (they cured the first). Then the worker is made to die a
second after each start (``RuntimeMaxSec=1``, as a bad deploy would): the start ends
UNRESOLVED, its follow-up does not propose it again, and a new diagnosis by the operator
ends in a note that restarting is not fixing the worker (the executor refuses those
very steps while nothing has cured it since), naming the worker's journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from testbed import daemons, graph as graphs
from testbed.container import BootedSystemd
from testbed.daemons import Daemon, DaemonGraph
from testbed.graph_run import configure, take_baseline
from testbed.host import approve, diagnose as run_diagnose, opsbot
from tests.scenarios.incidents import follow_up_of, state
from tests.scenarios.parts import PARTS

pytestmark = pytest.mark.xdist_group(PARTS[0])

#: A queue graph's seed (none of the suite's: 4000-4069).
SEED = 4242


@pytest.fixture
def queue(daemon_host: BootedSystemd) -> Iterator[DaemonGraph]:
    graph = daemons.generate(SEED, "queue")
    daemons.install(daemon_host, graph)
    # A budget that three starts do not spend: the last refusal must be the
    # UNRESOLVED start's own, not the budget's.
    config = graph.opsbot_config(graphs.SETTLE_SECONDS).replace(
        "[executor]\n", "[executor]\nrestart_budget = 10\n", 1
    )
    configure(daemon_host, config)
    yield graph
    daemon_host.run(["rm", "-rf", f"/run/systemd/system/{_worker(graph).unit}.d"])
    daemons.uninstall(daemon_host, graph)


def _worker(graph: DaemonGraph) -> Daemon:
    return graph.by_role("consumer")


def _kill_until_the_front_fails(ct: BootedSystemd, graph: DaemonGraph) -> None:
    worker, front = _worker(graph), graph.daemon(graph.front)
    # (a worker that died by itself already is left as it is)
    ct.systemctl("kill", "--kill-whom=main", "--signal=SIGKILL", "--", worker.unit, check=False)
    ct.wait_for(
        lambda: daemons.probe_all(ct, graph)[front.name] != 200,
        timeout=30,
        what=f"{front.unit} failing once the queue is full",
    )


def _diagnose_front(ct: BootedSystemd, graph: DaemonGraph) -> dict[str, Any]:
    front = graph.daemon(graph.front)
    return dict(json.loads(run_diagnose(ct, front.unit, "--json").stdout)["verdict"])


def _steps(verdict: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["tool"], s["args"]["unit"]) for s in verdict["plan"]["steps"]]


def test_a_worker_killed_twice_is_started_twice_and_one_that_cannot_stay_up_is_left_to_a_human(
    daemon_host: BootedSystemd, queue: DaemonGraph
) -> None:
    """Killed: started, VERIFIED. Killed again: the same start, a new incident, VERIFIED.
    Dying a second after each start: UNRESOLVED, then neither the follow-up nor a new
    diagnosis proposes that start again; the note names the worker."""
    ct, graph = daemon_host, queue
    worker = _worker(graph)
    start = [("start_unit", worker.unit)]
    assert take_baseline(ct).startswith("baseline")

    # 1. The worker dies; the front says the queue is full. Start the worker: VERIFIED.
    _kill_until_the_front_fails(ct, graph)
    first = _diagnose_front(ct, graph)
    assert first["kind"] == "plan" and _steps(first) == start, first
    approve(ct, first["plan_id"])
    assert state(ct, first["plan_id"], "VERIFIED", "UNRESOLVED") == "VERIFIED"
    assert set(daemons.probe_all(ct, graph).values()) == {200}

    # 2. Again: the steps that cured it are a new incident's fix, accepted and VERIFIED.
    _kill_until_the_front_fails(ct, graph)
    second = _diagnose_front(ct, graph)
    assert second["kind"] == "plan" and _steps(second) == start, second
    shown = json.loads(opsbot(ct, "show", second["plan_id"], "--json").stdout)
    assert shown["summary"]["state"] == "PROPOSED"
    assert shown["summary"]["incident"] == second["plan_id"] != first["plan_id"]
    approve(ct, second["plan_id"])
    assert state(ct, second["plan_id"], "VERIFIED", "UNRESOLVED") == "VERIFIED"

    # 3. The worker now dies a second after each start: the start ends UNRESOLVED.
    ct.write_file(
        f"/run/systemd/system/{worker.unit}.d/50-bad-deploy.conf", "[Service]\nRuntimeMaxSec=1\n"
    )
    ct.systemctl("daemon-reload")
    _kill_until_the_front_fails(ct, graph)
    third = _diagnose_front(ct, graph)
    assert third["kind"] == "plan" and _steps(third) == start, third
    approve(ct, third["plan_id"])
    assert state(ct, third["plan_id"], "VERIFIED", "UNRESOLVED") == "UNRESOLVED"

    # Its follow-up does not propose the same start again ...
    follow_up = follow_up_of(ct, third["plan_id"])
    if follow_up != "none":
        again = json.loads(opsbot(ct, "show", follow_up, "--json").stdout)
        assert _steps(again) != start, again
    # ... nor does the operator's next diagnosis: a note for a human, naming the worker.
    _kill_until_the_front_fails(ct, graph)
    fourth = _diagnose_front(ct, graph)
    assert fourth["kind"] == "note", fourth
    assert fourth["cause"]["kind"] == "restarts_not_fixing", fourth
    assert fourth["cause"]["unit"] == worker.unit, fourth
    assert f"journalctl -u {worker.unit}" in fourth["text"], fourth["text"]
