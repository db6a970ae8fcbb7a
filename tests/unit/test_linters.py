"""The linters, run as tests: ruff (pyproject's rules) over the packages and the tests,
and mypy --strict (pyproject's configuration) over the packages. They use the binaries
next to the Python running the tests, and skip only when one is not installed."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUFF_TARGETS = [
    "shared_schema",
    "executor_svc",
    "diagnose_svc",
    "tests/unit",
    "tests/support",
    "tests/integration",
]


def lint(tool: str, *args: str) -> None:
    binary = BIN / tool
    if not binary.exists():
        pytest.skip(f"{binary} is not installed (pip install '.[test]' into {BIN.parent})")
    result = subprocess.run(
        [str(binary), *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{tool} {' '.join(args)}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("target", RUFF_TARGETS)
def test_ruff(target: str) -> None:
    """``ruff check`` (E, W, F, I, UP, B; lines up to 100) passes on each package and
    each test tree, so a failure names the tree it is in."""
    assert (ROOT / target).is_dir()
    lint("ruff", "check", "--no-cache", target)


def test_mypy_strict() -> None:
    """``mypy`` with pyproject's configuration (strict, pydantic plugin) passes on
    shared_schema, executor_svc and diagnose_svc."""
    lint("mypy")
