"""The generic webhook's signature, for opsbot-notify and for whoever receives it.

Each POST carries two headers:

    X-Opsbot-Timestamp: 1764614400                 (unix seconds when it was sent)
    X-Opsbot-Signature: sha256=<64 hex digits>     HMAC-SHA256(key, f"{timestamp}.{body}")

computed over the exact bytes of the body, with the key that is the credential
``notify_<channel>`` on the host (the receiver holds the same bytes). A receiver must
compute the HMAC over the raw body it received (before any JSON parsing), compare it in
constant time, and refuse a timestamp more than 5 minutes from its own clock, so that a
captured request cannot be replayed later; within those 5 minutes, the body's
``delivery`` id lets it drop a repeat. :func:`verify_signature` does all of it.
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="
#: A receiver refuses a request whose timestamp is further than this from its clock.
MAX_SKEW_SECONDS = 300


def sign(key: bytes, timestamp: int, body: bytes) -> str:
    """The X-Opsbot-Signature header for ``body`` sent at ``timestamp``."""
    mac = hmac.new(key, str(timestamp).encode("ascii") + b"." + body, hashlib.sha256)
    return PREFIX + mac.hexdigest()


def verify_signature(
    key: bytes,
    timestamp: str | int,
    body: bytes,
    signature: str,
    now: float,
    max_skew: float = MAX_SKEW_SECONDS,
) -> bool:
    """Whether ``signature`` (the X-Opsbot-Signature header) signs ``body`` with ``key``
    at ``timestamp`` (the X-Opsbot-Timestamp header), and that timestamp is within
    ``max_skew`` seconds of ``now`` (the receiver's clock, unix seconds). The HMAC is
    compared in constant time; a malformed header is simply False."""
    if isinstance(timestamp, str):
        if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
            return False
        timestamp = int(timestamp)
    if abs(now - timestamp) > max_skew:
        return False
    expected = sign(key, timestamp, body)
    if not signature.isascii():
        return False
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii"))
