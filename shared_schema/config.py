"""/etc/opsbot/opsbot.toml as models: the executor's policy and diagnosis settings.

Only the shape and the rules that need no I/O live here; each service reads the file.
"""

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, HttpUrl, field_validator

from shared_schema._model import Model
from shared_schema.units import UnitName, denied_reason
from shared_schema.write_tools import WRITE_TOOLS

if TYPE_CHECKING:
    ToolName = str
else:
    #: The names the allowlist knows: exactly the write tools of the table.
    ToolName = Literal[WRITE_TOOLS]


class ExecutorPolicy(Model):
    """``[executor]``: what plans may do, and for how long plans and approvals hold."""

    allow: dict[ToolName, list[UnitName]] = {}
    step_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 90.0
    plan_ttl_seconds: Annotated[int, Field(gt=0, le=30 * 86400)] = 86400
    approval_ttl_seconds: Annotated[int, Field(gt=0, le=7 * 86400)] = 3600
    diagnose_user: str = "opsbot-diagnose"
    operators_group: str = "opsbot-operators"
    #: How long the service must hold after a plan's last step for the plan to be
    #: VERIFIED (opsbot-verify watches its units and their health targets meanwhile).
    settle_seconds: Annotated[float, Field(ge=1, le=300)] = 10.0
    #: Restart budget: once opsbot's plans have started or restarted a unit this many
    #: times within restart_budget_minutes, no plan may start or restart it again.
    restart_budget: Annotated[int, Field(ge=1, le=100)] = 3
    restart_budget_minutes: Annotated[int, Field(ge=1, le=7 * 24 * 60)] = 30
    #: Connections one operator may hold on the executor socket at once (the diagnose
    #: user and root are bound only by the socket's 128, 32 of which are kept for them).
    connections_per_uid: Annotated[int, Field(ge=1, le=96)] = 16
    #: Seconds after which the executor closes an operator's connection, whatever it
    #: sends (the diagnose user and root connect once per request).
    connection_lifetime_seconds: Annotated[float, Field(ge=10, le=3600)] = 60.0

    @field_validator("allow")
    @classmethod
    def _not_denied(cls, allow: dict[str, list[str]]) -> dict[str, list[str]]:
        for tool, units in allow.items():
            for unit in units:
                pattern = denied_reason(unit)
                if pattern is not None:
                    raise ValueError(
                        f"{tool}: {unit!r} matches the built-in denylist entry {pattern!r}; "
                        "no configuration can allow it"
                    )
        return allow

    def allows(self, tool: str, unit: str) -> bool:
        return denied_reason(unit) is None and unit in self.allow.get(tool, ())


class HealthTarget(Model):
    """A health endpoint the diagnosis may probe, by name: the model never supplies a URL."""

    url: HttpUrl
    unit: UnitName | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=30)] = 2.0
    expect_status: Annotated[int, Field(ge=100, le=599)] = 200

    @field_validator("url")
    @classmethod
    def _http_only(cls, url: HttpUrl) -> HttpUrl:
        if url.scheme not in ("http", "https"):
            raise ValueError("only http and https health endpoints are supported")
        return url


class ModelSettings(Model):
    """``[diagnose.model]``: which policy proposes actions. API keys never live here."""

    kind: Literal["embedded", "openai"] = "embedded"
    api_url: HttpUrl | None = None
    model: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 3


class VerifySettings(Model):
    """``[diagnose.verify]``: what opsbot-verify does when a plan ends UNRESOLVED."""

    #: One follow-up diagnosis of the unit that did not come back: for watched units
    #: (``opsbot watch``), for every unit, or never.
    follow_up: Literal["watched", "always", "never"] = "watched"


class DiagnoseSettings(Model):
    """``[diagnose]``: what may be looked at, and the loop's bounds."""

    watch: list[UnitName] = []
    #: Units an operator may have diagnosed although opsbot may not act on them (the
    #: allowlist's and the health targets' units always may, with their dependencies).
    scope: list[UnitName] = []
    health: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")], HealthTarget] = {}
    redact_patterns: list[str] = []
    max_steps: Annotated[int, Field(ge=1, le=32)] = 6
    token_budget: Annotated[int, Field(ge=1000)] = 60000
    #: Diagnoses one user may have running at once on the diagnose socket (root: no cap).
    runs_per_uid: Annotated[int, Field(ge=1, le=4)] = 2
    #: Diagnoses one user may start within any 60 seconds on the diagnose socket.
    runs_per_minute_per_uid: Annotated[int, Field(ge=1, le=600)] = 10
    model: ModelSettings = ModelSettings()
    verify: VerifySettings = VerifySettings()

    @field_validator("redact_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for index, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"pattern {index} ({pattern!r}) is not a valid regex: {exc}"
                ) from exc
        return patterns


class OpsbotConfig(Model):
    executor: ExecutorPolicy = ExecutorPolicy()
    diagnose: DiagnoseSettings = DiagnoseSettings()
