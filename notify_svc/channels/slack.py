"""Slack incoming webhooks: ``{"text": ...}`` POSTed to the URL that is the channel's
credential ``notify_<channel>`` (that URL is the secret; it is never logged).

Slack reads ``&``, ``<`` and ``>`` as markup (``<!channel>``, ``<url|label>``), so they
are escaped: a plan's goal cannot ping a channel or disguise a link.
"""

from __future__ import annotations

import json

from notify_svc.channels._base import Context, post
from notify_svc.errors import CredentialError
from notify_svc.message import Message
from shared_schema.config import SlackChannel


def slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackSender:
    def __init__(self, name: str, channel: SlackChannel, context: Context) -> None:
        url = context.credentials.require_text(name)
        if not url.startswith(("https://", "http://")):
            raise CredentialError(
                f"credential notify_{name} must hold the Slack incoming-webhook URL "
                "(https://hooks.slack.com/services/...)"
            )
        self.url = url
        self.context = context

    def send(self, message: Message) -> None:
        body = json.dumps({"text": slack_escape(message.text)}, ensure_ascii=False).encode()
        post(
            self.context.http,
            self.url,
            content=body,
            headers={"Content-Type": "application/json"},
        )
