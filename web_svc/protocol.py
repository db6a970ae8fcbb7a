"""uvicorn's h11 protocol with the limits systemd cannot give a socket with Accept=no.

``MaxConnectionsPerSource=`` works only with ``Accept=yes`` (systemd.socket(5)), and
opsbot-web's socket is ``Accept=no`` (one process serves every connection), so the
process limits itself, per connection, before a byte of the request is parsed:

- at most ``connections_per_source`` connections from one source (limits.source_key of
  the peer address) and ``max_connections`` in all; a connection over either is closed
  the moment it is accepted. On the proxy's Unix socket (``[web] listen = "unix"``) a
  connection has no address: they count only against ``max_connections``, all of which
  are the proxy's (no one else may connect there), and the proxy holds its clients'
  slow and half-sent requests (it buffers each request before it connects);
- a request's headers must be complete within ``header_timeout_seconds`` of the
  connection's start or of the previous response (a client that trickles a byte at a
  time, or opens and stays silent, is closed), and its body within
  ``body_timeout_seconds`` after the headers.

Everything else is uvicorn's own (h11 parsing, keep-alive, flow control); headers larger
than ``MAX_HEADER_BYTES`` are h11's "400 Bad Request".
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from shared_schema.config import WebSettings
from web_svc.limits import source_key

#: The most the request line and headers may take (h11's incomplete-event limit).
MAX_HEADER_BYTES = 8192


class ConnectionCounts:
    """Open connections per source and in all (used from the event loop's thread only)."""

    def __init__(self, settings: WebSettings) -> None:
        self.per_source = settings.connections_per_source
        self.total = settings.max_connections
        self.behind_proxy = settings.listen == "unix"
        self.held: Counter[str] = Counter()
        self.open = 0

    def admit(self, address: str) -> str | None:
        """The key the connection is counted under, or None when a limit refuses it."""
        key = source_key(address)
        if self.open >= self.total:
            return None
        if not self.behind_proxy and self.held[key] >= self.per_source:
            return None
        self.held[key] += 1
        self.open += 1
        return key

    def release(self, key: str) -> None:
        self.open -= 1
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]


class GuardedH11Protocol(H11Protocol):
    """One connection, with the limits above. :func:`guarded_protocol` makes the class a
    server uses (``uvicorn.Config(http=...)``), bound to that server's settings."""

    settings: WebSettings
    counts: ConnectionCounts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counted_as: str | None = None
        self.phase = ""
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.counted_as = self.counts.admit(self.client[0] if self.client else "")
        if self.counted_as is None:
            self.transport.abort()
            return
        self._arm(self.settings.header_timeout_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.counted_as is not None:
            self.counts.release(self.counted_as)
            self.counted_as = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    # -- the deadlines ------------------------------------------------------------------

    def _follow(self) -> None:
        """Move the deadline to the request's phase: waiting for headers (a new deadline
        after each response), for the body (one deadline once the headers are in), or
        for the app (none: its calls have their own timeouts)."""
        state = self.conn.their_state
        if state is h11.IDLE:
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

    def _disarm(self) -> None:
        self.phase = ""
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

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
