"""Every benchmark runs on today's behaviour: ``bench/run-all --quick``, the smoke CI runs
beside the tests. Its figures are not judged here (a shared CI machine, busy with the
other tests, is no place for that: docs/development.md says how to read them); a
benchmark that cannot run any more (a plan its history refuses, a verb that changed)
fails."""

from __future__ import annotations

import os
import subprocess

from testbed.container import REPO_ROOT, can_boot
from testbed.skips import skip_unless


def test_every_benchmark_runs_in_its_quick_form() -> None:
    """`bench/run-all --quick` exits 0: each benchmark booted its container, ran its rounds
    and wrote its figures, and the summary lists them."""
    ok, why = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {why}")
    skip_unless(os.geteuid() == 0, "the benchmarks boot containers: run as root")
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "bench" / "run-all"), "--quick"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-6000:]
    assert "could not run" not in said, said[-6000:]
    assert (REPO_ROOT / "bench" / "results" / "summary.json").exists()
