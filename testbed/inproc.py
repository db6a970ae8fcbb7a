"""Real daemons without a booted systemd, for the attacks that need speed or a host
mount: the real executor ``Server`` on a real Unix socket in a thread (or the real daemon
program in a subprocess), the real ``ExecutorService`` and ``PlanStore`` on a state
directory of the test's own; the real ``DiagnoseServer`` with the real runtime behind it;
and a raw client that sends bytes and reads reply lines.

The executor's policy is the integration config's: restart/start demo-web and demo-db,
reset-failed demo-web.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnose_svc.actions import FinalNote, Proposal, ToolSpec, Transcript
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.server import DiagnoseServer
from executor_svc.daemon import Server
from executor_svc.peer import Roles
from executor_svc.service import ExecutorService
from plans import PlanStore, policy_errors, utcnow
from shared_io.framing import LineReader
from shared_schema import (
    MAX_REPLY_BYTES,
    Accept,
    DiagnoseSettings,
    ExecutorPolicy,
    Plan,
    SubmitPlan,
    encode_message,
    parse_reply,
)
from shared_schema.diagnose_socket import Event
from shared_schema.verdict import NoteVerdict, PlanVerdict

Verdict = PlanVerdict | NoteVerdict

REPO = Path(__file__).resolve().parents[1]
POLICY = ExecutorPolicy(
    allow={
        "restart_unit": ["demo-web.service", "demo-db.service"],
        "start_unit": ["demo-web.service", "demo-db.service"],
        "reset_failed_unit": ["demo-web.service"],
    }
)
CONFIG_TOML = """\
[executor]
# These tests store thousands of plans nobody decides (the caps' own tests lower them).
max_waiting_plans_per_submitter = 100000
max_waiting_plans = 100000

[executor.allow]
restart_unit = ["demo-web.service", "demo-db.service"]
start_unit = ["demo-web.service", "demo-db.service"]
reset_failed_unit = ["demo-web.service"]
"""


def plan(goal: str, unit: str = "demo-web.service", tool: str = "restart_unit") -> dict[str, Any]:
    """A valid, allowed plan (as JSON) whose goal makes it distinct."""
    return {
        "goal": goal,
        "steps": [
            {
                "tool": tool,
                "args": {"unit": unit},
                "expect": {"active_state": ["failed"]},
                "reason": "it crashed",
            }
        ],
    }


def submit_bytes(body: dict[str, Any]) -> bytes:
    return encode_message(SubmitPlan(plan=body))


# -- a raw client -------------------------------------------------------------------------


class Hang(AssertionError):
    """The executor did not answer in time."""


def exchange(address: str, data: bytes, *, timeout: float = 10.0) -> list[bytes]:
    """Connect, send ``data`` as it is (raw: an attack may send anything), half-close,
    and read reply lines until the executor closes. A write the executor cut short (it
    closes after an oversized message) is not an error: what it answered before closing
    is still read."""
    lines: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        reader = LineReader(sock, MAX_REPLY_BYTES)
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = reader.readline_by(deadline)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise Hang(f"no end of reply within {timeout:g}s for {data[:80]!r}") from None
            if line is None:
                break
            if line:
                lines.append(line)
    return lines


def one_reply(address: str, data: bytes, timeout: float = 10.0) -> Any:
    lines = exchange(address, data, timeout=timeout)
    assert len(lines) == 1, f"expected one reply line, got {lines!r}"
    return parse_reply(lines[0])


# -- the daemon in a thread ----------------------------------------------------------------


@dataclass
class InProcessExecutor:
    """An executor serving ``address`` from a thread; ``thread_errors`` collects every
    exception that escaped one of its connection threads (a crash)."""

    address: str
    server: Server
    store: PlanStore
    thread_errors: list[BaseException] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)

    def assert_store_valid(self) -> int:
        """Every stored plan loads, still hashes to its fingerprint, is canonical and is
        allowed by the policy; returns how many there are."""
        for plan_id in self.store.ids():
            if plan_id in self.checked:
                continue
            record = self.store.load(plan_id)
            stored = self.store.verified_plan(record)
            assert isinstance(stored, Plan)
            assert policy_errors(stored, POLICY) == [], f"{plan_id} is not allowed: {stored}"
            self.checked.add(plan_id)
        names = [n for n in os.listdir(self.store.plans) if not n.startswith(".tmp-")]
        assert len(names) == len(self.checked), f"files that are not plans: {sorted(names)}"
        return len(self.checked)


@contextlib.contextmanager
def running_executor(
    state_dir: Path, address: str, roles: Roles | None = None
) -> Iterator[InProcessExecutor]:
    """The real Server on ``address`` (a path, or "\\0name" for the abstract namespace)
    over a PlanStore in ``state_dir``, in a thread; stopped and checked for crashes after."""
    state_dir.mkdir(mode=0o750, exist_ok=True)
    store = PlanStore(state_dir)
    store.ensure()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(256)
    service = ExecutorService(store, POLICY, utcnow, state_dir.parent / "approvals")
    server = Server(
        listener,
        service,
        roles or Roles(POLICY.diagnose_user, POLICY.operators_group),
        idle_timeout=0,
        notify=False,
    )
    running = InProcessExecutor(address, server, store)
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        running.thread_errors.append(args.exc_value or RuntimeError(str(args.exc_type)))

    threading.excepthook = hook
    thread = threading.Thread(target=server.serve, name="executor", daemon=True)
    thread.start()
    try:
        yield running
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()
        threading.excepthook = previous_hook
    assert not thread.is_alive(), "the executor did not stop"
    assert running.thread_errors == [], f"connection threads crashed: {running.thread_errors!r}"


# -- the daemon program in a subprocess ----------------------------------------------------


def daemon_environment(state_dir: Path, config: Path) -> dict[str, str]:
    """What `python -m executor_svc.daemon` needs to run on a tmp state directory, with
    its log on stderr rather than in the host's journal."""
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPSBOT_STATE_DIR": str(state_dir),
        "OPSBOT_CONFIG": str(config),
        "OPSBOT_APPROVALS_DIR": str(state_dir.parent / "approvals"),
        "OPSBOT_NO_JOURNAL": "1",
    }


