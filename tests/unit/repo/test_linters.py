"""The linters, run as tests, over the whole tree (the product, the testbed, the bench,
the demo, the fuzzer and the tests): ``ruff check`` (pyproject's rules), ``ruff format
--check``, and mypy --strict (pyproject's configuration: the packages and the testbed).
They use the binaries next to the Python running the tests; without one they skip, and
under CI (CI=true) fail."""

import subprocess
import sys
from pathlib import Path

from testbed.skips import skip_unless

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def lint(tool: str, *args: str) -> None:
    binary = BIN / tool
    skip_unless(binary.exists(), f"{binary} is not installed (pip install '.[test]')")
    result = subprocess.run(
        [str(binary), *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, f"{tool} {' '.join(args)}:\n{result.stdout}{result.stderr}"


def test_ruff_check() -> None:
    """``ruff check`` (E, W, F, I, UP, B; lines up to 100) passes on the whole tree."""
    lint("ruff", "check", "--no-cache", ".")


def test_ruff_format() -> None:
    """Every Python file is formatted as ``ruff format`` would format it."""
    lint("ruff", "format", "--check", "--no-cache", ".")


def test_mypy_strict() -> None:
    """``mypy`` with pyproject's configuration (strict, pydantic plugin) passes on
    shared_schema, shared_io, executor_svc, diagnose_svc, opsbot_cli and testbed."""
    lint("mypy")
