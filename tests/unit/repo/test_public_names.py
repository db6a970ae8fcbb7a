"""Each package says what it offers in its ``__init__``: every name of ``__all__``
resolves and is defined in the package, and where names are loaded when first used
(shared_io.exports), the names a type checker sees are the names served, and importing
the package alone builds nothing."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.repo.test_contracts import PACKAGES, ROOT


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_to_the_package_s_own(package: str) -> None:
    """``from PACKAGE import NAME`` works for each name of ``__all__``, and each is
    defined in a module of that package, or is the contract's (shared_schema), which a
    package may offer as its own words (diagnose_svc's verdicts)."""
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    assert names, f"{package}/__init__.py has no __all__"
    assert len(names) == len(set(names)), f"{package}.__all__ names a name twice"
    for name in names:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if home is not None and isinstance(value, type | type(len) | type(lambda: 0)):
            assert home.split(".")[0] in (package, "shared_schema"), f"{package}.{name}: {home}"


def _lazy_tables(source: str) -> tuple[dict[str, set[str]], dict[str, set[str]]] | None:
    """(TYPE_CHECKING imports, the _EXPORTS table) of a lazily exporting ``__init__``,
    each as module -> names; None for one that imports eagerly."""
    tree = ast.parse(source)
    checked: dict[str, set[str]] = {}
    served: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    checked.setdefault(imp.module, set()).update(a.name for a in imp.names)
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if getattr(target, "id", "") == "_EXPORTS" and node.value is not None:
                table = ast.literal_eval(node.value)
                for key, value in table.items():
                    if isinstance(value, str):  # name -> module
                        served.setdefault(value, set()).add(key)
                    else:  # module -> names
                        served.setdefault(key, set()).update(value)
    return (checked, served) if served else None


#: The packages that load their names when first asked (an ``_EXPORTS`` table).
LAZY = [p for p in PACKAGES if "_EXPORTS" in (ROOT / p / "__init__.py").read_text()]


def test_the_packages_a_command_imports_first_are_lazy() -> None:
    """The schema, shared_io and plans (what every console command reaches first) and the
    executor's daemons load their names when first asked."""
    assert {"shared_schema", "shared_io", "plans", "executor_svc"} <= set(LAZY)


@pytest.mark.parametrize("package", LAZY)
def test_lazy_exports_serve_what_the_type_checker_sees(package: str) -> None:
    """Where a package loads its names when first asked, the ``if TYPE_CHECKING:``
    imports (what mypy checks callers against), the table that serves them at run time
    and ``__all__`` are the same names, from the same modules."""
    source = (ROOT / package / "__init__.py").read_text()
    tables = _lazy_tables(source)
    assert tables is not None
    checked, served = tables
    assert checked == served
    module = importlib.import_module(package)
    assert set(module.__all__) == {name for names in served.values() for name in names}


def test_the_checker_notices_a_name_served_but_not_checked() -> None:
    """A name in the run-time table that the TYPE_CHECKING imports lack is a difference
    the check above sees."""
    source = "if TYPE_CHECKING:\n    from p.a import X\n_EXPORTS = {'p.a': ('X', 'Y')}\n"
    checked, served = _lazy_tables(source) or ({}, {})
    assert checked != served


@pytest.mark.parametrize("package", LAZY)
def test_importing_a_lazy_package_builds_nothing(package: str, tmp_path: Path) -> None:
    """``import PACKAGE`` alone imports no model and none of its modules: a command pays
    only for the names it uses."""
    probe = f"import json, sys\nimport {package}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    assert "pydantic" not in loaded
    assert not {m for m in loaded if m.startswith(f"{package}.") and m != "shared_io.exports"}
