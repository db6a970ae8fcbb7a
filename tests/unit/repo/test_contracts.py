"""The architecture, checked from the source: the two halves share only the schema and
the host I/O room (shared_io, which holds no write tool and no policy); diagnosis can
never reach the code that changes the host, nor the console; nothing runs a shell; only
shared_io/run.py starts programs; the schema does no I/O; nothing imports the tests.
Every .py file is parsed with ast (nothing is imported), and each checker is shown a
violating snippet first, so it cannot pass by seeing nothing."""

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: What is installed on a host.
PACKAGES = (
    "shared_schema",
    "shared_io",
    "plans",
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
#: The doors onto a stored plan's life: the executor's daemons, root's approver and the
#: operator's console. Each imports plans, and none imports another.
_DOORS = ("executor_svc", "approver_svc", "opsbot_cli")
# package -> the top-level packages it must never import
FORBIDDEN_IMPORTS = {
    "shared_schema": {"shared_io", "plans", "diagnose_svc", *_DOORS, *_RELAYS, "testbed"},
    "shared_io": {"plans", "diagnose_svc", *_DOORS, *_RELAYS, "testbed"},
    # A stored plan's life: below every door, above shared_io; it imports no daemon and
    # not the console.
    "plans": {"diagnose_svc", *_DOORS, *_RELAYS, "testbed"},
    # Diagnosis reaches nothing that changes the host, nor a stored plan, nor a door.
    "diagnose_svc": {"plans", *_DOORS, *_RELAYS, "testbed"},
    "executor_svc": {"diagnose_svc", "approver_svc", "opsbot_cli", *_RELAYS, "testbed"},
    # Root's approver decides with plans, as the console does: it never uses the console.
    "approver_svc": {"diagnose_svc", "executor_svc", "opsbot_cli", *_RELAYS, "testbed"},
    "opsbot_cli": {"diagnose_svc", "executor_svc", "approver_svc", *_RELAYS, "testbed"},
    # The two units that relay hold no authority: they reach the approver only over its
    # socket, and neither imports the other.
    "notify_svc": {"plans", "diagnose_svc", *_DOORS, "web_svc", "testbed"},
    "web_svc": {"plans", "diagnose_svc", *_DOORS, "notify_svc", "testbed"},
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
    """``plans.tools.restart_unit``; a package's ``__init__`` keeps that last part,
    so that ``from . import x`` in it resolves to the package itself."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


# -- the checkers catch what they are for --------------------------------------------------


@pytest.mark.parametrize(
    ("module", "snippet"),
    [
        ("diagnose_svc.runtime", "import executor_svc"),
        ("diagnose_svc.runtime", "import plans.store as store"),
        ("diagnose_svc.runtime", "import json, executor_svc.apply"),
        ("diagnose_svc.runtime", "from plans import store"),
        ("diagnose_svc.runtime", "from plans.store import PlanStore"),
        ("diagnose_svc.runtime", "from plans import PlanStore"),
        ("approver_svc.view", "from opsbot_cli.show import expect_words"),
        ("approver_svc.service", "from executor_svc import gate"),
        ("opsbot_cli.apply", "from executor_svc.apply_service import apply_plans"),
        ("plans.gate", "from executor_svc.apply import Applier"),
        ("plans.approvals", "from opsbot_cli.output import printable"),
        ("web_svc.app", "from plans import PlanStore"),
        ("diagnose_svc.runtime", "import importlib\nimportlib.import_module('executor_svc.run')"),
        (
            "diagnose_svc.runtime",
            "from importlib import import_module\nimport_module('executor_svc')",
        ),
        ("diagnose_svc.runtime", "__import__('executor_svc.apply')"),
        ("diagnose_svc.runtime", "def later():\n    from executor_svc import apply"),
        ("diagnose_svc.runtime", "if TYPE_CHECKING:\n    from plans.records import X"),
        ("executor_svc.cli", "from diagnose_svc.runtime import run"),
        ("shared_schema.plan", "from plans.tools import TOOLS"),
        ("shared_schema.plan", "import diagnose_svc"),
        ("shared_schema.plan", "from shared_io.run import run"),
        ("shared_io.run", "from plans.tools import TOOLS"),
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
        ("plans.tools.restart_unit", "from plans.tools import write_tool"),
        ("diagnose_svc.runtime", "importlib.import_module(name)"),
    ],
)
def test_the_import_checker_leaves_allowed_imports_alone(module: str, snippet: str) -> None:
    """Imports of the schema, of a package's own modules (relative too), look-alike
    names and mere mentions in text are not crossings."""
    assert import_violations(snippet, module, "snippet.py") == []


def test_relative_imports_are_resolved_against_the_importing_module() -> None:
    """``from ..x import y`` in plans.tools.restart_unit means plans.x."""
    source = "from ..store import PlanStore"
    names = [n for _, n in imported_modules(source, "plans.tools.restart_unit")]
    assert names == ["plans.store", "plans.store.PlanStore"]
    in_init = [n for _, n in imported_modules("from . import a", "plans.tools.__init__")]
    assert in_init == ["plans.tools", "plans.tools.a"]


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


# -- one road to an approval ---------------------------------------------------------------

#: Where an approval is written (plans.decisions.approve) and the one module that calls it.
APPROVAL_WRITER = ("plans.decisions", "approve")
ROAD = "plans/road.py"


def approval_writers(source: str, where: str) -> list[Finding]:
    """Imports of the function that writes an approval, from plans or plans.decisions, and
    calls of ``plans.approve`` or ``plans.decisions.approve``: a door that writes an
    approval itself bypasses the road's checks (plans.road.CHECKS)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("plans", APPROVAL_WRITER[0]):
            if any(alias.name == APPROVAL_WRITER[1] for alias in node.names):
                found.append(Finding(where, node.lineno, f"imports {node.module}.approve"))
        if isinstance(node, ast.Attribute) and node.attr == APPROVAL_WRITER[1]:
            if _dotted(node.value) in ("plans", APPROVAL_WRITER[0]):
                found.append(Finding(where, node.lineno, f"calls {_dotted(node.value)}.approve"))
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "from plans import approve",
        "from plans.decisions import Reviewed, approve",
        "import plans\nplans.approve(store, d, i)",
    ],
)
def test_the_road_checker_flags_a_door_that_writes_an_approval_itself(snippet: str) -> None:
    """Importing or calling the approval's writer outside the road is a second road."""
    assert approval_writers(snippet, "snippet.py")


