"""The suite's parallel pass keeps each booted-container module on one worker (its
containers and the order of its tests with it): tests/conftest.py names a group per
module, and pytest-xdist's ``--dist loadgroup`` must honour it. A pytest or xdist that
silently stops grouping (pytest 9.2 did: pytest-dev/pytest-xdist#1386) fails here, not as
a module whose second test finds the first test's containers gone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.unit.repo.test_contracts import ROOT

MODULE = """
import time
def test_one(): time.sleep(0.2)
def test_two(): time.sleep(0.2)
def test_three(): time.sleep(0.2)
"""


def test_each_container_module_runs_on_one_worker(tmp_path: Path) -> None:
    """Three modules where the container suites live, run with ``-n 2 --dist loadgroup``
    under the suite's own conftest: every test of a module runs on the same worker."""
    tests = tmp_path / "tests"
    (tests / "integration").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "__init__.py").write_text("")
    for name in ("alpha", "beta", "gamma"):
        (tests / "integration" / f"test_{name}.py").write_text(MODULE)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["integration: x", "slow: x", "serial: x"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadgroup", "-v", "tests/integration"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
    )
    ran = re.findall(r"\[(gw\d)\].*PASSED tests/integration/test_(\w+)\.py", done.stdout)
    assert len(ran) == 9, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in ran:
        workers[module].add(worker)
    assert all(len(used) == 1 for used in workers.values()), dict(workers)
