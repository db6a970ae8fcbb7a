"""The scenario report: one record per diagnosis, as JSON and as short tables.

Each pytest process that ran diagnoses (an xdist worker, or the one process without
xdist) writes its records at the end of its session to ``scenario-parts/<worker>.json``
under ``$OPSBOT_REPORT_DIR`` (default ``build/``); the process that reports (the xdist
controller, or that one process) merges every part of the run into
``scenario-report.json`` and prints the table in pytest's terminal summary (the hooks are
tests/conftest.py's). The merged report carries the run's id (``$OPSBOT_TEST_RUN``, set
by scripts/test), so a test of a later pass can tell it is this run's. Three parts:

* the nine scenarios, judged (``check == "verdict"``): accuracy counts these;
* the OpenAI-compatible plumbing runs (``check == "plumbing"``): the scripted model sent
  the fault's own answer, so they show the wire handling works, never accuracy;
* the generated fault suite and the real-software suite (testbed/graph_run.py's
  CaseRecord), by fault kind: accuracy, harmful plans, median steps and seconds to
  verdict; the daily seed apart.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.daemon_faults import DAEMON_KINDS
from testbed.graph_faults import KINDS, NOT_COVERED
from testbed.graph_run import CaseRecord


@dataclass
class ScenarioRecord:
    policy: str
    stack: str
    scenario: int
    name: str
    unit: str
    verdict: str  # "plan" or "note: <cause>"
    expected: str
    matches: bool
    harmful: bool
    steps_used: int
    tokens: int
    seconds_to_verdict: float
    plan_steps: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    applied: str = ""  # APPLIED / STALE / ... when the plan was carried on
    health_held_seconds: float = 0.0
    #: "verdict": judged against the fault; "plumbing": a scripted model's answer came through.
    check: str = "verdict"


RECORDS: list[ScenarioRecord] = []
#: The generated cases of the gate (fixed seeds), and the daily seed's.
GENERATED: list[CaseRecord] = []
DAILY: list[CaseRecord] = []
#: The determinism check: each part's recorded diagnoses replayed through the same
#: version and config (replayed, agree, not_recorded_calls, failed, skipped).
REPLAYED: list[dict[str, Any]] = []


def report_dir() -> Path:
    return Path(os.environ.get("OPSBOT_REPORT_DIR", Path(__file__).resolve().parents[2] / "build"))


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


def by_kind(records: Sequence[CaseRecord]) -> dict[str, dict[str, Any]]:
    """Per fault kind: cases, correct, harmful, median steps and seconds to verdict."""
    out: dict[str, dict[str, Any]] = {}
    for kind in (*KINDS, *DAEMON_KINDS):
        rows = [r for r in records if r.kind == kind]
        if not rows:
            continue
        out[kind] = {
            "cases": len(rows),
            "correct": sum(r.correct for r in rows),
            "harmful": sum(r.harmful for r in rows),
            "median_steps": _median([r.steps_used for r in rows]),
            "median_seconds": _median([r.seconds_to_verdict for r in rows]),
        }
    return out


def generated_summary(records: Sequence[CaseRecord]) -> dict[str, Any]:
    return {
        "cases": len(records),
        "correct": sum(r.correct for r in records),
        "harmful": sum(r.harmful for r in records),
        "health_not_held": sum(bool(r.health_problem) for r in records),
        "verified": sum(r.verification == "VERIFIED" for r in records),
        "unresolved": sum(r.verification == "UNRESOLVED" for r in records),
        "verification_wrong": sum(bool(r.verify_problem) for r in records),
        # Each carried plan opens an incident; an UNRESOLVED one has a follow-up plan
        # (not carried) when its follow-up diagnosis proposed one.
        "incidents": sum(bool(r.verification) for r in records),
        "incidents_verified": sum(r.verification == "VERIFIED" for r in records),
        "plans_per_incident": round(
            sum(1 + r.follow_up.startswith("plan") for r in records if r.verification)
            / max(1, sum(bool(r.verification) for r in records)),
            2,
        ),
        "median_seconds_last_step_to_verification": _median(
            [r.verify_seconds for r in records if r.verification]
        ),
        "injection_errors": sum(bool(r.error) for r in records),
        "median_steps": _median([r.steps_used for r in records]),
        "median_seconds_to_verdict": _median([r.seconds_to_verdict for r in records]),
        "by_kind": by_kind(records),
        "not_covered": list(NOT_COVERED),
    }


@dataclass
class Records:
    """The records of one process, or of all of them merged."""

    scenarios: list[ScenarioRecord] = field(default_factory=list)
    generated: list[CaseRecord] = field(default_factory=list)
    daily: list[CaseRecord] = field(default_factory=list)
    replayed: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.scenarios or self.generated or self.daily or self.replayed)

    def as_json(self) -> dict[str, Any]:
        return {
            "scenarios": [asdict(r) for r in self.scenarios],
            "generated": [r.as_json() for r in self.generated],
            "daily": [r.as_json() for r in self.daily],
            "replayed": list(self.replayed),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Records:
        return cls(
            [ScenarioRecord(**r) for r in value["scenarios"]],
            [CaseRecord(**r) for r in value["generated"]],
            [CaseRecord(**r) for r in value["daily"]],
            list(value.get("replayed", [])),
        )


def parts_dir() -> Path:
    return report_dir() / "scenario-parts"


def clear_parts() -> None:
    """Before a run: no part of an earlier run is merged into this one's report."""
    for part in parts_dir().glob("*.json"):
        part.unlink()


