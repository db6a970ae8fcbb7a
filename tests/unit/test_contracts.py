"""The architecture, checked from the source: the two halves share only the schema and
the host I/O room (shared_io, which holds no write tool and no policy); diagnosis can
never reach the code that changes the host, nor the console; nothing runs a shell; only
shared_io/run.py starts programs; the schema does no I/O; nothing imports the tests.
Every .py file is parsed with ast (nothing is imported), and each checker is shown a
violating snippet first, so it cannot pass by seeing nothing."""

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What is installed on a host.
PACKAGES = (
    "shared_schema",
    "shared_io",
    "executor_svc",
    "diagnose_svc",
    "opsbot_cli",
    "approver_svc",
    "notify_svc",
    "web_svc",
)
#: What runs the product from outside: the bench, the benchmarks, the demo, the fuzzer.
TOOLING = ("testbed", "bench", "demo", "fuzz")

_RELAYS = ("web_svc", "notify_svc")
# package -> the top-level packages it must never import
FORBIDDEN_IMPORTS = {
    "shared_schema": {"executor_svc", "diagnose_svc", "shared_io", "opsbot_cli", "testbed"},
    "shared_io": {"executor_svc", "diagnose_svc", "opsbot_cli", "testbed"},
    "diagnose_svc": {"executor_svc", "opsbot_cli", "testbed", *_RELAYS, "approver_svc"},
    "executor_svc": {"diagnose_svc", "opsbot_cli", "testbed", *_RELAYS, "approver_svc"},
    "opsbot_cli": {"diagnose_svc", "testbed", *_RELAYS},
    # Root's approver may use the executor's store and gate as `opsbot approve` does; the
    # two units that relay (the page, the notifier) hold no authority: they reach the
    # approver only over its socket, and neither imports the other.
    "approver_svc": {"diagnose_svc", "testbed", *_RELAYS},
    "notify_svc": {
        "executor_svc",
        "diagnose_svc",
        "opsbot_cli",
        "testbed",
        "approver_svc",
        "web_svc",
    },
    "web_svc": {
        "executor_svc",
        "diagnose_svc",
        "opsbot_cli",
        "testbed",
        "approver_svc",
        "notify_svc",
    },
    "testbed": {"tests"},
    "bench": {"tests"},
    "demo": {"tests"},
    "fuzz": {"tests"},
}
# What shared_schema may not touch: files, sockets, processes, the environment.
IO_MODULES = {
    "os",
    "io",
    "sys",
    "socket",
    "subprocess",
    "pathlib",
    "shutil",
    "tempfile",
    "glob",
    "fcntl",
    "select",
    "selectors",
    "ssl",
    "asyncio",
    "urllib",
    "http",
    "httpx",
    "requests",
    "systemd",
    "structlog",
    "logging",
}
IO_BUILTINS = {"open", "print", "input", "exec", "eval", "compile", "breakpoint"}


@dataclass(frozen=True)
class Finding:
    where: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.what}"


def python_files(package: str) -> list[Path]:
    files = sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)
    assert files, f"no Python files under {package}/"
    return files


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a Name/Attribute chain, '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def imported_modules(source: str, module: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in ``source``, which is the module
    ``module`` (for resolving relative imports): ``import x``, ``from x import y``,
    ``from x.y import z``, ``from . import y``, and ``importlib.import_module("x")`` /
    ``import_module("x")`` / ``__import__("x")`` with a literal name."""
    package = module.split(".")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            yield node.lineno, name
            for alias in node.names:
                yield node.lineno, f"{name}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = _dotted(node.func)
            first = node.args[0]
            if func in ("importlib.import_module", "import_module", "__import__") and isinstance(
                first, ast.Constant
            ):
                if isinstance(first.value, str):
                    yield node.lineno, first.value


def import_violations(source: str, module: str, where: str) -> list[Finding]:
    """Imports in ``source`` (module ``module``) that cross a forbidden boundary."""
    own = module.split(".")[0]
    forbidden = FORBIDDEN_IMPORTS.get(own, set())
    return [
        Finding(where, line, f"{own} imports {name}")
        for line, name in imported_modules(source, module)
        if name.split(".")[0] in forbidden
    ]


def shell_uses(source: str, where: str) -> list[Finding]:
    """Every way ``source`` could hand a command line to a shell: a ``shell=`` argument
    that is not literally False, os.system/os.popen (called, referenced or imported),
    subprocess.getoutput/getstatusoutput, asyncio's create_subprocess_shell."""
    shells = {
        "os.system",
        "os.popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "asyncio.create_subprocess_shell",
    }
    found: list[Finding] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "shell" and not (
                    isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                ):
                    found.append(Finding(where, node.lineno, "shell= argument"))
        if isinstance(node, ast.Attribute) and _dotted(node) in shells:
            found.append(Finding(where, node.lineno, _dotted(node)))
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in shells:
                    found.append(Finding(where, node.lineno, f"{node.module}.{alias.name}"))
    return found


