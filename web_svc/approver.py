"""The page's one way to root: a request to /run/opsbot/approver.sock
($OPSBOT_APPROVER_SOCKET), one JSON line each way (shared_schema.approver_socket).

The approver tells the page's uid by SO_PEERCRED and lets it ``view``, ``decide`` and
``follow`` (read where the plan a used link decided is now) only. Calls block
(shared_io.framing.exchange), so the app runs them in worker threads, at most
``CONCURRENT_CALLS`` views and follows and ``CONCURRENT_DECIDES`` decides at once: a
flood waits for a thread, it does not make more, and a flood of views (GETs of a link
anyone holding it can send) never makes a decide (an approver's POST) wait behind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.to_thread
from pydantic import ValidationError

from shared_io.errors import PeerProtocolError
from shared_io.framing import exchange
from shared_io.paths import approver_socket_path
from shared_schema.approver_socket import (
    MAX_APPROVER_REPLY_BYTES,
    ApproverReply,
    Decide,
    Decided,
    Follow,
    Followed,
    Refused,
    View,
    Viewed,
    parse_approver_reply,
)
from shared_schema.messages import encode_message

#: The approver re-reads the plan and asks systemd before it answers a decide.
TIMEOUT_SECONDS = 15.0
CONCURRENT_CALLS = 4
CONCURRENT_DECIDES = 2


def approver_socket(env: Mapping[str, str] | None = None) -> Path:
    """$OPSBOT_APPROVER_SOCKET, else /run/opsbot/approver.sock."""
    return approver_socket_path(env)


class ApproverClient:
    """``view``, ``decide`` and ``follow`` on the approver at ``path``; failures to reach
    it are shared_io.errors.SocketUnavailable (PeerProtocolError for a reply that is not
    one)."""

    def __init__(
        self, path: Path, *, timeout: float = TIMEOUT_SECONDS, config_digest: str | None = None
    ) -> None:
        self.path = path
        self.timeout = timeout
        #: Sent with each view and decide: the approver tells check-config which file the
        #: page says it runs.
        self.config_digest = config_digest
        self.limiter = anyio.CapacityLimiter(CONCURRENT_CALLS)
        self.decide_limiter = anyio.CapacityLimiter(CONCURRENT_DECIDES)

    async def view(self, token: str) -> Viewed | Refused:
        reply = await self._ask(View(token=token, config_digest=self.config_digest), self.limiter)
        if not isinstance(reply, Viewed | Refused):
            raise PeerProtocolError(str(self.path), "io", f"answered a view with {reply.op}")
        return reply

    async def decide(
        self, token: str, code: str, confirm: str, reason: str, source: str
    ) -> Decided | Refused:
        request = Decide(
            token=token,
            code=code,
            confirm=confirm,
            reason=reason,
            source=source[:100],
            config_digest=self.config_digest,
        )
        reply = await self._ask(request, self.decide_limiter)
        if not isinstance(reply, Decided | Refused):
            raise PeerProtocolError(str(self.path), "io", f"answered a decide with {reply.op}")
        return reply

    async def follow(self, token: str) -> Followed | Refused:
        reply = await self._ask(Follow(token=token), self.limiter)
        if not isinstance(reply, Followed | Refused):
            raise PeerProtocolError(str(self.path), "io", f"answered a follow with {reply.op}")
        return reply

    async def _ask(
        self, request: View | Decide | Follow, limiter: anyio.CapacityLimiter
    ) -> ApproverReply:
        line = await anyio.to_thread.run_sync(self._exchange, request, limiter=limiter)
        try:
            return parse_approver_reply(line)
        except ValidationError as exc:
            raise PeerProtocolError(
                str(self.path), "io", f"sent a reply that is not one: {exc.error_count()} errors"
            ) from exc

    def _exchange(self, request: View | Decide | Follow) -> bytes:
        return exchange(
            self.path,
            encode_message(request),
            limit=MAX_APPROVER_REPLY_BYTES,
            timeout=self.timeout,
        )