def write_part(worker: str) -> Path | None:
    """This process's records (if it has any), as ``scenario-parts/<worker>.json``."""
    mine = Records(list(RECORDS), list(GENERATED), list(DAILY), list(REPLAYED))
    if not mine:
        return None
    directory = parts_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{worker}.json"
    path.write_text(json.dumps(mine.as_json()) + "\n")
    return path


def merged_parts(directory: Path) -> Records:
    """Every part in ``directory``, one run's records together, in a stable order."""
    merged = Records()
    for part in sorted(directory.glob("*.json")):
        records = Records.from_json(json.loads(part.read_text()))
        merged.scenarios += records.scenarios
        merged.generated += records.generated
        merged.daily += records.daily
        merged.replayed += records.replayed
    merged.scenarios.sort(key=lambda r: (r.policy, r.stack, r.scenario, r.check))
    merged.generated.sort(key=lambda r: r.seed)
    merged.replayed.sort(key=lambda r: str(r.get("part", "")))
    return merged


def write_report(records: Records, run: str = "") -> Path | None:
    """The merged report, ``scenario-report.json``; None when no diagnosis ran."""
    if not records:
        return None
    directory = report_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scenario-report.json"
    judged = [r for r in records.scenarios if r.check == "verdict"]
    plumbing = [r for r in records.scenarios if r.check == "plumbing"]
    summary = {
        "run": run,
        "scenarios": {
            "diagnoses": len(judged),
            "matching": sum(r.matches for r in judged),
            "harmful": sum(r.harmful for r in judged),
            "records": [asdict(r) for r in judged],
        },
        "plumbing": {
            "runs": len(plumbing),
            "through": sum(r.matches for r in plumbing),
            "records": [asdict(r) for r in plumbing],
        },
        "generated": {
            **generated_summary(records.generated),
            "records": [r.as_json() for r in records.generated],
        },
        "daily": [r.as_json() for r in records.daily],
        "replay": replay_summary(records.replayed),
    }
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def replay_summary(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The determinism check over every part: recorded diagnoses replayed through the
    same version, and how many agree."""
    counts = ("replayed", "agree", "not_recorded_calls", "failed", "skipped")
    return {**{key: sum(int(p.get(key, 0)) for p in parts) for key in counts}, "parts": list(parts)}


def _scenario_lines(records: Sequence[ScenarioRecord]) -> list[str]:
    lines = [
        f"{'policy':<9}{'stack':<9}{'#':>2} {'scenario':<22}{'verdict':<22}{'ok':<4}"
        f"{'harm':<5}{'steps':>5}{'tokens':>7}{'secs':>7}  applied"
    ]
    for r in records:
        lines.append(
            f"{r.policy:<9}{r.stack:<9}{r.scenario:>2} {r.name:<22}{r.verdict:<22}"
            f"{'yes' if r.matches else 'NO':<4}{'YES' if r.harmful else 'no':<5}"
            f"{r.steps_used:>5}{r.tokens:>7}{r.seconds_to_verdict:>7.1f}  {r.applied}"
        )
    return lines


def table(records: Records) -> list[str]:
    lines: list[str] = []
    judged = [r for r in records.scenarios if r.check == "verdict"]
    plumbing = [r for r in records.scenarios if r.check == "plumbing"]
    if judged:
        lines += _scenario_lines(judged)
        lines.append(
            f"{sum(r.matches for r in judged)}/{len(judged)} verdicts match the expected "
            f"answer; {sum(r.harmful for r in judged)} harmful plan(s)"
        )
    if plumbing:
        lines.append(
            f"plumbing (scripted OpenAI-compatible model, not accuracy): "
            f"{sum(r.matches for r in plumbing)}/{len(plumbing)} answers came through"
        )
    if records.generated:
        s = generated_summary(records.generated)
        lines.append("")
        lines.append(
            f"{'generated fault kind':<22}{'cases':>6}{'correct':>8}{'harm':>5}"
            f"{'steps':>6}{'secs':>6}"
        )
        for kind, row in s["by_kind"].items():
            lines.append(
                f"{kind:<22}{row['cases']:>6}{row['correct']:>8}{row['harmful']:>5}"
                f"{row['median_steps']:>6g}{row['median_seconds']:>6g}"
            )
        percent = 100.0 * s["correct"] / s["cases"]
        lines.append(
            f"generated: {s['correct']}/{s['cases']} correct ({percent:.1f}%), "
            f"{s['harmful']} harmful, {s['health_not_held']} applied plan(s) whose health "
            f"did not hold, median {s['median_steps']:g} steps and "
            f"{s['median_seconds_to_verdict']:g} s to verdict; not covered on this host: "
            f"{', '.join(s['not_covered'])}"
        )
        lines.append(
            f"verification: {s['verified']} VERIFIED, {s['unresolved']} UNRESOLVED, "
            f"{s['verification_wrong']} wrong; median "
            f"{s['median_seconds_last_step_to_verification']:g} s from last step to verdict; "
            f"incidents: {s['incidents_verified']} of {s['incidents']} VERIFIED by their first "
            f"plan, {s['plans_per_incident']:g} plans per incident"
        )
    if records.replayed:
        played = replay_summary(records.replayed)
        lines.append(
            f"replay: {played['agree']}/{played['replayed']} recorded diagnoses agree "
            f"({played['not_recorded_calls']} calls not recorded, {played['failed']} failed, "
            f"{played['skipped']} records skipped)"
        )
    for r in records.daily:
        lines.append(
            f"daily seed {r.seed} ({r.kind}): {'correct' if r.correct else 'WRONG'}"
            f"{', HARMFUL' if r.harmful else ''}; expected {r.expected}, got {r.verdict}"
            + (f"; {'; '.join(r.problems[:2])}" if r.problems else "")
        )
    return lines
