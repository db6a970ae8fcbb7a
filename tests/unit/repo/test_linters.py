"""The linters, run as tests, over the whole tree (the product, the testbed, the bench,
the demo, the fuzzer and the tests): ``ruff check`` (pyproject's rules), ``ruff format
--check``, and mypy --strict (pyproject's configuration: the packages and the testbed).
They use the binaries next to the Python running the tests; without one they skip, and
under CI (CI=true) fail."""

import ast
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


def undocumented_tests(source: str, where: str) -> list[str]:
    """``where:line name`` of every test function in ``source`` that has no docstring."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            if ast.get_docstring(node) is None:
                found.append(f"{where}:{node.lineno} {node.name}")
    return found


def test_the_docstring_checker_finds_a_test_without_one() -> None:
    """A test function without a docstring is named; one with, and a helper without, are
    not: the real check below cannot pass by seeing nothing."""
    source = (
        "def test_bare():\n    assert True\n\n"
        'def test_told():\n    """It says what it checks."""\n\n'
        "def helper():\n    pass\n"
    )
    assert undocumented_tests(source, "t.py") == ["t.py:1 test_bare"]


def test_every_test_says_what_it_checks() -> None:
    """Every test function in tests/ has a docstring saying the behaviour it checks: the
    suite reads as the operator's story."""
    missing = [
        line
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        for line in undocumented_tests(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not missing, f"{len(missing)} tests without a docstring:\n" + "\n".join(missing)
