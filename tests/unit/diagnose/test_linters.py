"""The linters, run as tests: ruff over the package and its tests, mypy --strict over it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _lint(argv: list[str]) -> None:
    if not Path(argv[0]).exists():
        pytest.skip(f"{argv[0]} is not installed")
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff() -> None:
    """ruff (E, W, F, I, UP, B; line length 100) passes on diagnose_svc and its tests."""
    _lint([str(BIN / "ruff"), "check", "diagnose_svc", "tests/unit/diagnose"])


def test_mypy_strict() -> None:
    """mypy --strict (pyproject's configuration) passes on diagnose_svc."""
    _lint([str(BIN / "mypy"), "diagnose_svc"])
