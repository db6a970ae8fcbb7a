"""A threaded accept loop for opsbot's Unix socket daemons.

:class:`ThreadedServer` accepts connections and serves each in a thread of its own (a
thread that served one waits a while to be handed the next, so that a burst does not
start a thread per connection). Who may hold one is decided in the accept loop from the
peer's uid (SO_PEERCRED), before a byte is read (shared_io.admission): at most
``max_connections`` at once, at most
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
import contextvars
import queue
import select
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
    #: Seconds a thread that served a connection waits for another before it ends: the
    #: connections of a burst go to threads already running, not each to a new one.
    thread_idle_seconds = 10.0

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
        #: Connections handed to threads waiting for one (None: end, the server stopped).
        self._handed: queue.SimpleQueue[tuple[socket.socket, Admitted] | None] = queue.SimpleQueue()
        #: Threads waiting for a connection that none was handed to yet (under ``lock``).
        self._waiting_threads = 0
        self._closed = False
        #: When a connection last came, or the subclass last had work of its own.
        self.last_activity = time.monotonic()

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

    def touch(self) -> None:
        """Count work the daemon found itself (not a connection) as activity: it is not
        idle while it has some."""
        self.last_activity = time.monotonic()

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

    def _dispatch(self, conn: socket.socket, admitted: Admitted) -> None:
        """Hand ``conn`` to a thread waiting for one, or start a thread for it."""
        with self.lock:
            if self._waiting_threads:
                self._waiting_threads -= 1
                self._handed.put((conn, admitted))
                return
        threading.Thread(target=self._serve_many, args=(conn, admitted), daemon=True).start()

    def _serve_many(self, conn: socket.socket, admitted: Admitted) -> None:
        """Serve ``conn``, then each connection handed over, until none comes within
        ``thread_idle_seconds`` or the server stops. As many threads wait as connections
        were served at once lately, so the accept loop starts one only as a burst grows."""
        job: tuple[socket.socket, Admitted] | None = (conn, admitted)
        while job is not None:
            # Each connection in a context of its own, empty as a new thread's: what one
            # conversation binds (structlog's contextvars) never reaches the next.
            contextvars.Context().run(self._serve_one, *job)
            with self.lock:
                if self._closed:
                    return
                self._waiting_threads += 1
            try:
                job = self._handed.get(timeout=self.thread_idle_seconds)
            except queue.Empty:
                with self.lock:
                    if self._waiting_threads:  # none was handed over to a waiting thread
                        self._waiting_threads -= 1
                        return
                job = self._handed.get()  # one was, and no other thread is left to take it

    def _release_waiting_threads(self) -> None:
        with self.lock:
            self._closed = True
            waiting, self._waiting_threads = self._waiting_threads, 0
        for _ in range(waiting):
            self._handed.put(None)

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
        # Non-blocking, and waited on with poll(2) only when no connection is queued: in a
        # burst a connection costs the loop one accept(2) (with a timeout it cost a poll,
        # the accept and an ioctl making the new socket blocking, each a wait for the GIL
        # while the conversations' threads hold it).
        self.listener.setblocking(False)
        queued = select.poll()
        queued.register(self.listener, select.POLLIN)
        self.touch()
        self.notify("READY=1", f"STATUS={self.ready_status}")
        log.info("server.ready", socket=str(self.listener.getsockname()))
        pinged = -WATCHDOG_EVERY
        while not self.stopping.is_set():
            if time.monotonic() - pinged >= WATCHDOG_EVERY:
                self.notify("WATCHDOG=1")
                pinged = time.monotonic()
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                if queued.poll(ACCEPT_POLL * 1000):
                    continue
                if self.active == 0 and self.idle_timeout > 0:
                    if time.monotonic() - self.last_activity > self.idle_timeout:
                        log.info("server.idle_exit", served=self.served)
                        break
                continue
            except OSError as exc:
                if self.stopping.is_set():
                    break
                log.error("accept.failed", error=str(exc))
                time.sleep(0.1)
                continue
            self.touch()
            admitted = self._admit(conn)
            if admitted is None:
                continue
            if isinstance(admitted, Refusal):
                self._refuse(conn, admitted)
                continue
            with self.lock:
                served = self.served
            self._dispatch(conn, admitted)
            if served and served % 100 == 0:
                self.notify(f"STATUS=serving; {served} connections so far")
        self.notify("STOPPING=1")
        self._release_waiting_threads()
        deadline = time.monotonic() + self.drain_seconds
        while time.monotonic() < deadline:
            if self.active == 0:
                break
            self.notify("WATCHDOG=1")
            time.sleep(0.05)
