"""Newline-delimited messages on Unix sockets, the one framing of every opsbot socket.

A message is one line: bytes up to a newline, at most ``limit`` bytes, to arrive within a
deadline. Servers read with :class:`LineReader` and answer with :func:`send_line`,
timing each message with :class:`Deadlines` (a deadline per message that blank lines do
not move, and one for the whole connection); clients use :func:`exchange` (one request,
one reply line) or :func:`stream` (one request, then reply lines until the server
closes). Every read is bounded in size and in time, so a slow, silent or flooding peer
costs one connection, not the process.

Client failures are :class:`~shared_io.errors.SocketUnavailable` with a ``reason``
(``missing``, ``refused``, ``permission``, ``busy``, ``timeout``, ``closed``, ``io``) for
the caller's hint, or :class:`~shared_io.errors.PeerProtocolError` for a reply that does
not fit its limit.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from shared_io.errors import PeerProtocolError, SocketUnavailable

CHUNK = 65536
#: The longest one poll(2) waits, in seconds; a longer wait is made of several.
MAX_POLL = 3600.0

#: What deadlines are measured on: ``time.monotonic``, or a test's clock.
Clock = Callable[[], float]


class MessageTooLarge(Exception):
    """A peer sent more than ``limit`` bytes without ending its message."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"message larger than {limit} bytes")
        self.limit = limit


class LineReader:
    """Reads newline-terminated messages of at most ``limit`` bytes from ``sock``."""

    def __init__(self, sock: socket.socket, limit: int, clock: Clock = time.monotonic) -> None:
        self.sock = sock
        self.limit = limit
        self.clock = clock
        self.buffer = b""
        #: Set when the last message came without its newline (the peer closed after it).
        self.unterminated = False

    def readline(self, timeout: float) -> bytes | None:
        """The next message without its newline, read within ``timeout`` seconds; None at
        end of stream. A last message without its newline still counts.

        Raises MessageTooLarge, TimeoutError (the deadline passed; what was read so far
        stays in ``buffer``) or OSError from the socket.
        """
        return self.readline_by(self.clock() + timeout)

    def message_by(self, deadline: float) -> bytes | None:
        """The next message that is not blank, by ``deadline``: blank lines are skipped
        and do not move it (a peer cannot hold a connection by sending newlines)."""
        while True:
            line = self.readline_by(deadline)
            if line is None or line.strip():
                return line

    def take_waiting(self) -> None:
        """Add to ``buffer`` what has already arrived (one chunk at most), without
        waiting: after a deadline, so that a message sent just as it passed is answered
        (with a refusal), not cut off unread."""
        self.sock.settimeout(0.0)  # non-blocking: a timeout would wait and retry
        with contextlib.suppress(BlockingIOError, InterruptedError):
            self.buffer += self.sock.recv(CHUNK)

    def readline_by(self, deadline: float) -> bytes | None:
        """:meth:`readline` with an absolute deadline (on the reader's clock)."""
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1 :]
                if len(line) > self.limit:
                    raise MessageTooLarge(self.limit)
                return line
            if len(self.buffer) > self.limit:
                raise MessageTooLarge(self.limit)
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise TimeoutError
            chunk = self._recv(remaining)
            if not chunk:
                if self.buffer.strip():
                    line, self.buffer = self.buffer, b""
                    if len(line) > self.limit:
                        raise MessageTooLarge(self.limit)
                    self.unterminated = True
                    return line
                return None
            self.buffer += chunk

    def _recv(self, timeout: float) -> bytes:
        """One read, waiting at most ``timeout`` seconds for something to come.

        A socket without a timeout of its own (a server's accepted connection) is read
        at once if bytes wait, which they mostly do, and otherwise waited on with
        poll(2): one system call where a timeout costs three (setting it, the poll
        before each read, the read), each a wait for the GIL under a burst. A socket with
        a timeout (a client's, from :func:`connect`) is read as it was set up to be."""
        if self.sock.gettimeout() not in (None, 0.0):
            self.sock.settimeout(timeout)
            return self.sock.recv(CHUNK)
        deadline = self.clock() + timeout
        while True:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                return self.sock.recv(CHUNK, socket.MSG_DONTWAIT)
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise TimeoutError
            if not _readable(self.sock, remaining) and remaining <= MAX_POLL:
                raise TimeoutError


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has something to read (or has ended) within ``timeout`` seconds."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    # poll(2) takes milliseconds (at least 1 here), for at most MAX_POLL seconds at once.
    return bool(poller.poll(max(1, int(min(timeout, MAX_POLL) * 1000))))


