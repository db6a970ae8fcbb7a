"""The scenario report is written by each process that ran diagnoses and merged by the
one that reports (tests/scenarios/report.py): what two xdist workers wrote is one report,
with every record of both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.graph_run import CaseRecord
from tests.scenarios import report


def _case(kind: str, seed: int, correct: bool = True) -> CaseRecord:
    return CaseRecord(
        seed=seed,
        kind=kind,
        base=kind,
        depth=0,
        tiers=2,
        nodes=3,
        target="a.service",
        asked_about="a.service",
        expected="plan",
        verdict="plan",
        correct=correct,
    )


def test_two_workers_parts_are_one_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker gw0 ran two cases, gw1 one and a diagnosis scenario: the merged report counts
    all three cases (in seed order), the scenario, and says which run it is."""
    monkeypatch.setenv("OPSBOT_REPORT_DIR", str(tmp_path))
    report.clear_parts()
    monkeypatch.setattr(report, "GENERATED", [_case("killed", 1008), _case("hung", 1011)])
    monkeypatch.setattr(report, "RECORDS", [])
    monkeypatch.setattr(report, "DAILY", [])
    assert report.write_part("gw0") == tmp_path / "scenario-parts" / "gw0.json"
    monkeypatch.setattr(report, "GENERATED", [_case("masked", 1004, correct=False)])
    scenario = report.ScenarioRecord(
        "runbook", "default", 1, "killed", "app.service", "plan", "plan", True, False, 3, 0, 1.0
    )
    monkeypatch.setattr(report, "RECORDS", [scenario])
    report.write_part("gw1")
    merged = report.merged_parts(report.parts_dir())
    path = report.write_report(merged, run="run-7")
    assert path is not None
    written = json.loads(path.read_text())
    assert written["run"] == "run-7"
    assert [r["seed"] for r in written["generated"]["records"]] == [1004, 1008, 1011]
    assert (written["generated"]["cases"], written["generated"]["correct"]) == (3, 2)
    assert written["scenarios"]["diagnoses"] == 1
    assert any("2/3 correct" in line for line in report.table(merged))


def test_a_process_without_records_writes_no_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that ran no diagnosis leaves nothing to merge, and an empty run writes no
    report over the one an earlier pass of the same run wrote."""
    monkeypatch.setenv("OPSBOT_REPORT_DIR", str(tmp_path))
    for name in ("GENERATED", "RECORDS", "DAILY", "REPLAYED"):
        monkeypatch.setattr(report, name, [])
    assert report.write_part("gw0") is None
    assert report.write_report(report.merged_parts(report.parts_dir())) is None


def _replayed(part: str, replayed: int, agree: int) -> dict[str, object]:
    return {
        "part": part,
        "replayed": replayed,
        "agree": agree,
        "not_recorded_calls": 0,
        "failed": 0,
        "skipped": 0,
    }


def test_the_determinism_check_of_each_part_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker replayed its part's recorded diagnoses (tests/scenarios/
    test_generated_faults.py): the merged report counts both parts, in the JSON and in
    the line CI's log shows."""
    monkeypatch.setenv("OPSBOT_REPORT_DIR", str(tmp_path))
    report.clear_parts()
    for name in ("GENERATED", "RECORDS", "DAILY"):
        monkeypatch.setattr(report, name, [])
    monkeypatch.setattr(report, "REPLAYED", [_replayed("generated-a", 40, 40)])
    report.write_part("gw0")
    monkeypatch.setattr(report, "REPLAYED", [_replayed("generated-b", 38, 37)])
    report.write_part("gw1")
    merged = report.merged_parts(report.parts_dir())
    path = report.write_report(merged, run="run-8")
    assert path is not None
    written = json.loads(path.read_text())["replay"]
    assert (written["replayed"], written["agree"]) == (78, 77)
    assert [p["part"] for p in written["parts"]] == ["generated-a", "generated-b"]
    assert (
        "replay: 77/78 recorded diagnoses agree (0 calls not recorded, 0 failed, 0 records skipped)"
    ) in report.table(merged)
