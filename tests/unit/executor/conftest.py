"""The executor daemon's fixture: opsbot-executor serving a real Unix socket from a
thread, over the store and approvals of tests/unit/conftest.py."""

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from executor_svc import daemon
from executor_svc.daemon import Server
from executor_svc.peer import Roles
from executor_svc.service import ExecutorService
from plans import PlanStore, utcnow
from tests.unit.plans.helpers import POLICY


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
