"""POSTing JSON to a model server, with retries where they can help.

HTTP 429 and 5xx, and a reply cut off in the middle (the server closed the connection
before the whole body came), are retried ``max_retries`` times with exponential backoff
(``base_delay * 2**attempt``), or after ``Retry-After`` when the server sent one (seconds,
or an HTTP date); either is capped at ``max_delay``. Everything else that stops a reply -
refused connection, timeout, other HTTP errors, retries spent, a body that is not a JSON
object - raises :class:`ModelUnavailable` (a ``diagnose_svc.errors.PolicyError``), which
the runtime turns into a note.

The API key goes in the headers the provider gives (``Authorization: Bearer`` by default)
and appears in no message, repr or log event: error bodies quoted in messages have it
masked.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import structlog

from diagnose_svc.errors import PolicyError
from diagnose_svc.model_settings import ModelEndpoint

log = structlog.get_logger("diagnose_svc.policies.http")

_ERROR_SNIPPET = 200
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


class ModelUnavailable(PolicyError):
    """The model gave no usable reply: unreachable, timed out, refused, or not speaking JSON.

    ``message`` names the model and endpoint (never the key); ``hint`` what to check;
    ``status`` is the last HTTP status, if there was one.
    """

    def __init__(self, message: str, hint: str | None = None, *, status: int | None = None):
        super().__init__(message, hint)
        self.status = status


def _retry_after_seconds(value: str, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds to wait: a number of seconds, or an HTTP date."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
        return max(0.0, seconds)
    return seconds if seconds >= 0 and not math.isnan(seconds) else None


def bearer(key: str) -> dict[str, str]:
    """``Authorization: Bearer KEY``, as OpenAI-compatible servers expect it."""
    return {"Authorization": f"Bearer {key}"}


def printable(text: str) -> str:
    return _UNPRINTABLE.sub(" ", text).strip()


class ModelClient:
    """One endpoint of one model server: ``post(body)`` returns the reply's JSON object.

    ``auth`` turns the key into the headers that carry it (``bearer`` by default);
    ``transport`` replaces httpx's network transport (tests: ``httpx.MockTransport``);
    ``sleep``, ``base_delay`` and ``max_delay`` govern backoff. The client ignores proxy
    and netrc settings from the environment (``trust_env=False``): what the daemon talks
    to is decided by its config alone.
    """

    def __init__(
        self,
        settings: ModelEndpoint,
        endpoint: str,
        *,
        auth: Callable[[str], Mapping[str, str]] | None = None,
        transport: httpx.BaseTransport | None = None,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep
        headers = {"Accept": "application/json"}
        if settings.api_key is not None:
            headers.update((auth or bearer)(settings.api_key.get_secret_value()))
        self._client = httpx.Client(
            transport=transport,
            headers=headers,
            timeout=settings.timeout_seconds,
            trust_env=False,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            try:
                response = self._client.post(self.endpoint, json=body)
            except httpx.TimeoutException as exc:
                raise self.unavailable(
                    f"did not answer within {self.settings.timeout_seconds:g} s"
                    f" ({type(exc).__name__})",
                    hint="raise [diagnose.model] timeout_seconds, or check the server's load",
                ) from exc
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                # The reply was cut off: a server restarting, a proxy timing out a stream.
                if attempt + 1 < attempts:
                    delay = self._delay(attempt, None)
                    log.warning("model.retrying", cut=type(exc).__name__, attempt=attempt + 1)
                    self._sleep(delay)
                    continue
                raise self.unavailable(
                    f"cut its reply off {attempts} times ({type(exc).__name__})",
                    hint="the server or a proxy in front of it closes connections early",
                ) from exc
            except httpx.HTTPError as exc:
                raise self.unavailable(
                    f"cannot be reached: {printable(str(exc)) or type(exc).__name__}",
                    hint="is the model server running, and is api_url right?",
                ) from exc
            status = response.status_code
            if status == 429 or status >= 500:
                if attempt + 1 < attempts:
                    delay = self._delay(attempt, response.headers.get("Retry-After"))
                    log.warning("model.retrying", status=status, attempt=attempt + 1, delay=delay)
                    self._sleep(delay)
                    continue
                raise self.unavailable(
                    f"answered HTTP {status} {attempts} times: {self._snippet(response)}",
                    status=status,
                    hint="the server is overloaded or failing; the next run will try again",
                )
            if status != 200:
                raise self.unavailable(
                    f"answered HTTP {status}: {self._snippet(response)}", status=status
                )
            try:
                reply = response.json()
            except ValueError:
                reply = None
            if not isinstance(reply, dict):
                raise self.unavailable(
                    f"answered with something that is not JSON: {self._snippet(response)}",
                    status=status,
                    hint="api_url must be the OpenAI-compatible base, e.g. http://host:8080/v1",
                )
            return reply
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self._base_delay * 2.0**attempt
        if retry_after is not None:
            seconds = _retry_after_seconds(retry_after)
            if seconds is not None:
                delay = seconds
        return min(delay, self._max_delay)

    def _snippet(self, response: httpx.Response) -> str:
        """The start of an error body, printable, with the key masked (some APIs echo it).

        The key is masked in the whole body before it is cut, so no head of it is left
        at the cut.
        """
        text = response.text
        if self.settings.api_key is not None:
            text = text.replace(self.settings.api_key.get_secret_value(), "[key]")
        return printable(text)[:_ERROR_SNIPPET] or "(empty body)"

    def unavailable(
        self, what: str, *, status: int | None = None, hint: str | None = None
    ) -> ModelUnavailable:
        message = f"model {self.settings.model} at {self.endpoint} {what}"
        log.warning("model.unavailable", endpoint=self.endpoint, status=status, reason=what)
        return ModelUnavailable(message, hint, status=status)
