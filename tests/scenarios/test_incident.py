"""One incident from symptom to fix, on the real systemd: a backend dies under a client
that keeps a dead session (testbed/services/node.py ``session``). Starting the backend
is right for the backend and not for the symptom: verification says UNRESOLVED naming
the target that still fails, the follow-up proposes restarting the client, and once
that is approved and applied the incident ends VERIFIED with the site healthy; `opsbot
show` and `opsbot audit` tell the story in order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testbed import graph as graphs
from testbed.container import BootedSystemd
from testbed.graph_run import configure, take_baseline
from testbed.host import approve, diagnose as run_diagnose, opsbot
from tests.scenarios.incidents import follow_up_of, state
from tests.scenarios.parts import PARTS

pytestmark = pytest.mark.xdist_group(PARTS[-1])

#: A graph whose tiers reach each other by port alone (no unit declares a dependency).
SEED = 4001


@pytest.fixture
def session_graph(opsbot_installed: BootedSystemd) -> Any:
    graphs.prepare(opsbot_installed)
    graph, client, backend = graphs.with_session(graphs.generate(SEED, ports_only=True))
    graphs.install(opsbot_installed, graph)
    configure(opsbot_installed, graph.opsbot_config())
    yield graph, client, backend
    graphs.uninstall(opsbot_installed, graph)


def test_a_client_with_a_dead_session_is_found_by_the_follow_up_and_the_incident_verified(
    opsbot_installed: BootedSystemd, session_graph: Any
) -> None:
    """The operator asks about the front after the backend died: start the backend
    (UNRESOLVED: the front still fails), the follow-up restarts the client in the same
    incident, and that ends VERIFIED with every target answering 200."""
    ct = opsbot_installed
    graph, client, backend = session_graph
    assert take_baseline(ct).startswith("baseline")
    ct.systemctl("kill", "--signal=SIGKILL", "--", backend.unit)
    ct.wait_for(
        lambda: graphs.probe_all(ct, graph)[client.name] == 503, timeout=20, what="client 503"
    )
    front = graph.node(graph.front)
    verdict = json.loads(run_diagnose(ct, front.unit, "--json").stdout)["verdict"]
    assert verdict["kind"] == "plan", verdict
    first = verdict["plan_id"]
    assert [(s["tool"], s["args"]["unit"]) for s in verdict["plan"]["steps"]][-1] == (
        "start_unit",
        backend.unit,
    )
    symptom = verdict["plan"]["symptom"]
    assert symptom["unit"] == front.unit and front.name in symptom["health"]

    approve(ct, first)
    assert state(ct, first, "VERIFIED", "UNRESOLVED") == "UNRESOLVED"
    shown = json.loads(opsbot(ct, "show", first, "--json").stdout)
    evidence = shown["summary"]["verification"]["evidence"]
    assert evidence[0].startswith("the symptom is still there: health target"), evidence
    assert graphs.probe_all(ct, graph)[backend.name] == 200  # right for the backend

    second = follow_up_of(ct, first)
    assert second != "none", "the follow-up proposed nothing"
    plan = json.loads(opsbot(ct, "show", second, "--json").stdout)
    assert [(s["tool"], s["args"]["unit"]) for s in plan["plan"]["steps"]] == [
        ("restart_unit", client.unit)
    ]
    assert plan["plan"]["follows"] == first and plan["plan"]["symptom"] == symptom
    assert plan["summary"]["incident"] == first

    approve(ct, second)
    assert state(ct, second, "VERIFIED", "UNRESOLVED") == "VERIFIED"
    assert set(graphs.probe_all(ct, graph).values()) == {200}

    shown = opsbot(ct, "show", second).stdout
    assert f"incident {first}" in shown and f"follows {first}" in shown, shown
    # The incident's story, in order: the first plan, its UNRESOLVED, the second, VERIFIED.
    story = opsbot(ct, "audit", first, "--no-pager").stdout
    events = [e for e in ("plan.accepted", "plan.unresolved", "plan.verified") if e in story]
    assert events == ["plan.accepted", "plan.unresolved", "plan.verified"], story
    at = [story.index(e) for e in events]
    assert at == sorted(at) and story.count("plan.accepted") == 2, story