@contextlib.contextmanager
def daemon_process(tmp: Path, state_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``python -m executor_svc.daemon --socket tmp/executor.sock --idle-timeout 0``:
    the daemon program itself, on a state directory of its own. Yields (process, socket)."""
    config = tmp / "opsbot.toml"
    config.write_text(CONFIG_TOML)
    state_dir.mkdir(mode=0o750, exist_ok=True)
    sock = tmp / "executor.sock"
    with open(tmp / "daemon.log", "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "executor_svc.daemon",
                "--socket",
                str(sock),
                "--idle-timeout",
                "0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=daemon_environment(state_dir, config),
            cwd=REPO,
        )
    try:
        wait_listening(str(sock), proc)
        yield proc, str(sock)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_listening(address: str, proc: subprocess.Popen[bytes] | None, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(address)
                return
            except OSError:
                time.sleep(0.02)
    raise AssertionError(f"nothing listens on {address} after {timeout:g}s")


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of ``pid``, in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return out


def report(name: str, **figures: Any) -> None:
    """Print one line of figures (see them with ``pytest -s``); with
    ``OPSBOT_ATTACK_FIGURES=FILE`` also append it to FILE as JSON."""
    line = json.dumps({"test": name, **figures}, sort_keys=True)
    print(f"\nFIGURES {line}")
    target = os.environ.get("OPSBOT_ATTACK_FIGURES")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


# -- the diagnosis service in a thread -----------------------------------------------------


class NotePolicy:
    """A policy that looks at nothing and finishes with a note at once: for attacks on
    the diagnose socket, where the diagnosis behind it is not what is under test."""

    name = "note"

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        return Proposal(FinalNote(text=f"nothing found about {transcript.unit}"))


@dataclass
class InProcessDiagnose:
    address: str
    server: DiagnoseServer
    diagnoses: list[str] = field(default_factory=list)
    thread_errors: list[BaseException] = field(default_factory=list)


@contextlib.contextmanager
def running_diagnose_server(address: str) -> Iterator[InProcessDiagnose]:
    """The real DiagnoseServer on ``address``, in a thread, whose diagnoses are real runs
    of the runtime with NotePolicy and no tools; stopped and checked for crashes after."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    settings = DiagnoseSettings()

    def diagnose(unit: str, symptom: str, on_event: Callable[[Event], None]) -> Verdict:
        running.diagnoses.append(unit)
        return run_diagnosis(unit, symptom, NotePolicy(), {}, _NoExecutor(), settings, on_event)

    server = DiagnoseServer(listener, diagnose, idle_timeout=0, notify=False)
    running = InProcessDiagnose(address, server)
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        running.thread_errors.append(args.exc_value or RuntimeError(str(args.exc_type)))

    threading.excepthook = hook
    thread = threading.Thread(target=server.serve, name="diagnose", daemon=True)
    thread.start()
    try:
        yield running
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()
        threading.excepthook = previous_hook
    assert not thread.is_alive(), "the diagnosis service did not stop"
    assert running.thread_errors == [], f"connection threads crashed: {running.thread_errors!r}"


class _NoExecutor:
    def submit(self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()) -> Accept:
        raise AssertionError("NotePolicy never submits a plan")
