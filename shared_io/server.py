"""A threaded accept loop for opsbot's Unix socket daemons.

:class:`ThreadedServer` accepts connections and serves each in a thread of its own, at
most ``max_connections`` at once (one more is answered with the subclass's ``busy``
message and closed); it tells systemd it is ready, pings the watchdog while it waits,
exits after ``idle_timeout`` seconds without a connection (the socket unit starts it
again on the next), and on stop lets conversations in flight finish for up to
``drain_seconds``. A subclass says what one connection is (:meth:`handle`); a slow or
silent client holds only its own thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import structlog

from shared_io.activation import notify as sd_notify

log = structlog.get_logger("opsbot.server")

#: Seconds between checks for idleness and stop while no one connects.
ACCEPT_POLL = 0.5


class ThreadedServer:
    max_connections = 128
    drain_seconds = 10.0
    ready_status = "waiting for requests"

    def __init__(
        self,
        listener: socket.socket,
        *,
        idle_timeout: float,
        notify: Callable[[str], None] | bool = True,
    ) -> None:
        self.listener = listener
        self.idle_timeout = idle_timeout
        if notify is True:
            self._notify: Callable[[str], None] | None = sd_notify
        else:
            self._notify = notify or None
        self.slots = threading.BoundedSemaphore(self.max_connections)
        self.active = 0
        self.served = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    # -- what a subclass says -----------------------------------------------------------

    def handle(self, conn: socket.socket) -> None:
        """Serve one connection; the server closes it afterwards."""
        raise NotImplementedError

    def busy(self) -> bytes:
        """The one message a connection beyond ``max_connections`` gets."""
        raise NotImplementedError

    # -- the loop -----------------------------------------------------------------------

    def notify(self, *lines: str) -> None:
        if self._notify is not None:
            self._notify("\n".join(lines))

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except (OSError, TimeoutError) as exc:
            log.debug("connection.dropped", error=str(exc))
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self.lock:
                self.active -= 1
                self.served += 1
            self.slots.release()

    def _refuse(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.sendall(self.busy())
        conn.close()

    def serve(self) -> None:
        """Accept and serve until stopped (SIGTERM sets ``stopping``) or idle."""
        self.listener.settimeout(ACCEPT_POLL)
        last_activity = time.monotonic()
        self.notify("READY=1", f"STATUS={self.ready_status}")
        log.info("server.ready", socket=str(self.listener.getsockname()))
        while not self.stopping.is_set():
            self.notify("WATCHDOG=1")
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                with self.lock:
                    idle = self.active == 0
                if idle and self.idle_timeout > 0:
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
            if not self.slots.acquire(blocking=False):
                self._refuse(conn)
                continue
            with self.lock:
                self.active += 1
                served = self.served
            threading.Thread(target=self._serve_one, args=(conn,), daemon=True).start()
            if served and served % 100 == 0:
                self.notify(f"STATUS=serving; {served} connections so far")
        self.notify("STOPPING=1")
        deadline = time.monotonic() + self.drain_seconds
        while time.monotonic() < deadline:
            with self.lock:
                if self.active == 0:
                    break
            self.notify("WATCHDOG=1")
            time.sleep(0.05)
