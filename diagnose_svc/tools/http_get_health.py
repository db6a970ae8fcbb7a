"""http_get_health: probe a health endpoint named in the configuration.

The policy names a target (``[diagnose.health.<name>]``), never a URL: it cannot make
this service reach anything the operator did not list. Redirects are not followed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from diagnose_svc.errors import ToolError
from diagnose_svc.limits import HEALTH_BODY_LIMIT, HEALTH_BODY_READ_BYTES
from diagnose_svc.tools._registry import ToolArgs, ToolContext, ToolOutput, read_tool
from shared_io import health
from shared_io.health import Outcome
from shared_schema import HealthTarget

GATEWAY_STATUSES = (502, 503, 504)


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


def probe(name: str, target: HealthTarget) -> HealthResult:
    """GET ``target.url`` once, with the target's timeout, and describe what happened
    (shared_io.health: the one probe)."""
    got = health.probe(target, HEALTH_BODY_READ_BYTES)
    return HealthResult(
        target=name,
        url=str(target.url),
        unit=target.unit,
        expected_status=target.expect_status,
        outcome=got.outcome,
        status=got.status,
        latency_ms=got.latency_ms,
        body_excerpt=got.body.decode("utf-8", errors="replace")[:HEALTH_BODY_LIMIT],
        location=got.location,
        error=got.error,
    )


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
