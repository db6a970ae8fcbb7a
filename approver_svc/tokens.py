"""The one-time tokens of the approve and reject links.

A token is 128 random bits (``secrets.token_urlsafe(16)``: 22 URL-safe characters). The
approver keeps only its sha256, with the plan id, the plan's sha256, the approver and the
decision it is for, when it expires (never later than the approval TTL from when it was
minted, nor than the plan's own expiry) and whether it was used. A token works once: a
decision made with it uses it up, and uses up its sibling too (the other decision's token
for the same plan and approver), so an approve link is dead once its reject link was used
and the other way round. Every refusal of a token the approver does not know says the
same words, whether it was never minted or forged: nothing tells a guesser how close it
came.

With each token comes its confirmation (shared_schema.approver_socket.Confirm): four
characters the notification shows beside the link, never part of its URL, that the
human types with the code. The approver keeps it only hashed with its token's sha256,
and ``decide`` refuses a code sent with another token than the one its confirmation
came with: the page sees the links opened on it, never the message.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from approver_svc.errors import Refusal
from approver_svc.state import ApproverState, TokenRecord
from shared_schema.approver_socket import CONFIRM_ALPHABET, CONFIRM_LENGTH, Decision

TOKEN_BYTES = 16
#: What any token the approver does not know is told: never minted, forged, or pruned.
UNKNOWN = "this link is not valid: it is not one the approver made, or it expired long ago"
HINT = "ask for a fresh link: `opsbot approve ID` as root works without one"


def digest(token: str) -> str:
    """How the approver knows a token: its sha256, hex."""
    return hashlib.sha256(token.encode("ascii", "replace")).hexdigest()


def confirm_digest(key: str, confirm: str) -> str:
    """How the approver knows the confirmation of the token whose sha256 is ``key``."""
    return hashlib.sha256(f"{key}:{confirm.upper()}".encode("ascii", "replace")).hexdigest()


def mint(
    state: ApproverState,
    *,
    plan_id: str,
    sha256: str,
    approver: str,
    decision: Decision,
    expires_at: datetime,
) -> tuple[str, str]:
    """A new token for one decision of ``approver`` on ``plan_id``, and its confirmation
    (only the sha256 of each is kept)."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    confirm = "".join(secrets.choice(CONFIRM_ALPHABET) for _ in range(CONFIRM_LENGTH))
    key = digest(token)
    state.tokens[key] = TokenRecord(
        plan_id=plan_id,
        sha256=sha256,
        approver=approver,
        decision=decision,
        expires_at=expires_at,
        confirm_sha256=confirm_digest(key, confirm),
    )
    return token, confirm


def confirmed(key: str, record: TokenRecord, confirm: str) -> bool:
    """Whether ``confirm`` is the confirmation minted with the token ``key`` (constant
    time; a token minted before confirmations existed has none, and matches nothing)."""
    return bool(record.confirm_sha256) and hmac.compare_digest(
        confirm_digest(key, confirm), record.confirm_sha256
    )


def lookup(state: ApproverState, token: str, now: datetime) -> tuple[str, TokenRecord]:
    """The token's sha256 and record, if it may still be used now; else Refusal("token")."""
    key = digest(token)
    record = state.tokens.get(key)
    if record is None:
        raise Refusal("token", UNKNOWN, hint=HINT)
    if record.used_at is not None:
        raise Refusal(
            "token",
            f"this link was used already ({record.ended_by or 'used'}, "
            f"{record.used_at.isoformat(timespec='seconds')}): each link works once",
            hint=HINT,
        )
    if now >= record.expires_at:
        raise Refusal(
            "token",
            f"this link expired at {record.expires_at.isoformat(timespec='seconds')}",
            hint=HINT,
        )
    return key, record


def decided(state: ApproverState, token: str, now: datetime) -> tuple[TokenRecord, datetime]:
    """The record of a token that decided its plan (used, not merely killed by its
    sibling or by wrong codes, nor spent on a decision that failed), and when, for
    ``follow``, until the link would have expired; else Refusal("token")."""
    record = state.tokens.get(digest(token))
    if record is None or now >= record.expires_at:
        raise Refusal("token", UNKNOWN, hint=HINT)
    if record.used_at is None or record.ended_by != "used":
        raise Refusal(
            "token",
            "this link decided nothing"
            + (f" ({record.ended_by})" if record.ended_by else ": it is still unused"),
        )
    return record, record.used_at


#: ``ended_by`` of a token spent on a decision that then failed.
DECIDED_NOTHING = "used; nothing was decided"


def decided_nothing(state: ApproverState, key: str) -> None:
    """Token ``key`` was used up, but its approve or reject failed: it decided nothing."""
    state.tokens[key].ended_by = DECIDED_NOTHING


def use_up(state: ApproverState, key: str, now: datetime) -> None:
    """Token ``key`` decided: it and its sibling (the other decision, same plan and
    approver) never work again."""
    used = state.tokens[key]
    used.used_at, used.ended_by = now, "used"
    for record in state.tokens.values():
        if (
            record is not used
            and record.used_at is None
            and record.plan_id == used.plan_id
            and record.approver == used.approver
        ):
            record.used_at, record.ended_by = now, f"its {used.decision} link was used"


def burn(state: ApproverState, key: str, now: datetime, why: str) -> None:
    """Token ``key`` never works again (too many wrong codes with it)."""
    record = state.tokens[key]
    record.used_at, record.ended_by = now, why
