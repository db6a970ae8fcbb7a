"""The runbook package's shape: small one-topic modules and short functions (STYLE.md 17).

The modules are parsed with ``ast``, never imported. The checker is first shown sources
that break each limit, so a checker that flags nothing cannot pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import diagnose_svc.policies
from diagnose_svc.policies import runbook
from diagnose_svc.policies.runbook import RunbookPolicy

ROOT = Path(__file__).resolve().parents[3]
RUNBOOK = ROOT / "diagnose_svc" / "policies" / "runbook"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def oversized(source: str, where: str) -> list[str]:
    """What in ``source`` breaks a limit: the module's line count, and each function's or
    method's, counted from its ``def`` line to the last line of its body (decorators
    excluded)."""
    found: list[str] = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(
                    f"{where}:{node.lineno}: {node.name} is {length} lines "
                    f"(at most {MAX_FUNCTION_LINES})"
                )
    return found


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines - 1))
    return f"{indent}def {name}() -> int:\n{body}{indent}    return 0\n"


#: The runbook's code wherever it is: the package's modules (and a runbook.py beside it,
#: should one come back).
MODULES = sorted([*RUNBOOK.parent.glob("runbook.py"), *RUNBOOK.glob("*.py")])


def test_the_package_holds_its_topics() -> None:
    """The runbook is a package of one-topic modules: the graph view, what to read, the
    decision (down, running, notes), not one file."""
    names = {p.stem for p in MODULES}
    assert {"view", "reads", "decision", "down", "running", "notes", "policy"} <= names
    assert not (RUNBOOK.parent / "runbook.py").exists()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(RUNBOOK.parent)))
def test_no_module_or_function_is_too_long(path: Path) -> None:
    """No module of the runbook is over 400 lines, and no function or method in it is
    over 60."""
    assert oversized(path.read_text(), str(path.relative_to(ROOT))) == []


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        pytest.param(_function("long", 60), ["long is 61 lines"], id="function-61-lines"),
        pytest.param(_function("fits", 59), [], id="function-60-lines"),
        pytest.param(
            "class Policy:\n" + _function("decide", 70, indent="    "),
            ["decide is 71 lines"],
            id="method-71-lines",
        ),
        pytest.param(
            "def outer() -> None:\n" + _function("inner", 65, indent="    "),
            ["outer is 67 lines", "inner is 66 lines"],
            id="nested-function",
        ),
        pytest.param(
            "import functools\n\n\n@functools.cache\n@functools.wraps(len)\n"
            + _function("decorated", 59),
            [],
            id="decorators-not-counted",
        ),
        pytest.param("\n".join(["x = 1"] * 401) + "\n", ["401 lines"], id="module-401-lines"),
        pytest.param("\n".join(["x = 1"] * 400) + "\n", [], id="module-400-lines"),
    ],
)
def test_the_checker_flags_what_is_too_long(source: str, flagged: list[str]) -> None:
    """The checker flags a module over 400 lines and a function or method over 60 (a
    nested one too), and lets those at the limit, or long only by decorators, pass."""
    found = oversized(source, "example.py")
    assert len(found) == len(flagged), found
    for problem, words in zip(found, flagged, strict=True):
        assert words in problem


def test_the_policy_is_re_exported() -> None:
    """RunbookPolicy is the package's one public name, importable from the package and
    from diagnose_svc.policies."""
    assert runbook.__all__ == ["RunbookPolicy"]
    assert diagnose_svc.policies.RunbookPolicy is RunbookPolicy
