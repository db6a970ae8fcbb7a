"""The generated fault suite: opsbot on service graphs, names, ports and faults that are
in no test, on the real systemd.

Each case (testbed/graph_faults.py) builds a graph from its seed (2 to 4 tiers, chains and
fan-out, random names, ports, dependency kinds and unit makes), injects one fault of the
taxonomy at a random node, asks opsbot as an operator would, and judges the verdict
against the answer derived from the graph and the fault by construction. The plans of
the first three seeds of each kind (graph_faults.CARRIED_PER_KIND) are approved and
applied by opsbot-apply.path; health must then hold through opsbot-verify's window and
opsbot-verify must end the plan VERIFIED; where the fix cannot hold (relapse),
UNRESOLVED, with one follow-up diagnosis that does not propose the same steps. The
other seeds are judged on their verdict.

The gate is testbed/graph_faults.py's GATE, fixed: each case a fault kind and a seed (a new
kind brings seeds of its own and changes no other case); a case fails on a harmful plan,
an applied plan after which health does not hold or whose verification is wrong, or a
fault that could not be injected. Accuracy is reported,
not asserted: by fault kind, with median steps and seconds to verdict, in the scenario
report (build/scenario-report.json and the table; written by each xdist worker and
merged, tests/scenarios/report.py). One more seed, today's date, is run
and reported and never fails CI (an xfail when its verdict is wrong): a fresh case every
day for whoever reads the report.
"""

from __future__ import annotations

import datetime

import pytest

from testbed import graph as graphs
from testbed.container import BootedSystemd
from testbed.graph_faults import GATE_CASES, Kind, carried, case_graph, daily_case
from testbed.graph_run import CaseRecord, run_case
from tests.scenarios.parts import PARTS, parted
from tests.scenarios.report import DAILY, GENERATED


def _explain(record: CaseRecord) -> str:
    return (
        f"seed {record.seed} ({record.kind}, {record.tiers} tiers, fault at {record.target}, "
        f"asked about {record.asked_about}): expected {record.expected}, got "
        f"{record.verdict} {record.plan_steps}; {record.problems}"
    )


@pytest.mark.parametrize(("kind", "seed"), parted(GATE_CASES))
def test_generated_case_does_no_harm_and_its_plans_restore_health(
    graph_host: BootedSystemd, kind: Kind, seed: int
) -> None:
    """One case of the gate, a fault in a generated graph: opsbot proposes nothing
    harmful, an applied plan's health holds, and its verification says so (or says
    UNRESOLVED where the fix cannot hold)."""
    record = run_case(graph_host, kind, seed, carry_plans=carried(kind, seed))
    GENERATED.append(record)
    assert not record.error, record.error
    assert not record.harmful, _explain(record)
    assert not record.health_problem, f"{record.health_problem}: {_explain(record)}"
    assert not record.verify_problem, f"{record.verify_problem}: {_explain(record)}"


@pytest.mark.xdist_group(PARTS[0])
def test_todays_seed_is_reported(graph_host: BootedSystemd) -> None:
    """Today's seed (YYYYMMDD): run, reported, and an xfail (never a failure) when wrong."""
    kind, seed = daily_case(int(datetime.date.today().strftime("%Y%m%d")))
    record = run_case(graph_host, kind, seed)
    DAILY.append(record)
    wrong = record.error or record.health_problem or record.verify_problem
    if wrong or record.harmful or not record.correct:
        pytest.xfail(_explain(record) + (f"; {record.error}" if record.error else ""))


#: The case renamed: a loop on a backend that only ports link (configured edges, a crash
#: loop, a start), with a plan; and a note (a config error).
RENAMED_CASES = (("loop_on_dependency", 2011), ("config_error", 1013))


@pytest.mark.parametrize(("kind", "seed"), parted(RENAMED_CASES))
def test_a_case_renamed_gets_the_same_verdict(
    graph_host: BootedSystemd, kind: Kind, seed: int
) -> None:
    """Every unit, port and the program's path drawn anew: the same verdict (a plan of
    the same steps on the same nodes, or a note of the same cause about the same node),
    since nothing in the runbook is keyed to a name, a port or a program."""
    plain = run_case(graph_host, kind, seed, carry_plans=False)
    other = run_case(graph_host, kind, seed, carry_plans=False, rename=seed + 7)
    assert not plain.error and not other.error, (plain.error, other.error)
    original = case_graph(kind, seed)
    mapping = dict(
        zip(
            graphs.renamed(original, seed + 7).units,
            original.units,
            strict=True,
        )
    )

    def back(words: str) -> str:
        for new, old in mapping.items():
            words = words.replace(new, old)
        return words

    assert plain.correct, _explain(plain)
    assert (other.verdict, [back(s) for s in other.plan_steps], back(other.target)) == (
        plain.verdict,
        plain.plan_steps,
        plain.target,
    ), _explain(other)
