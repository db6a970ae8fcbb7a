"""Each package says what it offers in its ``__init__``: every name of ``__all__``
resolves and is defined in the package, and where names are loaded when first used
(shared_io.exports), the names a type checker sees are the names served, and importing
the package alone builds nothing."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


def _generator() -> ModuleType:
    """scripts/generate-exports, loaded as a module."""
    path = ROOT / "scripts" / "generate-exports"
    loader = importlib.machinery.SourceFileLoader("generate_exports", str(path))
    spec = importlib.util.spec_from_loader("generate_exports", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


#: The packages that load their names when first asked (an ``_EXPORTS`` table).
LAZY = [p for p in PACKAGES if "_EXPORTS" in (ROOT / p / "__init__.py").read_text()]


def test_the_packages_a_command_imports_first_are_lazy() -> None:
    """The schema, shared_io and plans (what every console command reaches first) and the
    executor's daemons load their names when first asked; each is one the generator
    writes."""
    assert {"shared_schema", "shared_io", "plans", "executor_svc"} <= set(LAZY)
    assert set(LAZY) == set(_generator().PACKAGES)


def test_every_lazy_package_s_table_is_written_from_its_modules() -> None:
    """A public name is written once, in the ``__all__`` of the module that defines it:
    each package's table of names (and the imports mypy checks callers against) is
    what scripts/generate-exports writes from those, or this fails until it is run."""
    stale = []
    generator = _generator()
    for package in LAZY:
        now, wanted = generator.written(package)
        if now != wanted:
            stale.append(package)
    assert not stale, f"run scripts/generate-exports: {stale} are stale"


@pytest.mark.parametrize("package", LAZY)
def test_lazy_exports_serve_each_module_s_all(package: str) -> None:
    """At run time the package serves exactly its table's names, each from the module
    whose ``__all__`` lists it."""
    module = importlib.import_module(package)
    served = module._EXPORTS
    assert set(module.__all__) == {name for names in served.values() for name in names}
    for home, names in served.items():
        assert set(names) <= set(importlib.import_module(home).__all__), home


def test_the_generator_sees_a_name_added_to_a_module_s_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name added to a module's ``__all__`` makes its package's table stale; a name the
    module only imports from elsewhere (a re-export) is not the package's; a name two
    modules offer is refused."""
    generator = _generator()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("from os import sep\n__all__ = ['X', 'sep']\nX = 1\n")
    (pkg / "b.py").write_text("__all__ = ['Y']\nY = 2\n")
    head = "from typing import TYPE_CHECKING\n_FROM = ('a', 'b')\n"
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    (pkg / "__init__.py").write_text(head + generator.BEGIN + "\n" + generator.END + "\n")
    now, wanted = generator.written("pkg")
    assert now != wanted
    (pkg / "__init__.py").write_text(wanted)
    assert generator.table("pkg") == {"pkg.a": ("X",), "pkg.b": ("Y",)}
    (pkg / "b.py").write_text("__all__ = ['Y', 'Z']\nY = 2\nZ = 3\n")
    now, wanted = generator.written("pkg")
    assert now != wanted and '"pkg.b": ("Y", "Z"),' in wanted
    (pkg / "b.py").write_text("__all__ = ['X']\nX = 2\n")
    with pytest.raises(generator.ExportError, match="X is offered by pkg.a and pkg.b"):
        generator.table("pkg")


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
