"""/etc/opsbot/opsbot.toml as models: the executor's policy and diagnosis settings.

Only the shape and the rules that need no I/O live here; each service reads the file.
"""

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, HttpUrl, field_validator, model_validator

from shared_schema._model import Model
from shared_schema.apply_window import ApplyWindow as ApplyWindow  # re-exported
from shared_schema.standing import StandingApprovals
from shared_schema.units import UnitName, denied_reason
from shared_schema.write_tools import WRITE_TOOLS

if TYPE_CHECKING:
    ToolName = str
else:
    #: The names the allowlist knows: exactly the write tools of the table.
    ToolName = Literal[WRITE_TOOLS]

__all__ = [
    "DiagnoseSettings",
    "ExecutorPolicy",
    "HealthTarget",
    "ModelSettings",
    "OpsbotConfig",
    "RecordSettings",
    "VerifySettings",
]


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
    #: Plans one incident (a symptom and the follow-ups of the plans that did not cure
    #: it) may hold: past it, a note for a human (REVISE to the diagnosis).
    max_plans_per_incident: Annotated[int, Field(ge=1, le=10)] = 3
    #: Plans that may wait for approval at once (open and younger than plan_ttl_seconds):
    #: from one submitting uid, and in all. Past either, a submit is rejected (the
    #: diagnosis ends in a note) until plans are approved, rejected or expire, so a
    #: subverted diagnose process cannot flood the store, the approver or the approvers.
    max_waiting_plans_per_submitter: Annotated[int, Field(ge=1, le=100_000)] = 50
    max_waiting_plans: Annotated[int, Field(ge=1, le=100_000)] = 100
    #: Plans that ended (or expired) longer ago than this are moved out of the live
    #: store into /var/lib/opsbot/archive/YYYY-MM/ (the journal keeps their story), so
    #: the executor's memory and its answers stay the same size however long it runs.
    #: More than plan_ttl_seconds can be (30 days): nothing still open is moved.
    retention_days: Annotated[int, Field(ge=31, le=3650)] = 90
    #: Connections one operator may hold on the executor socket at once (the diagnose
    #: user and root are bound only by the socket's 128, 32 of which are kept for them).
    connections_per_uid: Annotated[int, Field(ge=1, le=96)] = 16
    #: Seconds after which the executor closes an operator's connection, whatever it
    #: sends (the diagnose user and root connect once per request).
    connection_lifetime_seconds: Annotated[float, Field(ge=10, le=3600)] = 60.0
    #: When approved plans may run (none: at once). One table or an array of them.
    apply_window: list[ApplyWindow] = []

    @field_validator("apply_window", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

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


class RecordSettings(Model):
    """``[diagnose.record]``: how much of the record of diagnoses (``opsbot replay``)
    is kept; the oldest go first. The defaults keep a month of a busy host (200
    diagnoses a day) in a few tens of MiB."""

    max_mib: Annotated[int, Field(ge=1, le=65536)] = 64
    max_days: Annotated[int, Field(ge=1, le=3660)] = 35


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
    record: RecordSettings = RecordSettings()

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


#: A channel's or an approver's name: also a file name (its credential) and a URL part.
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Seconds = Annotated[float, Field(gt=0, le=120)]


class WebhookChannel(Model):
    """A generic JSON webhook: POST of the notice, signed with HMAC-SHA256 over
    ``timestamp + "." + body`` (headers X-Opsbot-Timestamp, X-Opsbot-Signature); the key
    is the credential ``notify_<channel>``."""

    kind: Literal["webhook"]
    url: HttpUrl


class SlackChannel(Model):
    """A Slack incoming webhook; its URL is the secret, so it is the credential
    ``notify_<channel>``, never in this file."""

    kind: Literal["slack"]


class TeamsChannel(Model):
    """Microsoft Teams: a Workflows webhook (or an incoming webhook) that posts an Adaptive
    Card; its URL is the secret, so it is the credential ``notify_<channel>``, never in
    this file."""

    kind: Literal["teams"]


class NtfyChannel(Model):
    """ntfy: ``url`` is the server and topic (https://ntfy.example.com/opsbot); an access
    token, if the topic needs one, is the credential ``notify_<channel>``."""

    kind: Literal["ntfy"]
    url: HttpUrl


class AppriseChannel(Model):
    """Any channel Apprise knows (Telegram, Matrix, Discord, Pushover, Gotify ...): its
    Apprise URL holds the channel's secrets, so it is the credential ``notify_<channel>``,
    never in this file (needs ``opsbot[apprise]``)."""

    kind: Literal["apprise"]


class EmailChannel(Model):
    """Email over SMTP (smtplib). ``user``'s password is the credential ``notify_<channel>``."""

    kind: Literal["email"]
    host: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")]
    port: Annotated[int, Field(ge=1, le=65535)] = 587
    #: "starttls" (port 587), "tls" (implicit, port 465) or "none" (a local relay only).
    security: Literal["starttls", "tls", "none"] = "starttls"
    sender: Annotated[str, Field(min_length=3, max_length=254, pattern=r"^[^\s@]+@[^\s@]+$")]
    to: Annotated[
        list[Annotated[str, Field(max_length=254, pattern=r"^[^\s@,]+@[^\s@,]+$")]],
        Field(min_length=1, max_length=20),
    ]
    user: Annotated[str, Field(min_length=1, max_length=254)] | None = None


Channel = Annotated[
    Union[  # noqa: UP007
        WebhookChannel, SlackChannel, TeamsChannel, NtfyChannel, EmailChannel, AppriseChannel
    ],
    Field(discriminator="kind"),
]


class NotifySettings(Model):
    """``[notify]``: opsbot-notify tells approvers a plan waits, on these channels."""

    #: Where operators reach opsbot-web (behind their TLS reverse proxy), e.g.
    #: https://ops.example.com/opsbot; the links are ``<link_base>/p/<token>``.
    link_base: HttpUrl | None = None
    channels: dict[Name, Channel] = {}
    #: IPAddressAllow= of opsbot-notify.service: where the channels live (`opsbot firewall
    #: --write` writes it); opsbot-notify may reach nothing else.
    ip_allow: list[Annotated[str, Field(pattern=r"^[0-9A-Fa-f.:/]+$|^localhost$")]] = []
    #: Tries per message (the first and the retries, with backoff), and each one's timeout.
    attempts: Annotated[int, Field(ge=1, le=8)] = 4
    timeout_seconds: Seconds = 10.0


class ApproverSettings(Model):
    """``[approvers.NAME]``: someone who may approve from the approval page. Their TOTP
    secret is root's (``opsbot approvers add NAME`` makes it); ``notify`` are the
    channels that carry their links."""

    notify: list[Name] = []


#: The page's socket with ``[web] listen = "unix"`` (opsbot-web.socket's drop-in).
WEB_SOCKET = "/run/opsbot/web.sock"


class WebSettings(Model):
    """``[web]``: what protects opsbot-web, the page that relays a click."""

    #: IPAddressAllow=/IPAddressDeny= of opsbot-web.service (`opsbot firewall --write`):
    #: by default only loopback, where the reverse proxy connects from.
    ip_allow: list[Annotated[str, Field(pattern=r"^[0-9A-Fa-f.:/]+$|^[a-z-]+$")]] = ["localhost"]
    ip_deny: list[Annotated[str, Field(pattern=r"^[0-9A-Fa-f.:/]+$|^[a-z-]+$")]] = ["any"]
    max_body_bytes: Annotated[int, Field(ge=256, le=65536)] = 4096
    #: A request's headers, and then its body, must arrive within these.
    header_timeout_seconds: Seconds = 10.0
    body_timeout_seconds: Seconds = 10.0
    connections_per_source: Annotated[int, Field(ge=1, le=1024)] = 8
    max_connections: Annotated[int, Field(ge=1, le=4096)] = 256
    requests_per_minute_per_source: Annotated[int, Field(ge=1, le=100000)] = 120
    requests_per_second: Annotated[int, Field(ge=1, le=100000)] = 200
    #: Where opsbot-web.socket listens (`opsbot firewall --write` writes its drop-in):
    #: ``"unix"``, ``/run/opsbot/web.sock``, mode 0660 and group ``proxy_group``, the
    #: default once ``proxy_group`` is set: only the reverse proxy connects, so only
    #: there its X-Forwarded-For (the client's address) and X-Forwarded-Proto are
    #: believed, and no local user can take the page's connections; ``"tcp"``,
    #: 127.0.0.1:8750, the default without a proxy_group, where no X-Forwarded-For is
    #: ever believed and any local user can connect (from any loopback address).
    listen: Literal["tcp", "unix"] = "tcp"
    #: The reverse proxy's group (nginx on Debian: www-data): it alone may connect to
    #: the page's Unix socket, which setting it makes the default.
    proxy_group: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")] | None = None
    #: Gone: a proxy is trusted by the socket it reaches the page on (``listen``), never
    #: by an address any local user can connect from. Kept to say so when a config has it.
    trusted_proxies: list[str] = []

    @field_validator("trusted_proxies")
    @classmethod
    def _no_trusted_addresses(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError(
                "no longer trusted: any local user can connect from "
                f"{value[0]} and claim any X-Forwarded-For; remove trusted_proxies, set "
                'proxy_group = "<the proxy\'s group>" in [web] (listen = "unix", its '
                "Unix socket, is then the default), run "
                "`opsbot firewall --write`, and point the proxy at "
                f"unix:{WEB_SOCKET}"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _unix_behind_a_proxy(cls, data: Any) -> Any:
        """A ``proxy_group`` says a reverse proxy is there: the page listens on the socket
        only it may connect to, unless ``listen`` says otherwise."""
        if isinstance(data, dict) and data.get("proxy_group") is not None:
            return {"listen": "unix", **data}
        return data

    @model_validator(mode="after")
    def _proxy_group(self) -> "WebSettings":
        if self.listen == "unix" and self.proxy_group is None:
            raise ValueError(
                'listen = "unix" needs proxy_group, the group your reverse proxy runs as '
                '(nginx on Debian: proxy_group = "www-data"): only it may connect'
            )
        if self.listen == "tcp" and self.proxy_group is not None:
            raise ValueError(
                'proxy_group is for the Unix socket (listen = "unix", the default once '
                'proxy_group is set); with listen = "tcp" it does nothing: remove one of them'
            )
        return self


class OpsbotConfig(Model):
    executor: ExecutorPolicy = ExecutorPolicy()
    diagnose: DiagnoseSettings = DiagnoseSettings()
    notify: NotifySettings = NotifySettings()
    web: WebSettings = WebSettings()
    approvers: dict[Name, ApproverSettings] = {}
    #: ``[[approve.rule]]``: standing approvals (shared_schema/standing.py).
    approve: StandingApprovals = StandingApprovals()

    @model_validator(mode="after")
    def _known_channels(self) -> "OpsbotConfig":
        for name, approver in self.approvers.items():
            for channel in approver.notify:
                if channel not in self.notify.channels:
                    raise ValueError(
                        f"approvers.{name}.notify: no channel {channel!r} in [notify.channels]"
                    )
        return self
