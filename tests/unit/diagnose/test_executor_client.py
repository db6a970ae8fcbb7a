"""The Submitter over a real Unix socket: one request line, one reply line."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diagnose_svc.errors import ExecutorProtocolError, ExecutorUnavailable
from diagnose_svc.executor_client import NO_RETRY, ExecutorClient
from shared_schema import (
    Accept,
    Plan,
    PlanList,
    Revise,
    SubmitPlan,
    decode_json_object,
    encode_message,
    parse_request,
)

PLAN = Plan.model_validate(
    {
        "goal": "Restart failed killed.service",
        "steps": [{"tool": "restart_unit", "args": {"unit": "killed.service"}}],
    }
)
SHA = "ab" * 32

Respond = Callable[[socket.socket, bytes], None]


class Executor:
    """A one-thread Unix socket server that reads one line and lets a test answer it."""

    def __init__(self, path: Path, respond: Respond) -> None:
        self.path = path
        self.respond = respond
        self.received: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.received.append(data)
            self.respond(conn, data)

    def close(self) -> None:
        self.thread.join(timeout=5)
        self.listener.close()


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[Callable[[Respond], Executor]]:
    started: list[Executor] = []

    def start(respond: Respond) -> Executor:
        server = Executor(tmp_path / "ex.sock", respond)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def reply(message: Accept | Revise | PlanList) -> Respond:
    return lambda conn, _: conn.sendall(encode_message(message))


def test_submit_sends_one_request_and_reads_accept(executor: Callable[[Respond], Executor]) -> None:
    """The client sends a valid ``submit`` request and returns the executor's ACCEPT."""
    server = executor(reply(Accept(plan_id="20261129-214500-0a1b2c3d", sha256=SHA)))
    client = ExecutorClient(socket_path=server.path, timeout_seconds=5)
    answer = client.submit(PLAN, "run-1", "killed is down")
    assert isinstance(answer, Accept) and answer.plan_id == "20261129-214500-0a1b2c3d"
    [line] = server.received
    request = parse_request(decode_json_object(line.rstrip(b"\n")))
    assert isinstance(request, SubmitPlan)
    assert (request.plan, request.run_id, request.symptom) == (
        PLAN.model_dump(mode="json", exclude_none=True),
        "run-1",
        "killed is down",
    )
    assert line == encode_message(request)


def test_revise_is_returned(executor: Callable[[Respond], Executor]) -> None:
    """A REVISE reply comes back with its field errors."""
    revise = Revise.model_validate({"errors": [{"path": "steps.0.tool", "message": "no"}]})
    server = executor(reply(revise))
    answer = ExecutorClient(server.path, 5).submit(PLAN, "run-1", "")
    assert isinstance(answer, Revise) and answer.errors[0].path == "steps.0.tool"


def test_missing_socket_names_the_path(tmp_path: Path) -> None:
    """No socket file: ExecutorUnavailable naming the path, with a hint."""
    path = tmp_path / "absent.sock"
    with pytest.raises(ExecutorUnavailable) as caught:
        ExecutorClient(path, 1).submit(PLAN, "run-1", "")
    assert caught.value.message == f"executor socket {path}: does not exist"
    assert caught.value.hint is not None and "opsbot-executor" in caught.value.hint


def test_refused_names_the_path(tmp_path: Path) -> None:
    """A socket file nobody listens on: ExecutorUnavailable, connection refused."""
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))
    with pytest.raises(ExecutorUnavailable, match=f"executor socket {path}: connection refused"):
        ExecutorClient(path, 1).submit(PLAN, "run-1", "")


def test_no_reply_times_out(executor: Callable[[Respond], Executor]) -> None:
    """An executor that never answers: ExecutorUnavailable after the timeout (asked
    once here; the retries are tests/unit/diagnose/test_submit_retry.py's)."""
    done = threading.Event()
    server = executor(lambda conn, _: done.wait(5))
    try:
        with pytest.raises(ExecutorUnavailable, match=r"no reply within 0\.3 s"):
            ExecutorClient(server.path, 0.3, retry=NO_RETRY).submit(PLAN, "run-1", "")
    finally:
        done.set()


def test_hang_up_without_reply(executor: Callable[[Respond], Executor]) -> None:
    """An executor that closes the connection without a reply: ExecutorUnavailable."""
    server = executor(lambda conn, _: None)
    with pytest.raises(ExecutorUnavailable, match="closed the connection without replying"):
        ExecutorClient(server.path, 5).submit(PLAN, "run-1", "")


def test_oversized_reply_is_a_protocol_error(executor: Callable[[Respond], Executor]) -> None:
    """A reply longer than 64 KiB plus slack, without a newline, is not read further."""

    def flood(conn: socket.socket, _: bytes) -> None:
        try:
            conn.sendall(b"x" * (70 * 1024))
        except OSError:
            pass  # the client stopped reading, as it should

    server = executor(flood)
    with pytest.raises(ExecutorProtocolError, match="without ending its reply"):
        ExecutorClient(server.path, 5).submit(PLAN, "run-1", "")


def test_a_reply_that_is_not_about_submission(executor: Callable[[Respond], Executor]) -> None:
    """A well-formed reply of the wrong kind (PLANS) is a protocol error."""
    server = executor(reply(PlanList(plans=[])))
    with pytest.raises(ExecutorProtocolError, match="answered a submission with PLANS"):
        ExecutorClient(server.path, 5).submit(PLAN, "run-1", "")


def test_garbage_reply_is_a_protocol_error(executor: Callable[[Respond], Executor]) -> None:
    """A reply line that is not JSON is a protocol error naming the socket."""
    server = executor(lambda conn, _: conn.sendall(b"hello\n"))
    with pytest.raises(ExecutorProtocolError, match="sent a reply opsbot cannot read"):
        ExecutorClient(server.path, 5).submit(PLAN, "run-1", "")