class Deadlines:
    """When a server stops waiting on one connection: each message must be complete
    within ``per_message`` seconds of the previous reply (or of the connection's start),
    and the connection ends ``lifetime`` seconds after it started, whatever it sends."""

    def __init__(self, per_message: float, lifetime: float, clock: Clock = time.monotonic) -> None:
        self.per_message = per_message
        self.lifetime = lifetime
        self.clock = clock
        self.started = clock()
        self.replied_at = self.started

    def replied(self) -> None:
        """The server answered a message: the next one has ``per_message`` from now."""
        self.replied_at = self.clock()

    @property
    def ends_at(self) -> float:
        return self.started + self.lifetime

    def next_message_by(self) -> float:
        """The deadline of the next message: the earlier of the two."""
        return min(self.replied_at + self.per_message, self.ends_at)

    def lifetime_over(self) -> bool:
        return self.clock() >= self.ends_at


def send_line(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Send one whole message (``data`` ends with its newline) within ``timeout``.

    On a socket without a timeout of its own (a server's accepted connection) a reply
    that fits in the socket's buffer, as they mostly do, is sent in one system call and
    leaves the socket as it was; the rest, if any, with the timeout."""
    if sock.gettimeout() is None:
        try:
            sent = sock.send(data, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            sent = 0
        data = data[sent:]
        if not data:
            return
    sock.settimeout(timeout)
    sock.sendall(data)


def connect(path: str | Path, timeout: float) -> socket.socket:
    """A connected Unix stream socket; SocketUnavailable saying why there is none."""
    where = str(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(where)
    except BaseException as exc:
        sock.close()
        if isinstance(exc, FileNotFoundError):
            raise SocketUnavailable(where, "missing", "does not exist") from exc
        if isinstance(exc, ConnectionRefusedError):
            raise SocketUnavailable(
                where, "refused", "connection refused (nobody listens)"
            ) from exc
        if isinstance(exc, PermissionError):
            raise SocketUnavailable(where, "permission", "permission denied") from exc
        if isinstance(exc, BlockingIOError):
            raise SocketUnavailable(
                where, "busy", "its queue of connections is full (the server is busy)"
            ) from exc
        if isinstance(exc, TimeoutError):
            raise SocketUnavailable(
                where, "timeout", f"no connection within {timeout:g} s"
            ) from exc
        if isinstance(exc, OSError):
            raise SocketUnavailable(where, "io", f"cannot connect: {exc}") from exc
        raise
    return sock


def _read(reader: LineReader, where: str, deadline: float, timeout: float) -> bytes | None:
    """The next reply line, or None at end of stream; failures as SocketUnavailable."""
    try:
        return reader.readline_by(deadline)
    except MessageTooLarge as exc:
        raise PeerProtocolError(
            where, "io", f"sent more than {exc.limit} bytes without ending its reply"
        ) from exc
    except TimeoutError as exc:
        raise SocketUnavailable(where, "timeout", f"no reply within {timeout:g} s") from exc
    except ConnectionResetError as exc:
        raise SocketUnavailable(where, "closed", "closed the connection without replying") from exc
    except OSError as exc:
        raise SocketUnavailable(where, "io", f"reading the reply failed: {exc}") from exc


def _send(reader: LineReader, where: str, data: bytes, timeout: float) -> None:
    """Send the request; a server that closed first is an error unless it left a line
    (a refusal sent before reading, such as "busy"), which the caller then reads."""
    try:
        send_line(reader.sock, data, timeout)
    except TimeoutError as exc:
        raise SocketUnavailable(where, "timeout", f"took no request within {timeout:g} s") from exc
    except (BrokenPipeError, ConnectionResetError) as exc:
        with contextlib.suppress(OSError):
            reader.take_waiting()
        if b"\n" in reader.buffer:
            return
        raise SocketUnavailable(
            where, "closed", "closed the connection before the request"
        ) from exc
    except OSError as exc:
        raise SocketUnavailable(where, "io", f"sending the request failed: {exc}") from exc


def exchange(path: str | Path, message: bytes, *, limit: int, timeout: float) -> bytes:
    """Send one message, read one reply line of at most ``limit`` bytes, close.

    ``timeout`` bounds the whole exchange, connecting included.
    """
    where = str(path)
    deadline = time.monotonic() + timeout
    with contextlib.closing(connect(where, timeout)) as sock:
        reader = LineReader(sock, limit)
        _send(reader, where, message, max(0.001, deadline - time.monotonic()))
        line = _read(reader, where, deadline, timeout)
    if line is None:
        raise SocketUnavailable(where, "closed", "closed the connection without replying")
    if reader.unterminated:
        raise SocketUnavailable(where, "closed", "closed the connection in the middle of its reply")
    return line


def stream(path: str | Path, message: bytes, *, limit: int, timeout: float) -> Iterator[bytes]:
    """Send one message, then yield each reply line (at most ``limit`` bytes, each within
    ``timeout`` seconds of the one before) until the server closes the connection."""
    where = str(path)
    with contextlib.closing(connect(where, timeout)) as sock:
        reader = LineReader(sock, limit)
        _send(reader, where, message, timeout)
        while (line := _read(reader, where, time.monotonic() + timeout, timeout)) is not None:
            yield line