def test_only_the_road_writes_an_approval() -> None:
    """Every approval is written on the road (plans/road.py), where the checks every
    door must pass live: no other module of the product imports or calls the writer."""
    findings = [
        finding
        for package in (*PACKAGES, *TOOLING)
        for path in python_files(package)
        if path.relative_to(ROOT).as_posix()
        not in (ROAD, "plans/decisions.py", "plans/__init__.py")
        for finding in approval_writers(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not findings, "\n".join(map(str, findings))


# -- no circles -----------------------------------------------------------------------------


def _module_imports(source: str) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module's own level: at its top, and in top-level
    ``if``/``try`` blocks, ``if TYPE_CHECKING:`` included (a type that must be imported
    back from a module that imports this one is a circle all the same; imports inside a
    function run later, once every module is loaded)."""
    stack: list[ast.stmt] = list(ast.parse(source).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                stack.extend(handler.body)


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports when it is loaded (a package's
    ``__init__`` is named for the package; importing ``a.b`` loads ``a`` first, which is
    no edge for a module inside ``a``: its package is loading it)."""
    known = set(sources)

    def targets(name: str) -> Iterator[str]:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in known:
                yield prefix

    graph: dict[str, set[str]] = {module: set() for module in sources}
    for module, source in sources.items():
        path = module.split(".")
        for node in _module_imports(source):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = path[: len(path) - node.level + (1 if module in _PACKAGE_INITS else 0)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            ancestors = {".".join(path[:end]) for end in range(1, len(path) + 1)}
            for name in names:
                graph[module].update(t for t in targets(name) if t not in ancestors)
    return graph


_PACKAGE_INITS: set[str] = set()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _sources(packages: tuple[str, ...]) -> dict[str, str]:
    sources: dict[str, str] = {}
    for package in packages:
        for path in python_files(package):
            name = module_name(path)
            if path.name == "__init__.py":
                name = name.removesuffix(".__init__")
                _PACKAGE_INITS.add(name)
            sources[name] = path.read_text()
    return sources


def test_the_cycle_finder_finds_a_circle_of_imports() -> None:
    """Two modules that import each other are one circle, also when one of them imports
    the other only for its types (``if TYPE_CHECKING:``: no exemption); an import inside
    a function is not part of one, so the real check below cannot pass by seeing
    nothing nor fail on what runs only once every module is loaded."""
    circle = {"a.x": "from a.y import f", "a.y": "import a.x", "a": ""}
    assert cycles(import_graph(circle)) == [["a.x", "a.y"]]
    for_types = {
        "a.x": "from a.y import f",
        "a.y": "if TYPE_CHECKING:\n    from a.x import T",
        "a": "",
    }
    assert cycles(import_graph(for_types)) == [["a.x", "a.y"]]
    deferred = {"a.x": "from a.y import f", "a.y": "def g():\n    import a.x", "a": ""}
    assert cycles(import_graph(deferred)) == []


def test_no_module_imports_itself_round_a_circle() -> None:
    """No opsbot module takes part in a circle of imports, for its types or at load time:
    each room's modules can be read from the bottom up (approver_svc's rules and news
    take the approver's desk, never the service that calls them)."""
    found = cycles(import_graph(_sources(PACKAGES + TOOLING)))
    assert not found, "\n".join(" -> ".join(group) for group in found)


# -- the diagnose units cannot see the rest -------------------------------------------------


def test_the_diagnose_units_are_hidden_every_package_but_their_own() -> None:
    """packaging/install.sh hides from opsbot-diagnose, opsbot-onfailure@ and opsbot-verify
    (InaccessiblePaths=) every installed package but the three diagnosis needs: the
    schema, shared_io and diagnose_svc itself. A new package is hidden unless it is named
    here as one diagnosis may read."""
    script = (ROOT / "packaging" / "install.sh").read_text()
    listed = re.search(r"for name in \(([^)]*)\):", script)
    assert listed is not None, "install.sh no longer lists the packages it hides"
    hidden = set(re.findall(r'"(\w+)"', listed.group(1)))
    assert hidden == set(PACKAGES) - {"shared_schema", "shared_io", "diagnose_svc"}
    installed = (ROOT / "pyproject.toml").read_text()
    for package in PACKAGES:
        assert f'"{package}*"' in installed, f"pyproject.toml does not install {package}"
        assert f'"{package}"' in installed, f"mypy does not check {package}"
