"""The scenario report of this run, merged from every xdist worker: it counts every case
of the generated suite's gate, whichever worker ran it. Runs in the serial pass, after
the parallel pass that ran the suite (scripts/test), and reads the report that pass
wrote; the run's id tells it is this run's and not an older one's."""

from __future__ import annotations

import json
import os

import pytest

from testbed.daemon_faults import DAEMON_CASES
from testbed.graph_faults import GATE_CASES
from testbed.skips import skip_unless
from tests.scenarios.report import report_dir


@pytest.mark.serial
def test_the_merged_report_counts_every_gate_case() -> None:
    """build/scenario-report.json, written at the end of the parallel pass, holds one
    record for each (kind, seed) of the gate and of the real-software suite: none lost
    between workers, none twice."""
    run = os.environ.get("OPSBOT_TEST_RUN", "")
    skip_unless(bool(run), "run by scripts/test, which runs the suite and then this check")
    path = report_dir() / "scenario-report.json"
    assert path.exists(), f"{path}: the parallel pass wrote no scenario report"
    report = json.loads(path.read_text())
    assert report["run"] == run, f"{path} is another run's ({report['run']!r}, not {run!r})"
    cases = [(r["kind"], r["seed"]) for r in report["generated"]["records"]]
    gate = [*GATE_CASES, *DAEMON_CASES]
    assert sorted(cases, key=lambda c: c[1]) == sorted(gate, key=lambda c: c[1])
    assert report["generated"]["cases"] == len(gate)
