"""The one line framing of every opsbot socket, on real Unix sockets: a message is one
line, bounded in size and in time, whoever sends it and however slowly."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared_io import framing
from shared_io.errors import PeerProtocolError, SocketUnavailable
from shared_io.framing import Deadlines, LineReader, MessageTooLarge


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


def test_lines_are_read_one_at_a_time_without_their_newline(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Two messages in one write are two lines; a last message without its newline still
    counts; then end of stream is None."""
    ours, theirs = pair
    theirs.sendall(b'{"a":1}\n{"b":2}\n{"c":3}')
    theirs.shutdown(socket.SHUT_WR)
    reader = LineReader(ours, 1024)
    assert [reader.readline(1), reader.readline(1), reader.readline(1)] == [
        b'{"a":1}',
        b'{"b":2}',
        b'{"c":3}',
    ]
    assert reader.readline(1) is None


def test_a_server_reads_a_waiting_request_and_replies_without_setting_a_timeout(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """On a connection as the server accepted it (no timeout of its own), a request that
    is already there is read, and the reply sent, without giving the socket a timeout
    (which costs a system call to set and a poll before each read and send, each a wait
    for the GIL under a burst); one that is not there yet is still waited for, within
    its deadline, and the socket is left as it was."""
    ours, theirs = pair
    assert ours.gettimeout() is None
    theirs.sendall(b'{"op":"submit"}\n')
    reader = LineReader(ours, 1024)
    assert reader.readline(5) == b'{"op":"submit"}'
    framing.send_line(ours, b'{"verdict":"ACCEPT"}\n', 5)
    assert theirs.recv(100) == b'{"verdict":"ACCEPT"}\n'
    assert ours.gettimeout() is None
    threading.Timer(0.2, theirs.sendall, args=(b"later\n",)).start()
    assert reader.readline(5) == b"later"
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        reader.readline(0.2)
    assert 0.15 < time.monotonic() - started < 3
    assert ours.gettimeout() is None


@pytest.mark.parametrize("data", [b"x" * 101 + b"\n", b"x" * 200])
def test_a_message_over_the_limit_is_refused_before_it_is_all_read(
    pair: tuple[socket.socket, socket.socket], data: bytes
) -> None:
    """101 bytes against a limit of 100 is MessageTooLarge, whether its newline came or
    not: the reader does not keep reading an endless line."""
    ours, theirs = pair
    theirs.sendall(data)
    with pytest.raises(MessageTooLarge, match="larger than 100 bytes"):
        LineReader(ours, 100).readline(1)


def test_a_slow_sender_cannot_stretch_the_deadline(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A byte every 50 ms never ends a message: the reader gives up at its deadline
    (0.4 s), not after the last byte plus a timeout, and keeps what it read."""
    ours, theirs = pair
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set():
            theirs.sendall(b"x")
            time.sleep(0.05)

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    reader = LineReader(ours, 1024)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            reader.readline(0.4)
    finally:
        stop.set()
        sender.join()
    assert time.monotonic() - started < 2.0
    assert reader.buffer.startswith(b"xx")


class FakeClock:
    """A monotonic clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_blank_lines_are_skipped_and_do_not_move_the_deadline(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A peer that sends only newlines (and CRLFs) has them skipped; the deadline set
    when the reader started waiting stands: a newline every 4 s (on the reader's clock)
    while it waits ends the wait with TimeoutError once the clock is past 10 s, not with
    another 10 seconds."""
    ours, theirs = pair
    clock = FakeClock()
    reader = LineReader(ours, 1024, clock=clock)
    theirs.sendall(b"\n\r\n  \n" + b'{"a":1}\n')
    assert reader.message_by(clock() + 10) == b'{"a":1}'

    def trickle() -> None:
        for step in (4, 4, 3):
            time.sleep(0.05)
            clock.now += step
            theirs.sendall(b"\n")

    deadline = clock() + 10
    sender = threading.Thread(target=trickle)
    started = time.monotonic()
    sender.start()
    try:
        with pytest.raises(TimeoutError):
            reader.message_by(deadline)
    finally:
        sender.join()
    # At once after the third newline: a deadline moved by it would have waited 10 s.
    assert time.monotonic() - started < 5
    assert clock.now - 1000.0 == 11


def test_the_deadline_runs_from_the_previous_reply_and_the_lifetime_bounds_all() -> None:
    """Deadlines: the next message is due 10 s after the last reply (or the start), never
    later than the connection's lifetime; a reply moves the first, not the second."""
    clock = FakeClock()
    deadlines = Deadlines(10, 60, clock=clock)
    start = clock()
    assert deadlines.next_message_by() == start + 10
    clock.now += 8
    assert deadlines.next_message_by() == start + 10  # time passing alone moves nothing
    deadlines.replied()
    assert deadlines.next_message_by() == start + 18
    clock.now = start + 55
    deadlines.replied()
    assert deadlines.next_message_by() == start + 60
    assert not deadlines.lifetime_over()
    clock.now = start + 60
    assert deadlines.lifetime_over()
    unbounded = Deadlines(10, math.inf, clock=clock)
    clock.now += 10_000
    assert not unbounded.lifetime_over()


Serve = Callable[[socket.socket], None]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Callable[[Serve], Path]]:
    """A one-connection Unix socket server; the test says what it does with it."""
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(serve: Serve) -> Path:
        path = tmp_path / f"s{len(listeners)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(1)
        listeners.append(listener)

        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                serve(conn)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        threads.append(thread)
        return path

    yield start
    for thread in threads:
        thread.join(timeout=5)
    for listener in listeners:
        listener.close()


def echo_upper(conn: socket.socket) -> None:
    line = LineReader(conn, 1024).readline(5)
    assert line is not None
    conn.sendall(line.upper() + b"\n")


def test_exchange_sends_one_line_and_reads_one_reply(server: Callable[[Serve], Path]) -> None:
    """exchange(): one message out, one reply line back, without its newline."""
    assert framing.exchange(server(echo_upper), b"ping\n", limit=64, timeout=5) == b"PING"


def test_a_missing_socket_and_a_dead_one_are_told_apart(tmp_path: Path) -> None:
    """No file: reason "missing"; a file nobody listens on: reason "refused"; both name
    the path."""
    with pytest.raises(SocketUnavailable) as missing:
        framing.exchange(tmp_path / "absent.sock", b"x\n", limit=64, timeout=1)
    assert (missing.value.reason, missing.value.what) == ("missing", "does not exist")
    assert str(tmp_path / "absent.sock") in missing.value.message
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(stale))
    with pytest.raises(SocketUnavailable) as refused:
        framing.exchange(stale, b"x\n", limit=64, timeout=1)
    assert refused.value.reason == "refused"


def test_a_silent_server_times_out_within_the_whole_exchange(
    server: Callable[[Serve], Path],
) -> None:
    """A server that never answers: reason "timeout" after the exchange's 0.3 s."""
    done = threading.Event()
    path = server(lambda conn: done.wait(5))
    started = time.monotonic()
    try:
        with pytest.raises(SocketUnavailable, match=r"no reply within 0\.3 s") as caught:
            framing.exchange(path, b"x\n", limit=64, timeout=0.3)
    finally:
        done.set()
    assert caught.value.reason == "timeout" and time.monotonic() - started < 3


def test_a_server_that_hangs_up_says_so(server: Callable[[Serve], Path]) -> None:
    """Closed without a reply, and closed in the middle of one, are both "closed"."""
    hang_up = server(lambda conn: LineReader(conn, 64).readline(5))
    with pytest.raises(SocketUnavailable, match="closed the connection without replying"):
        framing.exchange(hang_up, b"x\n", limit=64, timeout=5)

    def half_a_reply(conn: socket.socket) -> None:
        LineReader(conn, 64).readline(5)
        conn.sendall(b"half a rep")

    half = server(half_a_reply)
    with pytest.raises(SocketUnavailable, match="in the middle of its reply") as caught:
        framing.exchange(half, b"x\n", limit=64, timeout=5)
    assert caught.value.reason == "closed"


def test_a_flooding_server_is_a_protocol_error(server: Callable[[Serve], Path]) -> None:
    """More than the limit without a newline: PeerProtocolError, the rest unread."""

    def flood(conn: socket.socket) -> None:
        LineReader(conn, 64).readline(5)
        try:
            conn.sendall(b"y" * 100_000)
        except OSError:
            pass  # the client stopped reading, as it should

    with pytest.raises(PeerProtocolError, match="more than 1000 bytes"):
        framing.exchange(server(flood), b"x\n", limit=1000, timeout=5)


def test_stream_yields_each_line_as_it_comes_until_the_server_closes(
    server: Callable[[Serve], Path],
) -> None:
    """stream(): every line the server writes, in order, then the end."""

    def events(conn: socket.socket) -> None:
        LineReader(conn, 64).readline(5)
        for n in range(3):
            conn.sendall(f"event {n}\n".encode())
            time.sleep(0.02)

    lines = list(framing.stream(server(events), b"go\n", limit=64, timeout=5))
    assert lines == [b"event 0", b"event 1", b"event 2"]


def test_stream_bounds_each_line(server: Callable[[Serve], Path]) -> None:
    """A streamed line over the limit is a protocol error, not an ever-growing buffer."""

    def flood(conn: socket.socket) -> None:
        LineReader(conn, 64).readline(5)
        try:
            conn.sendall(b"ok\n" + b"z" * 100_000)
        except OSError:
            pass

    received = []
    with pytest.raises(PeerProtocolError):
        for line in framing.stream(server(flood), b"go\n", limit=1000, timeout=5):
            received.append(line)
    assert received == [b"ok"]


def test_a_refusal_sent_before_the_request_is_read_is_the_reply(
    server: Callable[[Serve], Path],
) -> None:
    """A server that answers "busy" at accept and closes without reading (a connection
    over a limit): the client's request (1 MiB here, so it cannot slip into the socket's
    buffer) fails to send, and the refusal waiting on the socket is the reply, not
    "closed the connection before the request"."""
    path = server(lambda conn: conn.sendall(b"busy: over the cap\n"))
    reply = framing.exchange(path, b"x" * (1 << 20) + b"\n", limit=1024, timeout=5)
    assert reply == b"busy: over the cap"