def io_uses(source: str, where: str) -> list[Finding]:
    """Imports of I/O modules and calls of I/O builtins in ``source``."""
    found: list[Finding] = []
    for line, name in imported_modules(source, "shared_schema._checked"):
        if name.split(".")[0] in IO_MODULES:
            found.append(Finding(where, line, f"imports {name}"))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in IO_BUILTINS:
                found.append(Finding(where, node.lineno, f"calls {node.func.id}()"))
    return found


def module_name(path: Path) -> str:
    """``executor_svc.tools.restart_unit``; a package's ``__init__`` keeps that last part,
    so that ``from . import x`` in it resolves to the package itself."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


# -- the checkers catch what they are for --------------------------------------------------


@pytest.mark.parametrize(
    ("module", "snippet"),
    [
        ("diagnose_svc.runtime", "import executor_svc"),
        ("diagnose_svc.runtime", "import executor_svc.store as store"),
        ("diagnose_svc.runtime", "import json, executor_svc.apply"),
        ("diagnose_svc.runtime", "from executor_svc import store"),
        ("diagnose_svc.runtime", "from executor_svc.store import PlanStore"),
        ("diagnose_svc.runtime", "import importlib\nimportlib.import_module('executor_svc.run')"),
        (
            "diagnose_svc.runtime",
            "from importlib import import_module\nimport_module('executor_svc')",
        ),
        ("diagnose_svc.runtime", "__import__('executor_svc.apply')"),
        ("diagnose_svc.runtime", "def later():\n    from executor_svc import apply"),
        ("diagnose_svc.runtime", "if TYPE_CHECKING:\n    from executor_svc.records import X"),
        ("executor_svc.cli", "from diagnose_svc.runtime import run"),
        ("shared_schema.plan", "from executor_svc.tools import TOOLS"),
        ("shared_schema.plan", "import diagnose_svc"),
        ("shared_schema.plan", "from shared_io.run import run"),
        ("shared_io.run", "from executor_svc.tools import TOOLS"),
        ("shared_io.framing", "from diagnose_svc.policies import RunbookPolicy"),
        ("diagnose_svc.runtime.loop", "from opsbot_cli import main"),
        ("opsbot_cli.diagnose", "from diagnose_svc.runtime import run_diagnosis"),
        ("testbed.container", "from tests.integration.conftest import opsbot"),
        ("bench._common", "import tests.support"),
    ],
)
def test_the_import_checker_flags_a_crossing(module: str, snippet: str) -> None:
    """Each form of import that crosses a forbidden boundary is caught, so the real
    check below cannot pass by overlooking one."""
    assert import_violations(snippet, module, "snippet.py")


@pytest.mark.parametrize(
    ("module", "snippet"),
    [
        ("diagnose_svc.runtime", "from shared_schema import Plan"),
        ("diagnose_svc.runtime", "import executor_svc_compat"),
        ("diagnose_svc.runtime", '"""Talks to executor_svc over its socket."""'),
        ("diagnose_svc.runtime", "from . import tools\nfrom .tools import _registry"),
        ("executor_svc.tools.restart_unit", "from executor_svc.tools import write_tool"),
        ("diagnose_svc.runtime", "importlib.import_module(name)"),
    ],
)
def test_the_import_checker_leaves_allowed_imports_alone(module: str, snippet: str) -> None:
    """Imports of the schema, of a package's own modules (relative too), look-alike
    names and mere mentions in text are not crossings."""
    assert import_violations(snippet, module, "snippet.py") == []


def test_relative_imports_are_resolved_against_the_importing_module() -> None:
    """``from ..x import y`` in executor_svc.tools.restart_unit means executor_svc.x."""
    source = "from ..store import PlanStore"
    names = [n for _, n in imported_modules(source, "executor_svc.tools.restart_unit")]
    assert names == ["executor_svc.store", "executor_svc.store.PlanStore"]
    in_init = [n for _, n in imported_modules("from . import a", "executor_svc.tools.__init__")]
    assert in_init == ["executor_svc.tools", "executor_svc.tools.a"]


@pytest.mark.parametrize(
    "snippet",
    [
        "subprocess.run('systemctl restart x', shell=True)",
        "subprocess.Popen(cmd, shell=use_shell)",
        "os.system('reboot')",
        "os.popen('id').read()",
        "from os import system",
        "from os import popen as p",
        "runner = os.system",
        "subprocess.getoutput('id')",
        "asyncio.create_subprocess_shell('id')",
    ],
)
def test_the_shell_checker_flags_every_way_to_a_shell(snippet: str) -> None:
    """shell=True (or shell=anything but False), os.system, os.popen and friends are
    caught, called or not."""
    assert shell_uses(snippet, "snippet.py")


def test_the_shell_checker_allows_argv_and_shell_false() -> None:
    """An argv list, and an explicit shell=False, are fine."""
    assert shell_uses("subprocess.run(['systemctl', 'status'], shell=False)", "s.py") == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import os",
        "from os import path",
        "import os.path",
        "from pathlib import Path",
        "import socket",
        "import subprocess",
        "data = open('/etc/opsbot/opsbot.toml').read()",
        "print('hello')",
        "from http.client import HTTPConnection",
    ],
)
def test_the_io_checker_flags_io(snippet: str) -> None:
    """Imports of os, pathlib, socket, subprocess, http... and calls of open() or
    print() are caught."""
    assert io_uses(snippet, "snippet.py")


def test_the_io_checker_allows_pure_computation() -> None:
    """json, hashlib, re, datetime and pydantic are pure."""
    source = "import json, hashlib, re\nfrom datetime import datetime\nfrom pydantic import Field"
    assert io_uses(source, "s.py") == []


# -- the code base ------------------------------------------------------------------------------


@pytest.mark.parametrize("package", PACKAGES + TOOLING)
def test_no_package_imports_across_a_forbidden_boundary(package: str) -> None:
    """shared_schema imports nothing of opsbot's; shared_io only the schema; diagnose_svc
    never imports executor_svc or the console; executor_svc never imports diagnose_svc;
    the console reaches diagnosis only over its socket; nothing imports tests. The halves
    meet only in the schema and in shared_io."""
    findings = [
        finding
        for path in python_files(package)
        for finding in import_violations(
            path.read_text(), module_name(path), str(path.relative_to(ROOT))
        )
    ]
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("package", PACKAGES + TOOLING)
def test_nothing_runs_a_shell(package: str) -> None:
    """No shell=True, os.system or os.popen anywhere: every program runs from an argv."""
    findings = [
        finding
        for path in python_files(package)
        for finding in shell_uses(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not findings, "\n".join(map(str, findings))


def test_the_schema_does_no_io() -> None:
    """shared_schema is pure data: it opens no file, socket or process, and reads no
    environment (no os/pathlib/socket/subprocess imports, no open())."""
    findings = [
        finding
        for path in python_files("shared_schema")
        for finding in io_uses(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not findings, "\n".join(map(str, findings))


PROCESS_MODULES = {"subprocess", "multiprocessing", "pty"}
PROCESS_CALLS = {"system", "popen", "execv", "execve", "execvp", "spawnv", "posix_spawn", "fork"}


def process_starts(source: str, where: str) -> list[Finding]:
    """Imports of subprocess (and its kin) and calls of os.exec*/spawn*/fork/system."""
    found = [
        Finding(where, line, f"imports {name}")
        for line, name in imported_modules(source, "x")
        if name.split(".")[0] in PROCESS_MODULES
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PROCESS_CALLS:
            if _dotted(node.value) == "os":
                found.append(Finding(where, node.lineno, f"os.{node.attr}"))
    return found


@pytest.mark.parametrize(
    "snippet", ["import subprocess", "from subprocess import run", "os.execv(p, a)", "os.fork()"]
)
def test_the_process_checker_flags_a_second_runner(snippet: str) -> None:
    """Importing subprocess, or calling os.exec*/fork, is a way to start a program."""
    assert process_starts(snippet, "snippet.py")


def test_only_shared_io_run_starts_programs() -> None:
    """Every program any opsbot unit runs goes through shared_io/run.py: no other product
    module imports subprocess or calls os.exec*, fork or system."""
    findings = [
        finding
        for package in PACKAGES
        for path in python_files(package)
        if path != ROOT / "shared_io" / "run.py"
        for finding in process_starts(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not findings, "\n".join(map(str, findings))
