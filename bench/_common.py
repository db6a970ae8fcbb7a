"""What every benchmark shares: statistics, the report (table + JSON), the container.

A benchmark builds a :class:`Report`, adds :class:`Figure` rows (value, baseline measured
in the same run, ratio, the issue's target, met or not) and raw samples, then calls
:meth:`Report.finish`, which prints the table and writes ``bench/results/<name>.json``.

Work that needs systemd runs in a throw-away container (testbed/container.py:
a real systemd booted with systemd-nspawn over an overlay of ``/``) with opsbot installed
as an operator would (packaging/install.sh --offline --enable). Timing loops run *inside*
the container, in a driver script under bench/inside/ (stdlib and opsbot only), so
``nsenter`` costs nothing that is measured; the driver prints one JSON object as its
last line of output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testbed import host
from testbed.container import REPO_MOUNT, REPO_ROOT, BootedSystemd, can_boot

log = logging.getLogger("bench")

RESULTS_DIR = REPO_ROOT / "bench" / "results"
PYTHON = host.PYTHON
OPSBOT = host.OPSBOT
INSIDE = f"{REPO_MOUNT}/bench/inside"


# -- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, median, p90, p99, min, max, mean of ``values`` (for the JSON result)."""
    return {
        "n": len(values),
        "median": median(values),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values) if values else math.nan,
        "max": max(values) if values else math.nan,
        "mean": statistics.fmean(values) if values else math.nan,
    }


def ratio(value: float, baseline: float) -> float:
    return value / baseline if baseline else math.nan


# -- the report ---------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured figure, with its baseline, ratio and target."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if unit == "ms":
        text = f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"
    elif unit in ("MB", "x"):
        text = f"{value:.2f}"
    elif float(value).is_integer() or abs(value) >= 1000:
        text = f"{value:.0f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip() if unit and unit != "x" else text


@dataclass
class Report:
    """Figures and raw data of one benchmark run."""

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table(self) -> str:
        head = ("figure", "value", "baseline", "ratio", "target", "met")
        rows = [head]
        for f in self.figures:
            base = _fmt(f.baseline, f.unit)
            if f.baseline_name and f.baseline is not None:
                base = f"{base} ({f.baseline_name})"
            met = "-" if f.met is None else ("yes" if f.met else "NO")
            rows.append(
                (f.name, _fmt(f.value, f.unit), base, _fmt(f.ratio, "x"), f.target or "-", met)
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def finish(self) -> Path:
        """Print the table and notes; write the JSON result; return its path."""
        print(f"\n== {self.title} ==")
        print(self.table())
        for note in self.notes:
            print(f"note: {note}")
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{self.name}.json"
        doc = {
            "bench": self.name,
            "title": self.title,
            "started_at": datetime.fromtimestamp(self.started, UTC).isoformat(),
            "seconds": round(time.time() - self.started, 1),
            "machine": machine(),
            "figures": [asdict(f) for f in self.figures],
            "notes": self.notes,
            "raw": self.raw,
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(_finite(doc), indent=2, sort_keys=True, default=str) + "\n")
        tmp.replace(path)
        print(f"result: {path}")
        return path


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def machine() -> dict[str, Any]:
    """Where the figures were taken: enough to tell two machines apart."""
    commit = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "python": sys.version.split()[0],
        "git_commit": commit,
    }


# -- command line -------------------------------------------------------------------------


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="fewer runs, for a smoke test")
    p.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    return p


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )


def require_container() -> None:
    ok, why = can_boot()
    if not ok:
        raise SystemExit(f"bench: cannot boot the systemd container: {why}")


# -- the container ------------------------------------------------------------------------

DEMO_UNIT = """\
[Unit]
Description=opsbot bench target {name}
# Benchmarks restart it many times a minute: no start rate limit.
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/sleep infinity
"""


@contextlib.contextmanager
def booted(**kwargs: Any) -> Iterator[BootedSystemd]:
    """A booted container, powered off and removed afterwards."""
    require_container()
    with BootedSystemd(**kwargs) as ct:
        log.info("booted %s in %.1fs", ct.machine, ct.boot_seconds or 0)
        yield ct


def install_opsbot(
    ct: BootedSystemd,
    config: str,
    units: Sequence[str] = (),
    dropins: Mapping[str, str] | None = None,
) -> None:
    """A ``sleep infinity`` service per name in ``units``, drop-ins
    (``{"opsbot-executor.service": "[Service]..."}``), then opsbot installed as an
    operator would (testbed.host.install_opsbot) with ``config``, and the units started."""
    for name in units:
        ct.write_file(f"/etc/systemd/system/{name}", DEMO_UNIT.format(name=name))
    for unit, text in (dropins or {}).items():
        ct.write_file(f"/etc/systemd/system/{unit}.d/50-bench.conf", text)
    host.install_opsbot(ct, config)
    if units:
        ct.systemctl("start", *units)


def inside(
    ct: BootedSystemd,
    script: str,
    *args: str,
    user: str | None = None,
    timeout: float = 1800,
    env: Mapping[str, str] | None = None,
) -> Any:
    """Run ``bench/inside/<script>`` in the container with opsbot's Python; return the
    JSON object it printed last."""
    environ = {"PYTHONPATH": REPO_MOUNT, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    proc = ct.run([PYTHON, f"{INSIDE}/{script}", *args], user=user, timeout=timeout, env=environ)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"{script} printed nothing; stderr:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def ms(seconds: Sequence[float]) -> list[float]:
    return [s * 1000 for s in seconds]
