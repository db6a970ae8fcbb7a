"""Asking root's opsbot-approver for the notices: ``announce`` on its socket.

The approver answers with the PROPOSED plans it has not announced before, each with an
approve and a reject token per approver (``notices``), and the plans a standing rule
approved since the last announce (``ruled``: no links, only news), and marks them all
announced: asking again gives only what came since. So the request is never repeated
after a timeout (the tokens of a lost reply are gone; the plan can still be approved on
the host, and a ruled plan's record is in ``opsbot policy report``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from notify_svc.errors import NotifyError
from shared_io.errors import PeerProtocolError
from shared_io.framing import exchange
from shared_schema.approver_socket import (
    MAX_APPROVER_REPLY_BYTES,
    Announce,
    Announced,
    Refused,
    parse_approver_reply,
)
from shared_schema.messages import encode_message

TIMEOUT_SECONDS = 30.0


def announce(path: Path, timeout: float = TIMEOUT_SECONDS) -> Announced:
    """What the approver has for us: the plans that wait for a human (``notices``) and
    those a rule approved (``ruled``). SocketUnavailable when it cannot be reached,
    PeerProtocolError for a reply that is not one, NotifyError when it refuses."""
    line = exchange(
        path, encode_message(Announce()), limit=MAX_APPROVER_REPLY_BYTES, timeout=timeout
    )
    try:
        reply = parse_approver_reply(line)
    except ValidationError as exc:
        raise PeerProtocolError(
            str(path), "io", f"sent a reply opsbot-notify cannot read ({exc.error_count()} errors)"
        ) from None
    if isinstance(reply, Refused):
        raise NotifyError(
            f"the approver refused to announce: {reply.kind}: {reply.reason}",
            hint="opsbot-notify must run as the user opsbot-approver expects (opsbot-notify)",
        )
    if not isinstance(reply, Announced):
        raise PeerProtocolError(str(path), "io", f"answered announce with {reply.op!r}")
    return reply
