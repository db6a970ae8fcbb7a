"""The submitter asks a busy or absent executor again, with growing pauses, for a bounded
time, and says so in its log; what it may not send twice, it does not resend after a
timeout. Pauses go through an injected sleep and clock: no test waits for them."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from diagnose_svc.errors import ExecutorUnavailable
from diagnose_svc.executor_client import ExecutorClient, Retry
from shared_schema import (
    Accept,
    Plan,
    Recorded,
    Reject,
    ReportVerification,
    decode_json_object,
    encode_message,
)

PLAN = Plan.model_validate(
    {
        "goal": "Restart failed killed.service",
        "steps": [{"tool": "restart_unit", "args": {"unit": "killed.service"}}],
    }
)
SHA = "ab" * 32
ACCEPT = Accept(plan_id="20261129-214500-0a1b2c3d", sha256=SHA)
BUSY = Reject(reason="executor busy; try again")


class Executor:
    """Answers each connection with the next of ``replies`` (None: read, never answer)."""

    def __init__(self, path: Path, replies: list[bytes | None]) -> None:
        self.socket_path = path
        self.replies = replies
        self.requests: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.listener.settimeout(5)
        self.silent: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for reply in self.replies:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.settimeout(5)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.requests.append(data)
            if reply is None:
                self.silent.append(conn)  # read, never answered
                continue
            with conn:
                conn.sendall(reply)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # an accept still waiting ends
        self.listener.close()
        self.thread.join(timeout=10)
        for conn in self.silent:
            conn.close()


class Pauses:
    """sleep() and a monotonic clock in one: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[Callable[[list[bytes | None]], Executor]]:
    started: list[Executor] = []

    def start(replies: list[bytes | None]) -> Executor:
        server = Executor(tmp_path / f"ex{len(started)}.sock", replies)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def client(
    path: Path, pauses: Pauses, retry: Retry | None = None, timeout: float = 5
) -> ExecutorClient:
    return ExecutorClient(
        path, timeout, retry=retry or Retry(), sleep=pauses.sleep, clock=pauses.clock
    )


def test_a_busy_executor_is_asked_again_until_it_accepts(
    executor: Callable[[list[bytes | None]], Executor],
) -> None:
    """Two "executor busy" answers, then ACCEPT: the submit returns the ACCEPT after
    pauses of 0.1 and 0.2 s, each retry logged as executor.retry with its reason."""
    server = executor([encode_message(BUSY), encode_message(BUSY), encode_message(ACCEPT)])
    pauses = Pauses()
    with capture_logs() as logs:
        reply = client(server.socket_path, pauses).submit(PLAN, "run-1", "")
    assert reply == ACCEPT
    assert pauses.slept == [0.1, 0.2]
    assert len(server.requests) == 3 and len(set(server.requests)) == 1
    retries = [e for e in logs if e["event"] == "executor.retry"]
    assert [(e["attempt"], e["reason"], e["op"]) for e in retries] == [
        (1, "busy", "submit"),
        (2, "busy", "submit"),
    ]


def test_an_executor_busy_for_good_gets_a_bounded_number_of_tries(
    executor: Callable[[list[bytes | None]], Executor],
) -> None:
    """Always busy: six tries with pauses 0.1, 0.2, 0.4, 0.8, 1.6 s (3.1 s in all), then
    the busy REJECT is the answer (the runtime reports it like any REJECT), and
    executor.gave_up is logged."""
    server = executor([encode_message(BUSY)] * 6)
    pauses = Pauses()
    with capture_logs() as logs:
        reply = client(server.socket_path, pauses).submit(PLAN, "run-1", "")
    assert reply == BUSY
    assert pauses.slept == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert [e["attempts"] for e in logs if e["event"] == "executor.gave_up"] == [6]


def test_the_total_time_is_bounded_too(tmp_path: Path) -> None:
    """Nobody listens (connection refused): with a budget of 1 s, the pauses stop before
    they would pass it, and the error names the socket as before."""
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))
    pauses = Pauses()
    retry = Retry(attempts=10, first_delay=0.25, max_delay=2.0, budget_seconds=1.0)
    with pytest.raises(ExecutorUnavailable, match=f"executor socket {path}: connection refused"):
        client(path, pauses, retry).submit(PLAN, "run-1", "")
    assert pauses.slept == [0.25, 0.5]
    assert pauses.now <= 1.0


def test_a_reject_that_is_not_busy_is_not_retried(
    executor: Callable[[list[bytes | None]], Executor],
) -> None:
    """A REJECT for another reason (the restart budget, say) is the executor's verdict:
    returned at once, no retry."""
    budget = Reject(reason="restart budget spent for killed.service")
    server = executor([encode_message(budget)])
    pauses = Pauses()
    assert client(server.socket_path, pauses).submit(PLAN, "run-1", "") == budget
    assert pauses.slept == []


def test_a_timeout_is_retried_for_a_submit_but_not_for_a_report(
    executor: Callable[[list[bytes | None]], Executor],
) -> None:
    """No answer within the timeout: a submit is sent again (the executor keeps one plan
    for one content, so a second copy is the same plan); a verification report, which
    must not be recorded twice, is not."""
    server = executor([None, encode_message(ACCEPT)])
    pauses = Pauses()
    assert client(server.socket_path, pauses, timeout=0.3).submit(PLAN, "run-1", "") == ACCEPT
    assert len(server.requests) == 2
    report = ReportVerification(
        plan_id="20261129-214500-0a1b2c3d", sha256=SHA, result="verified", evidence=["up"]
    )
    recorded = Recorded(plan_id="20261129-214500-0a1b2c3d", state="VERIFIED")
    second = executor([None, encode_message(recorded)])
    pauses = Pauses()
    with pytest.raises(ExecutorUnavailable, match=r"no reply within 0\.3 s"):
        client(second.socket_path, pauses, timeout=0.3).report(report)
    assert len(second.requests) == 1 and pauses.slept == []
    assert decode_json_object(second.requests[0].rstrip(b"\n"))["op"] == "verify"
