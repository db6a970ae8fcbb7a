"""http_get_health: probe a health endpoint named in the configuration.

The policy names a target (``[diagnose.health.<name>]``), never a URL: it cannot make
this service reach anything the operator did not list. Redirects are not followed.
"""

from __future__ import annotations

import functools
import ssl
import time
from typing import Annotated, Any, Literal

import httpx
from pydantic import Field

from diagnose_svc.errors import ToolError
from diagnose_svc.limits import HEALTH_BODY_LIMIT, HEALTH_BODY_READ_BYTES
from diagnose_svc.tools._registry import ToolArgs, ToolContext, ToolOutput, read_tool
from shared_schema import HealthTarget

USER_AGENT = "opsbot-diagnose/1"
GATEWAY_STATUSES = (502, 503, 504)

Outcome = Literal["ok", "unexpected_status", "timeout", "connection_refused", "connection_error"]


class HealthArgs(ToolArgs):
    gives = "health"
    target: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]

    def subject(self) -> str:
        return self.target


class HealthResult(ToolOutput):
    """What one GET of a configured health endpoint gave."""

    target: str
    url: str
    unit: str | None
    outcome: Outcome
    status: int | None = None
    expected_status: int
    latency_ms: int | None = None
    body_excerpt: str = ""
    location: str | None = None
    error: str | None = None

    @property
    def gateway_error(self) -> bool:
        """A proxy's way of saying that what is behind it does not answer (502/503/504)."""
        return self.outcome == "unexpected_status" and self.status in GATEWAY_STATUSES

    def summary(self) -> str:
        served = f" (served by {self.unit})" if self.unit else ""
        if self.outcome in ("ok", "unexpected_status"):
            verdict = "as expected" if self.outcome == "ok" else f"expected {self.expected_status}"
            return (
                f"health target {self.target}{served} answered {self.status} in "
                f"{self.latency_ms} ms ({verdict})"
            )
        return f"health target {self.target}{served}: {self.outcome}: {self.error}"

    def failing_target(self) -> tuple[str, str] | None:
        return None if self.outcome == "ok" else (self.target, self.unit or "")

    def related_units(self) -> list[str]:
        return [self.unit] if self.unit else []


def _known(targets: dict[str, HealthTarget]) -> str:
    if not targets:
        return "none are configured ([diagnose.health.<name>] in opsbot.toml)"
    return ", ".join(
        f"{name} ({target.unit})" if target.unit else name
        for name, target in sorted(targets.items())
    )


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@functools.cache
def _client() -> httpx.Client:
    """The one HTTP client of this process, its TLS context loaded once (the CA store
    and a client for each probe cost more than the probe of a local endpoint). No
    connection is kept between probes: each probe opens its own, as a user's would."""
    return httpx.Client(
        follow_redirects=False,
        trust_env=False,
        verify=ssl.create_default_context(),
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def probe(name: str, target: HealthTarget) -> HealthResult:
    """GET ``target.url`` once, with the target's timeout, and describe what happened."""
    url = str(target.url)

    def result(outcome: Outcome, **found: Any) -> HealthResult:
        return HealthResult(
            target=name,
            url=url,
            unit=target.unit,
            expected_status=target.expect_status,
            outcome=outcome,
            **found,
        )

    started = time.monotonic()
    try:
        with _client().stream("GET", url, timeout=target.timeout_seconds) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= HEALTH_BODY_READ_BYTES:
                    break
            latency = round((time.monotonic() - started) * 1000)
            ok = response.status_code == target.expect_status
            return result(
                "ok" if ok else "unexpected_status",
                status=response.status_code,
                latency_ms=latency,
                body_excerpt=body.decode("utf-8", errors="replace")[:HEALTH_BODY_LIMIT],
                location=response.headers.get("location"),
            )
    except httpx.TimeoutException as exc:
        waited = f"no answer within {target.timeout_seconds:g} s ({type(exc).__name__})"
        return result("timeout", error=waited)
    except httpx.TransportError as exc:
        outcome: Outcome = "connection_refused" if _refused(exc) else "connection_error"
        return result(outcome, error=f"{type(exc).__name__}: {exc}"[:300])


@read_tool(HealthArgs)
def http_get_health(args: HealthArgs, context: ToolContext) -> HealthResult:
    """Probe a health endpoint by its configured target name (never a URL).

    Sends one GET, does not follow redirects, and returns outcome (ok,
    unexpected_status, timeout, connection_refused, connection_error), the HTTP status
    and the status expected, latency_ms, the start of the body, the Location of a
    redirect, and the unit that serves the target (from the configuration). An unknown
    target name is answered with the list of configured targets.
    """
    targets = context.settings.health
    target = targets.get(args.target)
    if target is None:
        raise ToolError(f"unknown health target {args.target!r}; known targets: {_known(targets)}")
    return probe(args.target, target)
