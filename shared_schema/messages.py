"""One message on any opsbot socket: a JSON object on one line, decoded strictly.

Both sockets (the executor's and the diagnose service's) speak newline-delimited JSON;
a message is at most ``MAX_MESSAGE_BYTES`` (a request) or ``MAX_REPLY_BYTES`` (a reply,
which may list every plan), UTF-8, without duplicate keys, NaN or infinite numbers, and
nested at most ``MAX_NESTING`` levels. :func:`decode_json_object` enforces all of that
before a model sees the data; :func:`encode_message` writes a model as canonical JSON and
the newline that ends it. Reading the bytes off a socket is shared_io.framing's job.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

from shared_schema.canonical import canonical_json

if TYPE_CHECKING:  # the console decodes replies without building a model
    from shared_schema._model import Model

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_REPLY_BYTES",
    "WireError",
    "decode_json_object",
    "encode_message",
]

MAX_MESSAGE_BYTES = 64 * 1024
# A reply may be far larger than a request: PLANS lists every stored plan (some 350 bytes
# each), so 64 KiB would stop `opsbot plans` at about 190 plans.
MAX_REPLY_BYTES = 16 * 1024 * 1024
MAX_NESTING = 32


class WireError(Exception):
    """A message that is not a well-formed request or reply; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


#: Everything in a message but the brackets that open and close its arrays and objects.
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise WireError(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _depth(value: Any, limit: int) -> int:
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _bad_constant(name: str) -> Any:
    raise WireError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e999 would silently become inf, which canonical JSON cannot print back.
    value = float(text)
    if not math.isfinite(value):
        raise WireError(f"number {text[:40]} is out of range")
    return value


def decode_json_object(line: bytes, limit: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Decode one message: UTF-8 JSON object, no duplicate keys, bounded size and depth.

    ``limit``: the most bytes accepted (a request's 64 KiB unless a reply is read)."""
    if len(line) > limit:
        raise WireError(f"message is larger than {limit} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"message is not valid UTF-8 (byte {exc.start})") from exc
    if "\x00" in text:
        raise WireError("message contains a NUL byte")
    # Refuse deep nesting before json recurses into it (the brackets alone walked: a
    # message is mostly other characters).
    opened = 0
    deepest = 0
    for char in _NOT_A_BRACKET.sub("", text):
        if char in "[{":
            opened += 1
            deepest = max(deepest, opened)
        elif char in "]}":
            opened -= 1
    if deepest > MAX_NESTING * 2:
        raise WireError(f"message is nested deeper than {MAX_NESTING} levels")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_bad_constant,
            parse_float=_finite_float,
        )
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WireError(f"message is not valid JSON: {str(exc)[:120]}") from exc
    if not isinstance(value, dict):
        raise WireError(f"a message is a JSON object, not {type(value).__name__}")
    if _depth(value, MAX_NESTING) > MAX_NESTING:
        raise WireError(f"message is nested deeper than {MAX_NESTING} levels")
    return value


def check_version(obj: dict[str, Any], version: int, side: str) -> None:
    """WireError unless ``obj`` says it speaks protocol ``version``: that integer, not
    true, "1" or 1.0. ``side`` names who is refusing (``this executor``)."""
    said = obj.get("v")
    if type(said) is not int or said != version:
        raise WireError(f"unsupported protocol version {said!r}; {side} speaks v={version}")


def encode_message(message: Model) -> bytes:
    """One message as canonical JSON plus the newline that ends it."""
    return canonical_json(message.model_dump(mode="json", exclude_none=True)) + b"\n"
