"""A threaded accept loop for opsbot's Unix socket daemons.

:class:`ThreadedServer` accepts connections and serves each in a thread of its own. Who
may hold one is decided in the accept loop from the peer's uid (SO_PEERCRED), before a
byte is read (shared_io.admission): at most ``max_connections`` at once, at most
``connections_per_uid`` for one user, and ``reserved_connections`` of them kept for the
uids the subclass calls :meth:`~ThreadedServer.privileged`. A connection beyond a limit
gets the subclass's :meth:`~ThreadedServer.busy` line for that limit and is closed at
once. The server tells systemd it is ready, pings the watchdog while it waits, exits
after ``idle_timeout`` seconds without a connection (the socket unit starts it again on
the next), and on stop lets conversations in flight finish for up to ``drain_seconds``.
A subclass says what one connection is (:meth:`~ThreadedServer.handle`); a slow or silent
client holds only its own thread, and counts against its own user's cap.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import structlog

from shared_io.activation import notify as sd_notify
from shared_io.admission import Admission, Admitted, Refusal, peer_uid
from shared_io.framing import Clock

log = structlog.get_logger("opsbot.server")

#: Seconds between checks for idleness and stop while no one connects.
ACCEPT_POLL = 0.5
#: Seconds between two watchdog pings at least: a ping a connection would be a message
#: systemd handles for each request of a burst (a WatchdogSec= is tens of seconds).
WATCHDOG_EVERY = ACCEPT_POLL


class ThreadedServer:
    max_connections = 128
    #: At most this many connections of one uid that is not privileged.
    connections_per_uid = 128
    #: Of ``max_connections``, this many only privileged uids may use.
    reserved_connections = 0
    drain_seconds = 10.0
    ready_status = "waiting for requests"

    def __init__(
        self,
        listener: socket.socket,
        *,
        idle_timeout: float,
        notify: Callable[[str], None] | bool = True,
        clock: Clock = time.monotonic,
    ) -> None:
        self.listener = listener
        self.idle_timeout = idle_timeout
        if notify is True:
            self._notify: Callable[[str], None] | None = sd_notify
        else:
            self._notify = notify or None
        #: What the subclass's deadlines are measured on (a test injects its own).
        self.clock = clock
        self.admission = Admission(
            total=self.max_connections,
            per_uid=self.connections_per_uid,
            reserved=self.reserved_connections,
            privileged=self.privileged,
        )
        self.served = 0
        self.refused = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    @property
    def active(self) -> int:
        """Connections being served now."""
        return self.admission.active

    # -- what a subclass says -----------------------------------------------------------

    def handle(self, conn: socket.socket) -> None:
        """Serve one connection; the server closes it afterwards."""
        raise NotImplementedError

    def busy(self, refusal: Refusal) -> bytes:
        """The one message a connection refused by ``refusal`` gets."""
        raise NotImplementedError

    def privileged(self, uid: int) -> bool:
        """Whether ``uid`` may use the reserved connections and has no cap of its own."""
        return False

    # -- the loop -----------------------------------------------------------------------

    def notify(self, *lines: str) -> None:
        if self._notify is not None:
            self._notify("\n".join(lines))

    def _serve_one(self, conn: socket.socket, admitted: Admitted) -> None:
        try:
            self.handle(conn)
        except (OSError, TimeoutError) as exc:
            log.debug("connection.dropped", error=str(exc))
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self.lock:
                self.served += 1
            self.admission.release(admitted)

    def _refuse(self, conn: socket.socket, refusal: Refusal) -> None:
        with self.lock:
            self.refused += 1
            refused = self.refused
        if refused == 1 or refused % 100 == 0:  # a flood is logged, not each of its knocks
            log.warning(
                "connection.refused",
                peer_uid=refusal.uid,
                limit=refusal.limit,
                allowed=refusal.allowed,
                refused_so_far=refused,
            )
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.sendall(self.busy(refusal))
        conn.close()

    def _admit(self, conn: socket.socket) -> Admitted | Refusal | None:
        try:
            uid = peer_uid(conn)
        except OSError as exc:
            log.debug("connection.dropped", error=str(exc))
            conn.close()
            return None
        return self.admission.admit(uid)

    def serve(self) -> None:
        """Accept and serve until stopped (SIGTERM sets ``stopping``) or idle."""
        self.listener.settimeout(ACCEPT_POLL)
        last_activity = time.monotonic()
        self.notify("READY=1", f"STATUS={self.ready_status}")
        log.info("server.ready", socket=str(self.listener.getsockname()))
        pinged = -WATCHDOG_EVERY
        while not self.stopping.is_set():
            if time.monotonic() - pinged >= WATCHDOG_EVERY:
                self.notify("WATCHDOG=1")
                pinged = time.monotonic()
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                if self.active == 0 and self.idle_timeout > 0:
                    if time.monotonic() - last_activity > self.idle_timeout:
                        log.info("server.idle_exit", served=self.served)
                        break
                continue
            except OSError as exc:
                if self.stopping.is_set():
                    break
                log.error("accept.failed", error=str(exc))
                time.sleep(0.1)
                continue
            last_activity = time.monotonic()
            admitted = self._admit(conn)
            if admitted is None:
                continue
            if isinstance(admitted, Refusal):
                self._refuse(conn, admitted)
                continue
            with self.lock:
                served = self.served
            threading.Thread(target=self._serve_one, args=(conn, admitted), daemon=True).start()
            if served and served % 100 == 0:
                self.notify(f"STATUS=serving; {served} connections so far")
        self.notify("STOPPING=1")
        deadline = time.monotonic() + self.drain_seconds
        while time.monotonic() < deadline:
            if self.active == 0:
                break
            self.notify("WATCHDOG=1")
            time.sleep(0.05)
