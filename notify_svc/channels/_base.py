"""The one interface every channel implements, and what a channel is built from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from notify_svc.credentials import Credentials
from notify_svc.errors import CredentialError, DeliveryFailed
from notify_svc.message import Message

USER_AGENT = "opsbot-notify/1"


class Sender(Protocol):
    """Sends one message, once: returns when it went out, raises DeliveryFailed when not
    (never anything else for a failure of the network or the receiver)."""

    def send(self, message: Message) -> None: ...


@dataclass(frozen=True)
class Context:
    """What a channel is built with: the unit's credentials, the HTTP client (its
    timeout is the per-try ``[notify] timeout_seconds``), and the wall clock (unix
    seconds, for the webhook's timestamp)."""

    credentials: Credentials
    http: httpx.Client
    timeout_seconds: float
    clock: Callable[[], float]


def http_client(
    timeout_seconds: float, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    """The run's HTTP client: no proxies from the environment, no redirects (a redirect
    could carry a message to a host the config did not name)."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout_seconds),
        trust_env=False,
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        transport=transport,
    )


def post(http: httpx.Client, url: str, *, content: bytes, headers: dict[str, str]) -> None:
    """POST ``content``; DeliveryFailed unless the receiver answers 2xx. A 4xx other
    than 408 and 429 is permanent (trying again sends the same request); the reason
    never quotes the URL (a Slack URL is a secret)."""
    try:
        response = http.post(url, content=content, headers=headers)
    except httpx.TimeoutException:
        raise DeliveryFailed("no answer within the timeout") from None
    except httpx.HTTPError as exc:
        raise DeliveryFailed(f"{type(exc).__name__}: {_no_url(str(exc), url)}") from None
    if 200 <= response.status_code < 300:
        return
    status = response.status_code
    permanent = 400 <= status < 500 and status not in (408, 429)
    raise DeliveryFailed(f"HTTP {status} {response.reason_phrase}".strip(), permanent=permanent)


def _no_url(text: str, url: str) -> str:
    return text.replace(url, "<url>")[:200]


def webhook_url(context: Context, name: str, holds: str) -> str:
    """Channel ``name``'s credential, which must hold an http(s) URL (``holds`` says
    which, for the error: the URL is the secret, never quoted)."""
    url = context.credentials.require_text(name)
    if not url.startswith(("https://", "http://")):
        raise CredentialError(f"credential notify_{name} must hold {holds}")
    return url


def header_text(value: str) -> str:
    """``value`` as an HTTP header may carry it: printable ASCII on one line."""
    return "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in value)[:250]
