"""Root asking its opsbot-approver one thing over /run/opsbot/approver.sock: the standing
rules' requests (``rules``, ``policy-report``, ``policy-switch``), from opsbot-rules.service
and ``opsbot policy``. One request, one reply line (shared_io.framing); a refusal or a
reply of another kind is an OpsbotError carrying the approver's words."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from shared_io.errors import OpsbotError, PeerProtocolError
from shared_io.framing import exchange
from shared_io.paths import approver_socket_path
from shared_schema._model import Model
from shared_schema.approver_socket import (
    MAX_APPROVER_REPLY_BYTES,
    Refused,
    parse_approver_reply,
)
from shared_schema.messages import encode_message

TIMEOUT_SECONDS = 60.0
Reply = TypeVar("Reply", bound=Model)


class ApproverRefused(OpsbotError):
    """The approver refused the request (its words are the message)."""

    exit_status = 77  # EX_NOPERM: the only refusals here are of who asks, or its failure


def ask_approver(
    request: Model,
    expect: type[Reply],
    *,
    path: Path | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> Reply:
    """The approver's reply to ``request``, of type ``expect``. SocketUnavailable when it
    cannot be reached; ApproverRefused when it refuses; PeerProtocolError otherwise."""
    where = path or approver_socket_path()
    line = exchange(where, encode_message(request), limit=MAX_APPROVER_REPLY_BYTES, timeout=timeout)
    try:
        reply = parse_approver_reply(line)
    except ValidationError as exc:
        raise PeerProtocolError(
            str(where), "io", f"sent a reply that is not one ({exc.error_count()} errors)"
        ) from None
    if isinstance(reply, Refused):
        raise ApproverRefused(
            f"opsbot-approver refused: {reply.reason}",
            hint="journalctl -u opsbot-approver.service says more",
        )
    if not isinstance(reply, expect):
        raise PeerProtocolError(str(where), "io", f"answered with {reply.op!r}")
    return reply


__all__ = ["ApproverRefused", "ask_approver"]
