"""The executor socket's room per user and its deadlines, on the real Server over a real
Unix socket, with a clock the test moves: a message is due 10 s after the previous
reply however many blank lines come meanwhile; an operator's connection ends after its
lifetime however busy it keeps it; an operator past its cap is refused naming the key.

The tests' peer is root; ``AsOperator`` is the real Server that takes every peer for an
operator (not privileged), so the operator's rules can be tried without a second uid.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnose_svc.executor_client import BUSY_PREFIX
from executor_svc import daemon
from executor_svc.daemon import Server
from executor_svc.peer import Roles
from executor_svc.service import ExecutorService
from plans import PlanStore, utcnow
from shared_io.admission import Refusal
from shared_schema import ExecutorPolicy, ListPlans, PlanList, Reject, encode_message, parse_reply
from tests.unit.plans.helpers import POLICY

LIST = encode_message(ListPlans())


class Monotonic:
    """The server's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class AsOperator(Server):
    def privileged(self, uid: int) -> bool:
        return False


@contextlib.contextmanager
def serving(
    tmp_path: Path,
    store: PlanStore,
    clock: Monotonic,
    server_class: type[Server] = Server,
    policy: ExecutorPolicy = POLICY,
) -> Iterator[tuple[Path, Server]]:
    path = tmp_path / "executor.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    service = ExecutorService(store, policy, utcnow, tmp_path / "approvals")
    server = server_class(
        listener,
        service,
        Roles(policy.diagnose_user, policy.operators_group),
        idle_timeout=0,
        notify=False,
        clock=clock,
    )
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield path, server
    finally:
        while Conn.opened:
            Conn.opened.pop().close()
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()
    assert not thread.is_alive()


class Conn:
    """One client connection; every one a test opens is closed after it."""

    opened: list[socket.socket] = []

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        Conn.opened.append(self.sock)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.buffer = b""

    def line(self) -> bytes | None:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def ask(self, data: bytes = LIST) -> object:
        self.sock.sendall(data)
        line = self.line()
        assert line is not None, "the executor closed the connection"
        return parse_reply(line)

    def closed(self) -> bool:
        """The executor hung up (after any line it sent first). It does so at once; a
        server still waiting would wait 10 real seconds (its deadline less the test's
        clock), so 5 s without an end is a connection kept open."""
        self.sock.settimeout(5)
        return self.line() is None


@pytest.fixture(autouse=True)
def _real_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's own deadlines (10 s a message, 5 s a send)."""
    monkeypatch.setattr(daemon, "MESSAGE_TIMEOUT", 10.0)
    monkeypatch.setattr(daemon, "SEND_TIMEOUT", 5.0)


def test_blank_lines_do_not_restart_the_message_deadline(tmp_path: Path, store: PlanStore) -> None:
    """The attack of issue 12: a newline every 4 s used to keep a connection (and its
    slot) forever. Now, 10 s after the last reply, the next newline finds the deadline
    passed and the executor closes the connection."""
    clock = Monotonic()
    with serving(tmp_path, store, clock) as (path, _):
        conn = Conn(path)
        assert isinstance(conn.ask(), PlanList)  # the deadline runs from this reply
        for at in (4, 8):
            clock.now = 500 + at
            conn.sock.sendall(b"\n")
        clock.now = 510.5
        conn.sock.sendall(b"\n")
        assert conn.closed()


def test_a_message_begun_and_not_ended_in_time_is_rejected(
    tmp_path: Path, store: PlanStore
) -> None:
    """Half a request, blank lines before it: at the deadline the client gets REJECT "no
    complete message within 10s" and the connection ends."""
    clock = Monotonic()
    with serving(tmp_path, store, clock) as (path, _):
        conn = Conn(path)
        assert isinstance(conn.ask(), PlanList)
        conn.sock.sendall(b'\n\n{"v":1,')
        clock.now = 511
        conn.sock.sendall(b'"op"')
        line = conn.line()
        assert line is not None
        assert parse_reply(line) == Reject(reason="no complete message within 10s")
        assert conn.closed()


def test_each_reply_gives_the_next_message_its_own_10_seconds(
    tmp_path: Path, store: PlanStore
) -> None:
    """Requests 9.9 s apart on one connection are all served: the deadline runs from the
    previous reply, not from the connection's start (root's connection: no lifetime)."""
    clock = Monotonic()
    with serving(tmp_path, store, clock) as (path, _):
        conn = Conn(path)
        for number in range(10):
            clock.now = 500 + 9.9 * number
            assert isinstance(conn.ask(), PlanList), number


def test_an_operators_connection_ends_after_its_lifetime(tmp_path: Path, store: PlanStore) -> None:
    """An operator asking every 9 s keeps its connection only for 60 s
    (connection_lifetime_seconds): a request after that gets REJECT naming the limit and
    the key, and the connection ends."""
    clock = Monotonic()
    with serving(tmp_path, store, clock, AsOperator) as (path, _):
        conn = Conn(path)
        for at in range(0, 60, 9):
            clock.now = 500 + at
            assert isinstance(conn.ask(), PlanList), at
        clock.now = 560.5
        reply = conn.ask()
        assert isinstance(reply, Reject)
        assert reply.reason == (
            "connection open longer than 60s, the most an operator's may stay "
            "([executor] connection_lifetime_seconds); reconnect"
        )
        assert conn.closed()


def test_an_operator_past_its_cap_is_refused_naming_the_key(
    tmp_path: Path, store: PlanStore
) -> None:
    """With connections_per_uid = 3, an operator's fourth connection is answered at once
    (before it sends a byte) with REJECT naming the limit, the key and what to do; when
    one of its three ends, it gets in again."""
    clock = Monotonic()
    policy = POLICY.model_copy(update={"connections_per_uid": 3})
    with serving(tmp_path, store, clock, AsOperator, policy) as (path, server):
        held = [Conn(path) for _ in range(3)]
        for conn in held:
            assert isinstance(conn.ask(), PlanList)
        fourth = Conn(path)
        line = fourth.line()
        assert line is not None
        reply = parse_reply(line)
        assert isinstance(reply, Reject)
        assert reply.reason == (
            "executor busy: root already holds 3 connections, the most one user may "
            "([executor] connections_per_uid); close some and try again"
        )
        assert fourth.closed()
        held.pop().sock.close()
        deadline = time.monotonic() + 5
        while server.active > 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert isinstance(Conn(path).ask(), PlanList)


def test_every_busy_refusal_starts_as_the_submitter_expects(
    tmp_path: Path, store: PlanStore
) -> None:
    """Each limit's refusal is one REJECT line that starts with "executor busy" (the
    diagnosis service's submitter retries on it); the room operators share names the
    reserve kept for the diagnosis service."""
    with serving(tmp_path, store, Monotonic()) as (_, server):
        reasons = {}
        for limit, allowed in (("per_uid", 16), ("shared", 96), ("total", 128)):
            raw = server.busy(Refusal(limit, 1001, allowed))  # type: ignore[arg-type]
            reply = parse_reply(raw.rstrip(b"\n"))
            assert isinstance(reply, Reject) and raw.endswith(b"\n")
            assert reply.reason.startswith(BUSY_PREFIX)
            reasons[limit] = reply.reason
    assert "16 connections" in reasons["per_uid"]
    assert "[executor] connections_per_uid" in reasons["per_uid"]
    assert "all 96 connections" in reasons["shared"]
    assert "32 are kept for the diagnosis service" in reasons["shared"]
    assert reasons["total"] == "executor busy; try again"
