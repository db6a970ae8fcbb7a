"""The package's shape: public names, and the rules a grep can check."""

from __future__ import annotations

import ast
from pathlib import Path

import diagnose_svc

PACKAGE = Path(diagnose_svc.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_public_names_are_re_exported() -> None:
    """Everything in __all__ is importable from diagnose_svc, and __all__ is sorted."""
    for name in diagnose_svc.__all__:
        assert getattr(diagnose_svc, name) is not None, name
    assert diagnose_svc.__all__ == sorted(diagnose_svc.__all__, key=lambda n: (not n.isupper(), n))


def test_no_shell_true_anywhere() -> None:
    """No subprocess call in diagnose_svc passes shell=True."""
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                raise AssertionError(f"{path}: shell= keyword")


def test_only_run_py_starts_processes() -> None:
    """subprocess (and os.system/os.popen) appear only in diagnose_svc/run.py."""
    for path in SOURCES:
        if path == PACKAGE / "run.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert "subprocess" not in names, path
            if isinstance(node, ast.Attribute) and node.attr in ("system", "popen", "execv"):
                raise AssertionError(f"{path}: os.{node.attr}")


def test_never_imports_the_executor() -> None:
    """diagnose_svc does not import executor_svc: the socket is the only way across."""
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("executor_svc") for a in node.names), path
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("executor_svc"), path
