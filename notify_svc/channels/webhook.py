"""The generic JSON webhook: the message's JSON document, POSTed and signed.

The body is the JSON of :attr:`Message.document` (plus ``delivery``, an id unique to
the message, the same on every retry, for receivers that drop repeats). Each try is
signed afresh (notify_svc.signature): ``X-Opsbot-Timestamp`` (unix seconds) and
``X-Opsbot-Signature: sha256=HMAC-SHA256(key, f"{timestamp}.{body}")``, the key being
the credential ``notify_<channel>``.
"""

from __future__ import annotations

import json
import uuid

from notify_svc.channels._base import Context, post
from notify_svc.message import Message
from notify_svc.signature import sign
from shared_schema.config import WebhookChannel

TIMESTAMP_HEADER = "X-Opsbot-Timestamp"
SIGNATURE_HEADER = "X-Opsbot-Signature"


class WebhookSender:
    def __init__(self, name: str, channel: WebhookChannel, context: Context) -> None:
        self.url = str(channel.url)
        self.key = context.credentials.require(name)
        self.context = context
        self._deliveries: dict[tuple[str, str], str] = {}

    def body(self, message: Message) -> bytes:
        delivery = self._deliveries.setdefault(
            (message.plan_id, message.approver), uuid.uuid4().hex
        )
        document = {"v": 1, "delivery": delivery, **message.document}
        return json.dumps(document, sort_keys=True, ensure_ascii=False).encode()

    def send(self, message: Message) -> None:
        body = self.body(message)
        timestamp = int(self.context.clock())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(self.key, timestamp, body),
        }
        post(self.context.http, self.url, content=body, headers=headers)
