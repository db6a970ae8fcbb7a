"""The generated suite's gate (testbed/graph_faults.py): a fixed set of cases, each a
fault kind and a seed, that covers the taxonomy and keeps every case's kind when a kind
is added."""

from __future__ import annotations

import pytest

from testbed import graph_faults
from testbed.graph import generate
from testbed.graph_faults import GATE, GATE_CASES, KINDS, NOT_COVERED, daily_case


def test_every_kind_of_the_taxonomy_has_four_cases_or_more() -> None:
    """Each kind this host can produce is judged at least four times; none is left out."""
    assert set(GATE) == set(KINDS) - set(NOT_COVERED)
    assert all(len(seeds) >= 4 for seeds in GATE.values())


def test_no_seed_is_used_twice() -> None:
    """A seed is one graph: two cases on one seed would be one case judged twice."""
    seeds = [seed for _, seed in GATE_CASES]
    assert len(seeds) == len(set(seeds)) == 60


def test_adding_a_kind_changes_no_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new kind appended to the taxonomy leaves every existing case as it was: the same
    fault, target node and unit asked about (the kind is stated with the case, never
    computed from the seed and the number of kinds)."""

    def faults() -> list[tuple[str, str, str]]:
        out = []
        for kind, seed in GATE_CASES:
            base, target, asked = graph_faults.choose(seed, generate(seed), kind)
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
