"""The accept loop's admission on a real Unix socket (shared_io.server): a peer over its
user's cap, or over the room its kind of user may share, is answered at once with the
server's busy line for that limit and closed, before a byte of its message is read; a
connection that ends gives its room back."""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared_io.admission import Refusal
from shared_io.framing import LineReader
from shared_io.server import ThreadedServer


class Echo(ThreadedServer):
    """Echoes one line per connection; says which limit refused a connection."""

    max_connections = 6
    connections_per_uid = 2
    reserved_connections = 2
    trusted = False

    def handle(self, conn: socket.socket) -> None:
        line = LineReader(conn, 1024).readline(10)
        if line is not None:
            conn.sendall(line + b"\n")

    def busy(self, refusal: Refusal) -> bytes:
        return f"busy {refusal.limit} {refusal.allowed}\n".encode()

    def privileged(self, uid: int) -> bool:
        return self.trusted


class TrustedEcho(Echo):
    trusted = True


class SharedEcho(Echo):
    connections_per_uid = 6


@contextlib.contextmanager
def serving(server_class: type[Echo], path: Path) -> Iterator[Echo]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(32)
    server = server_class(listener, idle_timeout=0, notify=False)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(path))
    return sock


def first_line(sock: socket.socket) -> bytes:
    line = LineReader(sock, 1024).readline(5)
    assert line is not None, "closed without a line"
    return line


def wait_active(server: Echo, count: int) -> None:
    deadline = time.monotonic() + 5
    while server.active != count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.active == count


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "echo.sock"


def test_a_user_over_its_cap_is_refused_at_once_with_the_limit(path: Path) -> None:
    """Two silent connections of one user fill its cap of 2: the third is answered "busy
    per_uid 2" without sending anything and closed; when one of the two ends, the user
    is served again."""
    with serving(Echo, path) as server:
        held = [connect(path), connect(path)]
        wait_active(server, 2)
        with connect(path) as third:
            assert first_line(third) == b"busy per_uid 2"
            assert third.recv(1) == b""
        held.pop().close()
        wait_active(server, 1)
        with connect(path) as again:
            again.sendall(b"hello\n")
            assert first_line(again) == b"hello"
        for sock in held:
            sock.close()
    assert server.refused == 1


def test_the_reserve_is_only_for_privileged_users(tmp_path: Path) -> None:
    """Of 6 connections, 2 are reserved: users that are not privileged share 4 (here one
    user with a cap of 2 holds 2, so the reserve is not what stops it); a privileged user
    has no cap of its own and gets all 6, the 7th refused by the total."""
    with serving(TrustedEcho, tmp_path / "trusted.sock") as server:
        held = [connect(tmp_path / "trusted.sock") for _ in range(6)]
        wait_active(server, 6)
        with connect(tmp_path / "trusted.sock") as seventh:
            assert first_line(seventh) == b"busy total 6"
        for sock in held:
            sock.close()
    with serving(SharedEcho, tmp_path / "shared.sock") as server:
        held = [connect(tmp_path / "shared.sock") for _ in range(4)]
        wait_active(server, 4)
        with connect(tmp_path / "shared.sock") as fifth:
            assert first_line(fifth) == b"busy shared 4"
        for sock in held:
            sock.close()


def test_a_burst_of_connections_pings_the_watchdog_a_few_times_not_once_each(
    tmp_path: Path,
) -> None:
    """Fifty requests one after another, in well under a second: systemd hears WATCHDOG=1
    a few times (at most one a half second, far within any WatchdogSec=), not once per
    connection, which made it handle one more message for every request of a burst."""
    said: list[str] = []
    path = tmp_path / "echo.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(32)
    server = SharedEcho(listener, idle_timeout=0, notify=said.append)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        for number in range(50):
            with connect(path) as sock:
                sock.sendall(f"hello {number}\n".encode())
                assert first_line(sock) == f"hello {number}".encode()
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()
    seconds = time.monotonic() - started
    pings = said.count("WATCHDOG=1")
    assert 1 <= pings <= 2 + seconds / 0.5, (pings, seconds)


SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="")


class NamingEcho(SharedEcho):
    """Echoes which thread served the connection and what the one before left bound in
    its context (then binds a value of its own and leaves it)."""

    thread_idle_seconds = 60.0

    def handle(self, conn: socket.socket) -> None:
        line = LineReader(conn, 1024).readline(10)
        left = SEEN.get()
        SEEN.set("left by an earlier connection")
        if line is not None:
            conn.sendall(f"{threading.current_thread().name}|{left}\n".encode())


def test_a_burst_is_served_by_threads_already_running_each_connection_afresh(
    path: Path,
) -> None:
    """Twenty requests one after another are served by a thread or two kept waiting for
    the next, not by a thread started for each (which cost the accept loop a thread's
    start for every request of a burst); each connection still starts in an empty context,
    as in a new thread: what one conversation bound is not the next one's."""
    with serving(NamingEcho, path):
        replies = []
        for number in range(20):
            with connect(path) as sock:
                sock.sendall(f"hello {number}\n".encode())
                replies.append(first_line(sock).decode().split("|"))
    threads = {name for name, _ in replies}
    assert len(threads) <= 3, threads
    assert [left for _, left in replies] == [""] * 20


def test_threads_left_waiting_end_after_their_idle_time_and_when_the_server_stops(
    tmp_path: Path,
) -> None:
    """Three connections at once leave three threads waiting for more: they end once none
    came for ``thread_idle_seconds``; and at stop, threads still waiting end at once."""

    def served_by(server: Echo) -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.endswith("(_serve_many)")}

    for idle, stop_first in ((0.3, False), (60.0, True)):
        path = tmp_path / f"echo-{idle}.sock"

        class Short(SharedEcho):
            thread_idle_seconds = idle

        with serving(Short, path) as server:
            held = [connect(path) for _ in range(3)]
            wait_active(server, 3)
            assert len(served_by(server)) == 3
            for number, sock in enumerate(held):
                sock.sendall(f"hello {number}\n".encode())
                assert first_line(sock) == f"hello {number}".encode()
                sock.close()
            wait_active(server, 0)
            if stop_first:
                server.stopping.set()
            deadline = time.monotonic() + 5
            while served_by(server) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert served_by(server) == set()
