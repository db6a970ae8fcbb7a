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
day for whoever reads the report. Last in each part, on its container, the determinism
check: every diagnosis the part's cases recorded, replayed through the same version and
the config it ran under, agrees (the report's ``replay:`` line).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator

import pytest

from testbed import graph as graphs
from testbed.container import BootedSystemd
from testbed.graph_faults import GATE_CASES, Kind, carried, case_graph, daily_case
from testbed.graph_run import CaseRecord, run_case
from testbed.host import PYTHON
from tests.scenarios.parts import PARTS, parted
from tests.scenarios.report import DAILY, GENERATED, REPLAYED

#: Where the diagnose service keeps its record of every diagnosis (diagnose_svc/record.py).
RECORDS_DIR = "/var/lib/opsbot-diagnose/records"
#: Where each case's opsbot.toml is kept for the replay of its diagnoses.
CONFIGS_DIR = "/var/tmp/opsbot-replay"
#: Each part's cases that this process ran: the config a case ran under (its path in the
#: container) and the run ids of the diagnoses it recorded (the operator's, verify's
#: follow-ups).
CASES_RECORDED: dict[str, list[tuple[str, list[str]]]] = {}
_SEEN: set[str] = set()
#: How many records the container held before this module's first case (listed once).
_BEFORE: list[int] = []


def _listed(ct: BootedSystemd) -> list[str]:
    listed = ct.run(["ls", "-1", RECORDS_DIR], check=False).stdout.split()
    return [n for n in listed if n.endswith(".json.gz")]


def _records_of(ct: BootedSystemd, part: str) -> None:
    """The records the diagnoses since the last call left, kept with the config they ran
    under (a copy of it) for :func:`test_recorded_diagnoses_replay_the_same`: one `ls`,
    and one `install` when there are new ones."""
    names = _listed(ct)
    new = sorted(n.removesuffix(".json.gz") for n in names if n not in _SEEN)
    _SEEN.update(names)
    if not new:
        return
    config = f"{CONFIGS_DIR}/{new[0]}.toml"
    ct.run(["install", "-D", "-m", "0600", "/etc/opsbot/opsbot.toml", config])
    CASES_RECORDED.setdefault(part, []).append((config, new))


@pytest.fixture
def recorded(
    graph_host: BootedSystemd, request: pytest.FixtureRequest
) -> Iterator[Callable[[], None]]:
    """After a case (and whenever a test that runs two calls it between them): the
    records its diagnoses left, with the config they ran under."""
    marker = request.node.get_closest_marker("xdist_group")
    part = str(marker.args[0]) if marker is not None else PARTS[0]
    if not _BEFORE:  # what tests of other modules left on this container is no case's
        _SEEN.update(_listed(graph_host))
        _BEFORE.append(len(_SEEN))

    def kept() -> None:
        _records_of(graph_host, part)

    yield kept
    kept()


def _explain(record: CaseRecord) -> str:
    return (
        f"seed {record.seed} ({record.kind}, {record.tiers} tiers, fault at {record.target}, "
        f"asked about {record.asked_about}): expected {record.expected}, got "
        f"{record.verdict} {record.plan_steps}; {record.problems}"
    )


@pytest.mark.parametrize(("kind", "seed"), parted(GATE_CASES))
def test_generated_case_does_no_harm_and_its_plans_restore_health(
    graph_host: BootedSystemd, recorded: Callable[[], None], kind: Kind, seed: int
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
def test_todays_seed_is_reported(graph_host: BootedSystemd, recorded: Callable[[], None]) -> None:
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
    graph_host: BootedSystemd, recorded: Callable[[], None], kind: Kind, seed: int
) -> None:
    """Every unit, port and the program's path drawn anew: the same verdict (a plan of
    the same steps on the same nodes, or a note of the same cause about the same node),
    since nothing in the runbook is keyed to a name, a port or a program."""
    plain = run_case(graph_host, kind, seed, carry_plans=False)
    recorded()  # the next case runs under another config
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


#: diagnose_svc.replay's command line (what `opsbot replay` runs) once per case's config,
#: in one interpreter: a start-up per case would cost more than every replay together.
_REPLAY = (
    "import json, sys\n"
    "from diagnose_svc.replay import main\n"
    "for config, *ids in json.loads(sys.argv[1]):\n"
    "    main(['--config', config, *ids])\n"
)


@pytest.mark.parametrize(
    "part", [pytest.param(p, marks=pytest.mark.xdist_group(p), id=p.rsplit("/")[-1]) for p in PARTS]
)
def test_recorded_diagnoses_replay_the_same(graph_host: BootedSystemd, part: str) -> None:
    """The determinism check, after the part's cases on their container: every diagnosis
    the daemon recorded, replayed by root through the same version and the config it ran
    under, gives the same verdict, from the record alone (no call it lacks, none failed,
    no record skipped). Its count goes into the scenario report."""
    cases = CASES_RECORDED.get(part, [])
    if not cases:
        pytest.skip("no case of this part ran in this process")
    ran = graph_host.run(
        [PYTHON, "-I", "-c", _REPLAY, json.dumps([[c, *ids] for c, ids in cases])], timeout=300
    )
    reports = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    errors = [r for r in reports if "error" in r]
    assert not errors, errors
    replays = [r for report in reports for r in report["replays"]]
    configs = [c for (c, _), report in zip(cases, reports, strict=True) for _ in report["replays"]]
    skipped = [s for report in reports for s in report["skipped"]]
    played = {
        "part": part,
        "replayed": len(replays),
        "agree": sum(r["agree"] for r in replays),
        "not_recorded_calls": sum(len(r["not_recorded"]) for r in replays),
        "failed": sum(r["error"] is not None for r in replays),
        "skipped": len(skipped),
    }
    REPLAYED.append(played)
    expected = sum(len(ids) for _, ids in cases)
    assert played["replayed"] == expected and not skipped, (played, skipped)
    differ = [
        f"{r['run_id']} ({r['unit']}, {config}): then {r['then']}, now {r['now']}; "
        f"not recorded {r['not_recorded']}; {r['error']}"
        for r, config in zip(replays, configs, strict=True)
        if not r["agree"] or r["not_recorded"] or r["error"]
    ]
    assert not differ, differ
