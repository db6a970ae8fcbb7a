"""One module per channel kind, each a :class:`~notify_svc.channels._base.Sender`, and
the one table that maps a ``[notify.channels.NAME] kind`` to its sender."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from notify_svc.channels._base import Context, Sender, http_client
from notify_svc.channels.apprise import AppriseSender
from notify_svc.channels.ntfy import NtfySender
from notify_svc.channels.slack import SlackSender
from notify_svc.channels.smtp import EmailSender
from notify_svc.channels.teams import TeamsSender
from notify_svc.channels.webhook import WebhookSender
from shared_schema.config import (
    AppriseChannel,
    EmailChannel,
    NtfyChannel,
    SlackChannel,
    TeamsChannel,
    WebhookChannel,
)

ChannelConfig = (
    WebhookChannel | SlackChannel | TeamsChannel | NtfyChannel | EmailChannel | AppriseChannel
)

#: kind -> the sender's constructor (name, its config, the context).
SENDERS: dict[str, Callable[[str, Any, Context], Sender]] = {
    "webhook": WebhookSender,
    "slack": SlackSender,
    "teams": TeamsSender,
    "ntfy": NtfySender,
    "email": EmailSender,
    "apprise": AppriseSender,
}


def make_sender(name: str, channel: ChannelConfig, context: Context) -> Sender:
    """The sender of channel ``name``; CredentialError when its secret is missing."""
    return SENDERS[channel.kind](name, channel, context)


__all__ = ["SENDERS", "ChannelConfig", "Context", "Sender", "http_client", "make_sender"]
