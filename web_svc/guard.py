"""The ASGI middleware in front of every request, cheap enough to face a flood:

1. the source: the peer's address on TCP, where X-Forwarded-For and -Proto are never
   believed (any local user can connect there); on the Unix socket (``[web] listen =
   "unix"``), which only the reverse proxy's group may connect to, the last
   X-Forwarded-For address (the proxy replaces the header) and X-Forwarded-Proto;
2. the rate limits (limits.RateLimiter): over them, ``429`` with ``Retry-After`` and a
   one-line body, no template, no approver;
3. the body cap: a Content-Length over ``max_body_bytes`` is ``413`` before a byte of the
   body is read; a body without one (chunked) is counted as it arrives and cut off the
   same way;
4. the security headers, on every response (the token is in the URL: no referrer leaves
   for another site, no cache keeps the page, no frame shows it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from web_svc.limits import RateLimiter, source_key

SECURITY_HEADERS = [
    # Referrer-Policy same-origin, not no-referrer: with no-referrer a browser sends
    # "Origin: null" on the form's POST, and the Origin check needs the real one. No
    # other origin ever gets a Referer (the page links only to its own status view and
    # loads nothing else).
    (b"referrer-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"x-robots-tag", b"noindex, nofollow"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


@dataclass(frozen=True)
class Client:
    """Who sent a request, as far as this unit may believe: ``source`` (an address) and
    whether it came over https (directly, or to a trusted proxy)."""

    source: str
    https: bool


class BodyTooLarge(Exception):
    pass


#: The source of a request on the proxy's socket that names no client (a proxy that does
#: not set X-Forwarded-For): all such requests share it, and its limits.
UNNAMED = "proxy"


def client_of(scope: Scope, behind_proxy: bool) -> Client:
    peer = scope.get("client")
    https = scope.get("scheme") == "https"
    if not behind_proxy:
        return Client(str(peer[0]) if peer else "", https)
    headers = _header_lists(scope)
    forwarded = [a.strip() for a in b",".join(headers.get(b"x-forwarded-for", [])).split(b",")]
    address = forwarded[-1].decode("latin-1") if forwarded[-1] else UNNAMED
    proto = headers.get(b"x-forwarded-proto", [])
    if proto:
        https = proto[-1].strip().lower() == b"https"
    return Client(address, https)


def _header_lists(scope: Scope) -> dict[bytes, list[bytes]]:
    lists: dict[bytes, list[bytes]] = {}
    for name, value in scope.get("headers", []):
        lists.setdefault(bytes(name).lower(), []).append(bytes(value))
    return lists


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), or None."""
    for key, value in scope.get("headers", []):
        if bytes(key).lower() == name:
            return bytes(value)
    return None


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        limiter: RateLimiter,
        max_body_bytes: int,
        behind_proxy: bool,
        content_security_policy: str,
    ) -> None:
        self.app = app
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.behind_proxy = behind_proxy
        self.headers = [
            *SECURITY_HEADERS,
            (b"content-security-policy", content_security_policy.encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = client_of(scope, self.behind_proxy)
        scope.setdefault("state", {})["client"] = client
        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        wait = self.limiter.retry_after(source_key(client.source))
        if wait:
            retry = str(max(1, math.ceil(wait))).encode()
            await _plain(secured, 429, b"Too many requests; try again later.\n", retry)
            return
        length = header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _plain(secured, 413, b"Request too large.\n")
            return

        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counted, secured)
        except BodyTooLarge:
            if started:
                raise
            await _plain(secured, 413, b"Request too large.\n")


async def _plain(send: Send, status: int, body: bytes, retry_after: bytes | None = None) -> None:
    headers: list[Any] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after))
    if status == 413:
        headers.append((b"connection", b"close"))  # the rest of the body is not read
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
