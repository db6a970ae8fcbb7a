"""``opsbot-notify --test [CHANNEL]``: a test message on one channel of the config, or on
each, sent as every message is (the channel's own sender, its credential, the run's HTTP
client), once: what each channel answered is the point, so no retry hides it.

It asks root's approver nothing and carries no link: nothing waits for anyone. The
webhook's body says ``"event": "test"``; the other channels show the subject and the text.
``opsbot notify test`` runs it in opsbot-notify's own sandbox (opsbot_cli/notify.py).
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import structlog

from notify_svc.channels import Context, http_client, make_sender
from notify_svc.credentials import Credentials
from notify_svc.errors import CredentialError
from notify_svc.message import Card, Message, clean, when
from notify_svc.retry import deliver
from shared_schema.config import OpsbotConfig

log = structlog.get_logger("opsbot.notify")

#: What the test message's plan id reads as (email's X-Opsbot-Plan, the log's plan_id).
TEST_ID = "test"


@dataclass(frozen=True)
class Tried:
    """One channel's answer to the test message."""

    channel: str
    kind: str
    delivered: bool
    #: "delivered", or why not: the receiver's answer ("HTTP 404 Not Found"), no answer,
    #: a missing credential.
    said: str

    def as_json(self) -> dict[str, str | bool]:
        return {
            "channel": self.channel,
            "kind": self.kind,
            "delivered": self.delivered,
            "said": self.said,
        }


def trial_message(channel: str, host: str, now: datetime) -> Message:
    """The test message for ``channel``, sent from ``host`` at ``now``."""
    subject = clean(f"opsbot: a test message to channel {channel} on {host}", 200)
    lines = [
        subject,
        f"Sent by `opsbot notify test` at {when(now)}: this channel reaches you.",
        "Nothing waits for approval; there is nothing to do.",
    ]
    text = "\n".join(lines)
    return Message(
        plan_id=TEST_ID,
        approver="",
        subject=subject,
        text=text + "\n",
        approve_url=None,
        reject_url=None,
        document={
            "event": "test",
            "channel": channel,
            "host": host,
            "sent_at": now.isoformat(),
            "text": text,
        },
        card=Card(title=subject, notes=tuple(lines[1:])),
    )


def send_test(
    config: OpsbotConfig,
    channels: Sequence[str],
    credentials: Credentials,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.time,
    host: str | None = None,
) -> list[Tried]:
    """The test message on each of ``channels`` (names of ``[notify.channels]``), once
    each; never raises for a channel."""
    settings = config.notify
    host = host or socket.gethostname()
    found: list[Tried] = []
    with http_client(settings.timeout_seconds, transport) as http:
        context = Context(credentials, http, settings.timeout_seconds, clock)
        for name in channels:
            channel = settings.channels[name]
            try:
                sender = make_sender(name, channel, context)
            except CredentialError as exc:
                log.error(
                    "notify.channel_unusable", channel=name, kind=channel.kind, reason=str(exc)
                )
                found.append(Tried(name, channel.kind, False, str(exc)))
                continue
            message = trial_message(name, host, datetime.fromtimestamp(clock(), UTC))
            done = deliver(
                functools.partial(sender.send, message),
                attempts=1,
                sleep=time.sleep,
                channel=name,
                kind=channel.kind,
                approver="",
                plan_id=TEST_ID,
            )
            said = "delivered" if done.ok else done.reason
            found.append(Tried(name, channel.kind, done.ok, said))
    return found


__all__ = ["TEST_ID", "Tried", "send_test", "trial_message"]
