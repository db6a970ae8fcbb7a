"""The scenario report of this run, merged from every xdist worker: it counts every case
of the generated suite's gate, whichever worker ran it. Runs in the serial pass, after
the parallel pass that ran the suite (scripts/test), and reads the report that pass
wrote; the run's id tells it is this run's and not an older one's."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from testbed.daemon_faults import DAEMON_CASES
from testbed.graph_faults import GATE_CASES
from testbed.skips import skip_unless
from tests.scenarios.report import report_dir


def _this_runs_report() -> dict[str, Any]:
    run = os.environ.get("OPSBOT_TEST_RUN", "")
    skip_unless(bool(run), "run by scripts/test, which runs the suite and then this check")
    path = report_dir() / "scenario-report.json"
    assert path.exists(), f"{path}: the parallel pass wrote no scenario report"
    report: dict[str, Any] = json.loads(path.read_text())
    assert report["run"] == run, f"{path} is another run's ({report['run']!r}, not {run!r})"
    return report


@pytest.mark.serial
def test_the_merged_report_counts_every_gate_case() -> None:
    """build/scenario-report.json, written at the end of the parallel pass, holds one
    record for each (kind, seed) of the gate and of the real-software suite: none lost
    between workers, none twice."""
    report = _this_runs_report()
    cases = [(r["kind"], r["seed"]) for r in report["generated"]["records"]]
    gate = [*GATE_CASES, *DAEMON_CASES]
    assert sorted(cases, key=lambda c: c[1]) == sorted(gate, key=lambda c: c[1])
    assert report["generated"]["cases"] == len(gate)


@pytest.mark.serial
def test_every_part_of_the_gate_replayed_its_diagnoses_the_same() -> None:
    """The determinism check ran after every part of the gate (each part a container of
    its own): at least one recorded diagnosis for each case of the gate that ran, all
    replayed, and all agree."""
    report = _this_runs_report()
    replay = report["replay"]
    gate = set(GATE_CASES)
    diagnosed = [
        r
        for r in report["generated"]["records"]
        if (r["kind"], r["seed"]) in gate and not r["error"]
    ]
    assert replay["replayed"] >= len(diagnosed) > 0, replay
    assert replay["agree"] == replay["replayed"], replay
