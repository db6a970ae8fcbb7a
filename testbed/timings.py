"""Where the suite's time goes: what each pass of ``scripts/test`` recorded of its tests
(tests/conftest.py writes ``build/timings/PASS.json``: per test its seconds, its xdist
group or file, the worker that ran it, when it started and stopped), printed as the table
``.ci/run`` ends with: each pass's wall time and each worker's busy time, and the slowest
groups or files, so that the next change that costs CI time names itself.

    python -m testbed.timings build/timings --pass set-up=41 --pass parallel=1500 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TestTime", "group_of", "read_pass", "table"]

#: The CI budget in seconds, as docs/development.md states it.
BUDGET_SECONDS = 30 * 60


@dataclass(frozen=True)
class TestTime:
    """One test of a pass: its node id, the group or file it belongs to, its seconds
    (set-up, call and teardown), the worker that ran it, its start and stop (epoch)."""

    nodeid: str
    group: str
    seconds: float
    worker: str
    start: float
    stop: float


def group_of(nodeid: str) -> str:
    """The xdist group a node id names (``path::test@group`` under ``--dist loadgroup``),
    else its file."""
    test, at, group = nodeid.rpartition("@")
    if at and group and "::" in test and "]" not in group and "::" not in group:
        return group
    return nodeid.split("::", 1)[0]


def read_pass(path: Path) -> list[TestTime]:
    """The tests one pass recorded (tests/conftest.py)."""
    records: list[dict[str, Any]] = json.loads(path.read_text())
    return [
        TestTime(
            nodeid=str(r["nodeid"]),
            group=group_of(str(r["nodeid"])),
            seconds=float(r["seconds"]),
            worker=str(r.get("worker") or "main"),
            start=float(r.get("start") or 0.0),
            stop=float(r.get("stop") or 0.0),
        )
        for r in records
    ]


def table(
    walls: Mapping[str, float], passes: Mapping[str, list[TestTime]], top: int = 10
) -> list[str]:
    """The lines of the table: each pass's wall time (and, for a parallel pass, each
    worker's busy time and when it ran its last test), the whole against the budget, and
    the ``top`` slowest groups or files over every pass."""
    lines = ["timings (CI budget: docs/development.md#the-ci-budget)"]
    total = sum(walls.values())
    for name, seconds in walls.items():
        lines.append(f"  {name:<28} {seconds:8.0f} s")
        tests = passes.get(name, [])
        workers = sorted({t.worker for t in tests})
        if len(workers) > 1:
            first = min(t.start for t in tests if t.start) if tests else 0.0
            for worker in workers:
                mine = [t for t in tests if t.worker == worker]
                busy = sum(t.seconds for t in mine)
                last = max((t.stop for t in mine), default=first) - first
                lines.append(
                    f"    worker {worker:<19} {busy:8.0f} s busy, its last test ended at "
                    f"{last:.0f} s"
                )
    verdict = "within" if total <= BUDGET_SECONDS else "OVER"
    budget = f"{verdict} the {BUDGET_SECONDS // 60}-minute budget"
    lines.append(f"  {'whole run':<28} {total:8.0f} s ({budget})")
    lines.append(f"  slowest groups or files (of {sum(len(t) for t in passes.values())} tests):")
    by_group: dict[str, list[TestTime]] = defaultdict(list)
    for tests in passes.values():
        for test in tests:
            by_group[test.group].append(test)
    ranked = sorted(by_group.items(), key=lambda kv: -sum(t.seconds for t in kv[1]))
    for group, tests in ranked[:top]:
        seconds = sum(t.seconds for t in tests)
        lines.append(f"    {seconds:7.0f} s {len(tests):5d} tests  {group}")
    return lines


def _walls(values: Iterable[str]) -> dict[str, float]:
    walls: dict[str, float] = {}
    for value in values:
        name, _, seconds = value.partition("=")
        walls[name] = float(seconds)
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testbed.timings", description="print where the suite's time went"
    )
    parser.add_argument("directory", type=Path, help="where the passes wrote PASS.json")
    parser.add_argument(
        "--pass",
        dest="walls",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="a pass (or the set-up) and its wall time, in the order run",
    )
    args = parser.parse_args(argv)
    walls = _walls(args.walls)
    passes = {}
    for name in walls:
        path = args.directory / f"{name}.json"
        if path.is_file():
            passes[name] = read_pass(path)
    for line in table(walls, passes):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
