"""Fixtures: a real plan store and a root-owned approvals directory in tmp_path."""

import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from executor_svc import daemon
from executor_svc.daemon import Server
from executor_svc.peer import Roles
from executor_svc.service import ExecutorService
from plans import PlanStore, utcnow
from testbed.skips import skip_unless

from .helpers import POLICY, Clock, Systemctl


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults and no bound context (the CLI
    configures logging for its process; a test must not leak that into the next)."""
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def store(tmp_path: Path) -> PlanStore:
    state = tmp_path / "state"
    state.mkdir(mode=0o750)
    plan_store = PlanStore(state)
    plan_store.ensure()
    return plan_store


@pytest.fixture
def approvals_dir(tmp_path: Path) -> Path:
    """/var/lib/opsbot-approvals in miniature: root's, mode 0755."""
    skip_unless(
        os.geteuid() == 0, "approvals are trusted only when root owns them; run the tests as root"
    )
    directory = tmp_path / "approvals"
    directory.mkdir()
    os.chmod(directory, 0o755)
    return directory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def systemctl() -> Systemctl:
    return Systemctl()


@dataclass
class RunningExecutor:
    """An executor daemon serving a real Unix socket from a thread."""

    socket: Path
    server: Server
    service: ExecutorService


@pytest.fixture
def executor(
    tmp_path: Path, store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningExecutor]:
    """opsbot-executor on ``tmp_path/executor.sock`` with the test policy; short
    per-message and send timeouts so a test never waits long. Stopped afterwards."""
    monkeypatch.setattr(daemon, "MESSAGE_TIMEOUT", 3.0)
    monkeypatch.setattr(daemon, "SEND_TIMEOUT", 1.0)
    path = tmp_path / "executor.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    service = ExecutorService(store, POLICY, utcnow, tmp_path / "approvals")
    server = Server(
        listener,
        service,
        Roles(POLICY.diagnose_user, POLICY.operators_group),
        idle_timeout=0,
        notify=False,
    )
    thread = threading.Thread(target=server.serve, name="executor", daemon=True)
    thread.start()
    try:
        yield RunningExecutor(path, server, service)
    finally:
        server.stopping.set()
        thread.join(timeout=10)
        listener.close()
    assert not thread.is_alive(), "the executor did not stop"
