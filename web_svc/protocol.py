"""uvicorn's h11 protocol with the limits systemd cannot give a socket with Accept=no.

``MaxConnectionsPerSource=`` works only with ``Accept=yes`` (systemd.socket(5)), and
opsbot-web's socket is ``Accept=no`` (one process serves every connection), so the
process limits itself, per connection, before a byte of the request is parsed:

- at most ``connections_per_source`` connections from one source (limits.source_key of
  the peer address) and ``max_connections`` in all. A connection over either does not
  wait behind those that hold them: it takes the place of the one, of that source or of
  all, that the page has waited on longest (for a request's headers or body, or to read
  a response), and only when the page waits on none of them (each is a request being
  answered) is it closed the moment it is accepted. On TCP any local user can connect
  from any of the 2^24 loopback addresses, the proxy's 127.0.0.1 too, so no count of
  addresses can keep her out; but she cannot make the page wait on her connections
  without them being the first to go (nginx does the same when its worker_connections
  run out: "reusing connections"). On the proxy's Unix socket (``[web] listen =
  "unix"``) a connection has no address: they count only against ``max_connections``,
  all of which are the proxy's (no one else may connect there), and the proxy holds its
  clients' slow and half-sent requests (it buffers each request before it connects);
- a request's headers must be complete within ``header_timeout_seconds`` of the
  connection's start or of the previous response (a client that trickles a byte at a
  time, or opens and stays silent, is closed), and its body within
  ``body_timeout_seconds`` after the headers; a client that stops reading its responses
  (it pipelines requests and never reads, until uvicorn stops writing) is closed after
  ``header_timeout_seconds`` too.

Everything else is uvicorn's own (h11 parsing, keep-alive, flow control); headers larger
than ``MAX_HEADER_BYTES`` are h11's "400 Bad Request".
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Protocol

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from shared_schema.config import WebSettings
from web_svc.limits import source_key

#: The most the request line and headers may take (h11's incomplete-event limit).
MAX_HEADER_BYTES = 8192


class Waiter(Protocol):
    """A connection as :class:`ConnectionCounts` sees it: something it can close."""

    def shut(self) -> None:
        """Close the connection now (its count is already released)."""


class ConnectionCounts:
    """Open connections per source and in all, and which of them the page waits on,
    longest first (used from the event loop's thread only)."""

    def __init__(self, settings: WebSettings) -> None:
        self.per_source = settings.connections_per_source
        self.total = settings.max_connections
        self.behind_proxy = settings.listen == "unix"
        self.held: Counter[str] = Counter()
        #: Every connection counted, and the source it counts under.
        self.sources: dict[Waiter, str] = {}
        #: The connections the page waits on, per source and in all, each in the order
        #: it began to wait (dicts keep it): the first has waited longest.
        self.waiting_of: dict[str, dict[Waiter, None]] = {}
        self.waiting_all: dict[Waiter, None] = {}

    @property
    def open(self) -> int:
        return len(self.sources)

    def admit(self, conn: Waiter, address: str) -> bool:
        """Count ``conn`` from ``address``, shutting the connection waited on longest of
        its source (at ``connections_per_source``) or of all (at ``max_connections``) to
        make room; False, and nothing shut, when there is no room to make."""
        key = "" if self.behind_proxy else source_key(address)
        over_source = not self.behind_proxy and self.held[key] >= self.per_source
        if over_source and not self.waiting_of.get(key):
            return False
        if not over_source and self.open >= self.total and not self.waiting_all:
            return False
        if over_source:
            self._shut(next(iter(self.waiting_of[key])))
        if self.open >= self.total:
            self._shut(next(iter(self.waiting_all)))
        self.sources[conn] = key
        self.held[key] += 1
        return True

    def waiting(self, conn: Waiter) -> None:
        """The page now waits on ``conn`` (for a request, a body, or to read): it goes
        last in the line of those that may be shut."""
        key = self.sources.get(conn)
        if key is None:
            return
        self._not_waiting(conn, key)
        self.waiting_of.setdefault(key, {})[conn] = None
        self.waiting_all[conn] = None

    def busy(self, conn: Waiter) -> None:
        """``conn``'s request is being answered: it may not be shut for another."""
        key = self.sources.get(conn)
        if key is not None:
            self._not_waiting(conn, key)

    def release(self, conn: Waiter) -> None:
        """``conn`` has closed (again, or never counted: nothing happens)."""
        key = self.sources.pop(conn, None)
        if key is None:
            return
        self._not_waiting(conn, key)
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]

    def _not_waiting(self, conn: Waiter, key: str) -> None:
        self.waiting_all.pop(conn, None)
        line = self.waiting_of.get(key)
        if line is not None:
            line.pop(conn, None)
            if not line:
                del self.waiting_of[key]

    def _shut(self, conn: Waiter) -> None:
        self.release(conn)
        conn.shut()


class GuardedH11Protocol(H11Protocol):
    """One connection, with the limits above. :func:`guarded_protocol` makes the class a
    server uses (``uvicorn.Config(http=...)``), bound to that server's settings."""

    settings: WebSettings
    counts: ConnectionCounts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = ""
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.counts.admit(self, self.client[0] if self.client else ""):
            self.transport.abort()
            return
        self._arm(self.settings.header_timeout_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.counts.release(self)
        super().connection_lost(exc)

    def shut(self) -> None:
        """Another connection takes this one's place (ConnectionCounts.admit)."""
        self._disarm()
        if not self.transport.is_closing():
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._follow()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._follow()

    # -- the deadlines ------------------------------------------------------------------

    def _follow(self) -> None:
        """Move the deadline to what the page waits for: a response to be read (uvicorn
        stopped writing: one deadline until it writes again), a request's headers (a new
        deadline after each response), its body (one deadline once the headers are in),
        or the app (none: its calls have their own timeouts)."""
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if self.flow.write_paused:
            if self.phase != "reading":
                self._arm(self.settings.header_timeout_seconds, "reading")
        elif state is h11.IDLE:
            if self.phase != "headers":
                self._arm(self.settings.header_timeout_seconds, "headers")
        elif state is h11.SEND_BODY:
            if self.phase != "body":
                self._arm(self.settings.body_timeout_seconds, "body")
        else:
            self._disarm()

    def _arm(self, seconds: float, phase: str = "headers") -> None:
        self._disarm()
        self.phase = phase
        self.deadline = self.loop.call_later(seconds, self._deadline_passed)
        self.counts.waiting(self)

    def _disarm(self) -> None:
        self.phase = ""
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.counts.busy(self)

    def _deadline_passed(self) -> None:
        self.deadline = None
        if not self.transport.is_closing():
            self.transport.abort()


def guarded_protocol(settings: WebSettings) -> type[GuardedH11Protocol]:
    """The protocol class for one server: its own counts, ``settings``' limits."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"settings": settings, "counts": ConnectionCounts(settings)},
    )
