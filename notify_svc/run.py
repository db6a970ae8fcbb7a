"""One run of opsbot-notify: announce, then tell each approver on each of their channels.

For every notice the approver hands out, for every approver it has links for, the
approver's message (notify_svc.message) goes out on each channel of their
``[approvers.NAME] notify``, with retries (notify_svc.retry); then the news
(notify_svc.news: no decision link, a status link where there is one) to each approver
the notice names, the same way: every plan a standing rule approved, then every plan
that ended UNRESOLVED and every incident that ended. The approver is asked again until
it has nothing new (a plan stored, approved by a rule, or ended while this run was
sending), at most :data:`MAX_ROUNDS` times. A channel that cannot be built (its
credential is missing) fails its messages, logged; the other channels are still sent.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import structlog

from notify_svc.approver import announce
from notify_svc.channels import Context, Sender, http_client, make_sender
from notify_svc.credentials import Credentials
from notify_svc.errors import CredentialError
from notify_svc.message import DIGEST_AFTER, Message, approvers_of, render, render_digest
from notify_svc.news import render_outcome, render_ruled
from notify_svc.retry import deliver
from shared_io.errors import OpsbotError
from shared_schema.approver_socket import Notice, OutcomeNotice, RuleNotice
from shared_schema.config import OpsbotConfig

MAX_ROUNDS = 5
#: The run stops trying after this long: less than TimeoutStartSec=10min of its unit, so
#: that it ends by itself, having logged each message it could not send.
RUN_BUDGET_SECONDS = 480.0

log = structlog.get_logger("opsbot.notify")


@dataclass
class Summary:
    """What a run did: plans announced, plans a rule approved, outcomes told, messages
    sent and failed."""

    plans: int = 0
    #: Plans a standing rule approved that the approvers were told of.
    ruled: int = 0
    #: Plans that ended UNRESOLVED, and incidents that ended, that they were told of.
    outcomes: int = 0
    sent: int = 0
    failed: int = 0
    #: (plan id, approver, channel) of each message that did not go out.
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: Why the approver could not be asked (the approver is away, or refused), if so.
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.error is None


class _Senders:
    """Each channel's sender, built once per run; a channel that cannot be built is
    remembered with why, so its error is logged once and each of its messages fails."""

    def __init__(self, config: OpsbotConfig, context: Context) -> None:
        self.config = config
        self.context = context
        self.built: dict[str, Sender | CredentialError] = {}

    def get(self, name: str) -> Sender | CredentialError:
        if name not in self.built:
            channel = self.config.notify.channels[name]
            try:
                self.built[name] = make_sender(name, channel, self.context)
            except CredentialError as exc:
                log.error(
                    "notify.channel_unusable", channel=name, kind=channel.kind, reason=str(exc)
                )
                self.built[name] = exc
        return self.built[name]


def _tell(
    config: OpsbotConfig,
    senders: _Senders,
    summary: Summary,
    notices: list[Notice],
    approver: str,
    link_base: str | None,
    sleep: Callable[[float], None],
    time_left: Callable[[], float],
) -> None:
    """Send ``approver`` their message about ``notices`` on each of their channels: one
    per plan, or one digest past DIGEST_AFTER."""
    if len(notices) > DIGEST_AFTER:
        message = render_digest(notices, approver, link_base)
        log.info("notify.digest", approver=approver, plans=len(notices))
    elif len(notices) > 1:
        for notice in notices:
            _tell(config, senders, summary, [notice], approver, link_base, sleep, time_left)
        return
    else:
        message = render(notices[0], approver, link_base)
    _send(config, senders, summary, message, sleep, time_left)


def _tell_news(
    config: OpsbotConfig,
    senders: _Senders,
    summary: Summary,
    notice: RuleNotice | OutcomeNotice,
    link_base: str | None,
    sleep: Callable[[float], None],
    time_left: Callable[[], float],
) -> None:
    """Tell each approver ``notice`` names, once, that a rule approved its plan or how
    the plan turned out, on each of their channels. News is the same for everyone: a
    channel two approvers share (a team's Slack, one ntfy topic) gets it once, as the
    first of them."""
    done: set[str] = set()
    for approver in dict.fromkeys(notice.approvers):
        if isinstance(notice, RuleNotice):
            message = render_ruled(notice, approver, link_base)
        else:
            message = render_outcome(notice, approver, link_base)
        _send(config, senders, summary, message, sleep, time_left, skip=done)


def _send(
    config: OpsbotConfig,
    senders: _Senders,
    summary: Summary,
    message: Message,
    sleep: Callable[[float], None],
    time_left: Callable[[], float],
    skip: set[str] | None = None,
) -> None:
    """``message`` on each channel of its approver, each counted sent or failed; an
    approver without a channel is a warning (they act on the host). With ``skip``, the
    channels in it are left out, and each channel tried is added to it."""
    approver = message.approver
    settings = config.approvers.get(approver)
    if settings is None or not settings.notify:
        log.warning("notify.no_channels", approver=approver, plan_id=message.plan_id)
        return
    for name in settings.notify:
        if skip is not None:
            if name in skip:
                continue
            skip.add(name)
        sender = senders.get(name)
        ok = False
        if not isinstance(sender, CredentialError):
            ok = deliver(
                functools.partial(sender.send, message),
                attempts=config.notify.attempts,
                sleep=sleep,
                channel=name,
                kind=config.notify.channels[name].kind,
                approver=approver,
                plan_id=message.plan_id,
                time_left=time_left,
            ).ok
        if ok:
            summary.sent += 1
        else:
            summary.failed += 1
            summary.failures.append((message.plan_id, approver, name))


def notify(
    config: OpsbotConfig,
    *,
    socket_path: Path,
    credentials: Credentials,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    transport: httpx.BaseTransport | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    budget_seconds: float = RUN_BUDGET_SECONDS,
) -> Summary:
    """Announce and send (see the module docstring). Never raises for the approver or a
    channel: every failure is logged and counted in the Summary."""
    settings = config.notify
    link_base = str(settings.link_base) if settings.link_base is not None else None
    summary = Summary()
    if not config.approvers:
        # No one to tell: the approver is not even asked (it would start for nothing on
        # each plan stored and each verdict). The news of this time is not kept for
        # approvers configured later: theirs begins with theirs.
        log.info("notify.no_approvers", hint="add [approvers.NAME] to opsbot.toml")
        return summary
    ends_at = monotonic() + budget_seconds

    def time_left() -> float:
        return ends_at - monotonic()

    with http_client(settings.timeout_seconds, transport) as http:
        senders = _Senders(config, Context(credentials, http, settings.timeout_seconds, clock))
        for _ in range(MAX_ROUNDS):
            if time_left() <= 0:
                break
            try:
                announced = announce(socket_path)
            except OpsbotError as exc:
                log.error("notify.unavailable", error=exc.message, hint=exc.hint)
                summary.error = str(exc)
                break
            notices, ruled, outcomes = announced.notices, announced.ruled, announced.outcomes
            log.info(
                "notify.announced", plans=len(notices), ruled=len(ruled), outcomes=len(outcomes)
            )
            if not notices and not ruled and not outcomes:
                break
            summary.plans += len(notices)
            summary.ruled += len(ruled)
            summary.outcomes += len(outcomes)
            by_approver: dict[str, list[Notice]] = {}
            for notice in notices:
                for approver in approvers_of(notice):
                    by_approver.setdefault(approver, []).append(notice)
            for approver, theirs in by_approver.items():
                _tell(config, senders, summary, theirs, approver, link_base, sleep, time_left)
            told: list[RuleNotice | OutcomeNotice] = [*ruled, *outcomes]
            for news in told:
                _tell_news(config, senders, summary, news, link_base, sleep, time_left)
    log.info(
        "notify.done",
        plans=summary.plans,
        ruled=summary.ruled,
        outcomes=summary.outcomes,
        sent=summary.sent,
        failed=summary.failed,
    )
    return summary
