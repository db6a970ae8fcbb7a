"""The generated suite's gate (testbed/graph_faults.py): a fixed set of cases, each a
fault kind and a seed, that covers the taxonomy and keeps every case's kind when a kind
is added."""

from __future__ import annotations

import pytest

from testbed import graph_faults
from testbed.graph import generate, renamed, unit_file, unit_text
from testbed.graph_faults import (
    CARRIED_PER_KIND,
    CI_GATE,
    FULL_GATE,
    GATE,
    GATE_CASES,
    KINDS,
    NOT_COVERED,
    carried,
    case_graph,
    cases,
    daily_case,
    gate_named,
)


def test_every_kind_has_ten_cases_in_the_full_gate_and_its_carried_three_in_ci() -> None:
    """Each kind this host can produce is judged at least ten times in the full gate
    (scripts/gate --full) and, on every push, on its three carried seeds (the first of
    its seeds, whose plans are applied and verified); none is left out of either."""
    assert set(GATE) == set(FULL_GATE) == set(CI_GATE) == set(KINDS) - set(NOT_COVERED)
    assert all(len(seeds) >= 4 for seeds in GATE.values())
    assert all(len(seeds) >= 10 for seeds in FULL_GATE.values())
    assert all(FULL_GATE[kind][: len(seeds)] == seeds for kind, seeds in GATE.items())
    for kind, seeds in CI_GATE.items():
        assert seeds == FULL_GATE[kind][:CARRIED_PER_KIND]
        assert all(carried(kind, seed) for seed in seeds)
    assert len(cases(CI_GATE)) == CARRIED_PER_KIND * len(CI_GATE)


def test_the_gate_is_chosen_by_name_and_a_wrong_name_is_an_error() -> None:
    """OPSBOT_GATE unset is CI's gate, ``full`` every seed; a name the suite does not know
    (a typo of ``full``) fails loudly instead of running fewer cases."""
    assert gate_named("") is CI_GATE and gate_named("ci") is CI_GATE
    assert gate_named("full") is FULL_GATE
    with pytest.raises(ValueError, match="OPSBOT_GATE='ful': expected one of ci, full"):
        gate_named("ful")


def test_no_seed_is_used_twice() -> None:
    """A seed is one graph: two cases on one seed would be one case judged twice."""
    seeds = [seed for _, seed in cases(FULL_GATE)]
    assert len(seeds) == len(set(seeds)) >= 10 * len(FULL_GATE)


def test_adding_a_kind_changes_no_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new kind appended to the taxonomy leaves every existing case as it was: the same
    fault, target node and unit asked about (the kind is stated with the case, never
    computed from the seed and the number of kinds)."""

    def faults() -> list[tuple[str, str, str]]:
        out = []
        for kind, seed in GATE_CASES:
            base, target, asked = graph_faults.choose(seed, case_graph(kind, seed), kind)
            out.append((base, target.unit, asked))
        return out

    before = faults()
    monkeypatch.setattr(graph_faults, "KINDS", (*KINDS, "new_kind"))
    assert faults() == before


def test_the_day_s_case_goes_round_the_taxonomy() -> None:
    """The daily case takes the day as its seed and a kind that changes from day to day."""
    kinds = {daily_case(20261200 + day)[0] for day in range(1, len(KINDS) + 1)}
    assert kinds == set(KINDS)
    assert daily_case(20261202)[1] == 20261202


def test_a_ports_only_graph_declares_nothing_to_systemd() -> None:
    """The kinds about undeclared dependencies get the same shapes with no Requires=,
    Wants=, BindsTo= or After= between nodes: only each node's config names its
    upstreams' ports."""
    for kind in graph_faults.PORTS_ONLY:
        graph = case_graph(kind, GATE[kind][0])
        assert any(node.deps for node in graph.nodes)
        for node in graph.nodes:
            text = unit_text(graph, node)
            assert not any(
                line.startswith(("Requires=", "Wants=", "BindsTo=", "After="))
                for line in text.splitlines()
            ), text


def test_a_member_down_case_has_a_balancer_over_two_members() -> None:
    """member_down: one node balances over two members reached by port; the one that
    fails is one of them, and the balancer stays healthy while the other is up."""
    for seed in GATE["member_down"]:
        graph = case_graph("member_down", seed)
        balancer = graph.node(graph.extra["balancer"])
        assert balancer.balance and len(balancer.deps) >= 2
        assert graph.extra["member"] in {dep for dep, _ in balancer.deps}


def test_an_instance_down_case_balances_over_two_instances_of_one_template() -> None:
    """instance_down: the two members are instances 1 and 2 of one template unit, whose
    one file says %i where an instance's name goes; every other node is as in
    member_down, and a rename keeps the two instances of one (new) template."""
    for seed in GATE["instance_down"]:
        graph = case_graph("instance_down", seed)
        balancer = graph.node(graph.extra["balancer"])
        members = [graph.node(dep) for dep, _ in balancer.deps if "@" in dep]
        assert {m.template for m in members} == {members[0].template}
        assert sorted(m.unit.split("@")[1] for m in members) == ["1.service", "2.service"]
        assert graph.extra["member"] in {m.name for m in members}
        paths = {unit_file(graph, m) for m in members}
        [(path, text)] = paths
        assert path.endswith(members[0].template) and "%i" in text
        assert members[0].name not in text
        plain = case_graph("member_down", seed)
        assert [n.port for n in graph.nodes] == [n.port for n in plain.nodes]
        other = renamed(graph, 7)
        assert len({other.node(m).template for m in (n.name for n in other.nodes) if "@" in m}) == 1


def test_a_renamed_graph_shares_no_name_port_or_program() -> None:
    """The rename test's graph: the same shape, every name, port and the program drawn
    anew."""
    graph = case_graph("member_down", 2020)
    other = renamed(graph, 7)
    assert [len(n.deps) for n in other.nodes] == [len(n.deps) for n in graph.nodes]
    assert not {n.name for n in graph.nodes} & {n.name for n in other.nodes}
    assert not {n.port for n in graph.nodes} & {n.port for n in other.nodes}
    assert other.program != graph.program
    assert other.extra["member"] in {n.name for n in other.nodes}
    assert generate(2020).nodes[0].name in {n.name for n in graph.nodes}
