"""One GET of a configured health endpoint, probed one way by whoever asks: the
diagnosis's ``http_get_health`` tool, opsbot-verify, and root's approver before a standing
rule approves a restart of a unit that runs (plans.readings).

Only a ``[diagnose.health.<name>]`` target is ever probed: its URL is root's config,
never a caller's. Redirects are not followed, nothing is kept between probes (each opens
its own connection, as a user's would), and the body is read only so far.
"""

from __future__ import annotations

import functools
import ssl
import time
from dataclasses import dataclass
from typing import Literal

import httpx

from shared_schema import HealthTarget

__all__ = ["BODY_READ_BYTES", "FAILING", "Outcome", "Probe", "probe"]

USER_AGENT = "opsbot/1"
#: Bytes of a body read at most.
BODY_READ_BYTES = 4096

Outcome = Literal["ok", "unexpected_status", "timeout", "connection_refused", "connection_error"]
#: What says the endpoint fails: it answered wrong, not in time, or nothing listens. A
#: ``connection_error`` (no route, a name that does not resolve, a sandbox's filter) says
#: only that the prober could not reach it.
FAILING: frozenset[Outcome] = frozenset({"unexpected_status", "timeout", "connection_refused"})


@dataclass(frozen=True)
class Probe:
    """What one GET gave."""

    outcome: Outcome
    status: int | None = None
    latency_ms: int | None = None
    body: bytes = b""
    location: str | None = None
    error: str | None = None

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING


@functools.cache
def _client() -> httpx.Client:
    """The one HTTP client of this process, its TLS context loaded once (the CA store and
    a client for each probe cost more than the probe of a local endpoint)."""
    return httpx.Client(
        follow_redirects=False,
        trust_env=False,
        verify=ssl.create_default_context(),
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def probe(target: HealthTarget, read_bytes: int = BODY_READ_BYTES) -> Probe:
    """GET ``target.url`` once, within the target's timeout."""
    started = time.monotonic()
    try:
        with _client().stream("GET", str(target.url), timeout=target.timeout_seconds) as answer:
            body = b""
            try:
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) >= read_bytes:
                        break
            except httpx.DecodingError as exc:  # a body its Content-Encoding does not fit
                body = f"(a body that cannot be decoded: {exc})".encode()[:read_bytes]
            ok = answer.status_code == target.expect_status
            return Probe(
                "ok" if ok else "unexpected_status",
                status=answer.status_code,
                latency_ms=round((time.monotonic() - started) * 1000),
                body=body[:read_bytes],
                location=answer.headers.get("location"),
            )
    except httpx.TimeoutException as exc:
        waited = f"no answer within {target.timeout_seconds:g} s ({type(exc).__name__})"
        return Probe("timeout", error=waited)
    except httpx.TransportError as exc:
        refused = _refused(exc)
        return Probe(
            "connection_refused" if refused else "connection_error",
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
    except httpx.HTTPError as exc:  # anything else httpx says went wrong: not an answer
        return Probe("connection_error", error=f"{type(exc).__name__}: {exc}"[:300])
