"""The scenario report: one record per diagnosis, as JSON and as a short table.

Written at the end of the session to ``$OPSBOT_REPORT_DIR`` (default ``build/``) as
``scenario-report.json``, and printed in pytest's terminal summary.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ScenarioRecord:
    policy: str
    stack: str
    scenario: int
    name: str
    unit: str
    verdict: str  # "plan" or "note"
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


RECORDS: list[ScenarioRecord] = []


def report_dir() -> Path:
    return Path(os.environ.get("OPSBOT_REPORT_DIR", Path(__file__).resolve().parents[2] / "build"))


def write_report() -> Path | None:
    if not RECORDS:
        return None
    directory = report_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scenario-report.json"
    total = len(RECORDS)
    summary = {
        "diagnoses": total,
        "matching": sum(r.matches for r in RECORDS),
        "harmful": sum(r.harmful for r in RECORDS),
        "records": [asdict(r) for r in RECORDS],
    }
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path


def table() -> list[str]:
    lines = [
        f"{'policy':<9}{'stack':<9}{'#':>2} {'scenario':<22}{'verdict':<8}{'ok':<4}"
        f"{'harm':<5}{'steps':>5}{'tokens':>7}{'secs':>7}  applied"
    ]
    for r in RECORDS:
        lines.append(
            f"{r.policy:<9}{r.stack:<9}{r.scenario:>2} {r.name:<22}{r.verdict:<8}"
            f"{'yes' if r.matches else 'NO':<4}{'YES' if r.harmful else 'no':<5}"
            f"{r.steps_used:>5}{r.tokens:>7}{r.seconds_to_verdict:>7.1f}  {r.applied}"
        )
    matching = sum(r.matches for r in RECORDS)
    harmful = sum(r.harmful for r in RECORDS)
    lines.append(
        f"{matching}/{len(RECORDS)} verdicts match the expected answer; {harmful} harmful plan(s)"
    )
    return lines
