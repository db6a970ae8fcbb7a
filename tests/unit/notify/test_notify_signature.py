"""The generic webhook's signature, as a receiver checks it: HMAC-SHA256 over
``timestamp + "." + body`` with the channel's key, refused when the body, the signature,
the key or the timestamp is not the one signed, or the timestamp is more than 5 minutes
from the receiver's clock."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from notify_svc import MAX_SKEW_SECONDS, sign, verify_signature

KEY = b"k3y-of-the-ops-hook"
BODY = b'{"event":"plan.proposed","plan_id":"20261201-183500-1a2b3c4d"}'
STAMP = 1764614100


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    """What a receiver written from docs/operating.md computes: the same header, byte for
    byte."""
    mac = hmac.new(KEY, f"{STAMP}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(KEY, STAMP, BODY) == f"sha256={mac}"
    assert sign(KEY, STAMP, BODY) == (
        "sha256=" + hmac.new(KEY, b"1764614100." + BODY, hashlib.sha256).hexdigest()
    )


def test_a_fresh_signature_verifies() -> None:
    """The signature made now passes, with the timestamp as int or as the header string."""
    signature = sign(KEY, STAMP, BODY)
    assert verify_signature(KEY, STAMP, BODY, signature, now=STAMP + 1)
    assert verify_signature(KEY, str(STAMP), BODY, signature, now=STAMP - 1)


@pytest.mark.parametrize(
    "body",
    [
        BODY.replace(b"183500", b"183501"),
        BODY + b" ",
        BODY[:-1],
        b"",
    ],
)
def test_a_tampered_body_fails(body: bytes) -> None:
    """One byte changed, added or removed in the body: refused."""
    assert not verify_signature(KEY, STAMP, body, sign(KEY, STAMP, BODY), now=STAMP)


def test_another_key_or_another_timestamp_fails() -> None:
    """A signature by another key, or the signature moved to another timestamp (a
    replay with a fresh X-Opsbot-Timestamp), is refused."""
    signature = sign(KEY, STAMP, BODY)
    assert not verify_signature(b"other key", STAMP, BODY, signature, now=STAMP)
    assert not verify_signature(KEY, STAMP + 60, BODY, signature, now=STAMP + 60)


@pytest.mark.parametrize("offset", [MAX_SKEW_SECONDS + 1, -(MAX_SKEW_SECONDS + 1), 86400])
def test_an_old_or_future_timestamp_fails(offset: int) -> None:
    """A correctly signed request whose timestamp is more than 5 minutes from the
    receiver's clock (a captured request replayed later, or a clock far off) is refused;
    5 minutes exactly still passes."""
    signature = sign(KEY, STAMP, BODY)
    assert not verify_signature(KEY, STAMP, BODY, signature, now=STAMP + offset)
    assert verify_signature(KEY, STAMP, BODY, signature, now=STAMP + MAX_SKEW_SECONDS)
    assert verify_signature(KEY, STAMP, BODY, signature, now=STAMP - MAX_SKEW_SECONDS)


@pytest.mark.parametrize(
    ("timestamp", "signature"),
    [
        ("", None),
        ("1764614100.0", None),
        ("-1764614100", None),
        ("１７６４６１４１００", None),  # fullwidth digits: isdigit() but not ASCII
        (str(STAMP), ""),
        (str(STAMP), "sha1=" + "0" * 40),
        (str(STAMP), "sha256=" + "0" * 64),
        (str(STAMP), "sha256=é"),
    ],
)
def test_malformed_headers_fail_without_raising(timestamp: str, signature: str | None) -> None:
    """A missing, fractional, signed or non-ASCII timestamp, or an empty, foreign or
    non-ASCII signature header, is simply False."""
    signature = sign(KEY, STAMP, BODY) if signature is None else signature
    assert verify_signature(KEY, timestamp, BODY, signature, now=STAMP) is False
