"""One table of every figure in bench/results/*.json; writes bench/results/summary.json.

/opt/opsbot/venv/bin/python -m bench.summary [NAME...]
"""

from __future__ import annotations

import json
import sys

from bench._common import RESULTS_DIR, Figure, Report


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem for p in RESULTS_DIR.glob("*.json") if p.stem != "summary")
    report = Report("summary", "All benchmarks")
    for name in names:
        path = RESULTS_DIR / f"{name}.json"
        if not path.exists():
            report.note(f"{name}: no result ({path} missing)")
            continue
        doc = json.loads(path.read_text())
        for f in doc["figures"]:
            figure = Figure(**f)
            figure.name = f"{name}: {figure.name}"
            report.add(figure)
        report.raw[name] = {"started_at": doc["started_at"], "seconds": doc["seconds"]}
    missed = [f.name for f in report.figures if f.met is False]
    report.note(
        f"targets met: {sum(1 for f in report.figures if f.met)} of "
        f"{sum(1 for f in report.figures if f.met is not None)}"
        + (f"; missed: {'; '.join(missed)}" if missed else "")
    )
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
