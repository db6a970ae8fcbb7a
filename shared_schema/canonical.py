"""Canonical JSON: one byte string per value, so one fingerprint per plan.

Keys sorted, no insignificant whitespace, UTF-8 kept as UTF-8 (no ``\\u`` escapes for
printable text), and no floats that could print two ways (plans hold none).
"""

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex"]


def canonical_json(value: Any) -> bytes:
    """Return the canonical UTF-8 JSON bytes of a JSON-compatible value."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
