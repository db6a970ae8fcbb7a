"""ntfy (https://ntfy.sh, or your own server): the plain text POSTed to the topic URL,
with a ``Title``, ``Tags``, and, when the page is configured, ``Click`` (tapping the
notification opens the approve page, which only shows the plan) and two ``Actions``
buttons, Approve and Reject. ``Authorization: Bearer <token>`` when the credential
``notify_<channel>`` holds an access token (a public topic needs none)."""

from __future__ import annotations

from notify_svc.channels._base import Context, header_text, post
from notify_svc.message import Message
from shared_schema.config import NtfyChannel


class NtfySender:
    def __init__(self, name: str, channel: NtfyChannel, context: Context) -> None:
        self.url = str(channel.url)
        self.token = (
            context.credentials.require_text(name)
            if context.credentials.get(name) is not None
            else None
        )
        self.context = context

    def headers(self, message: Message) -> dict[str, str]:
        headers = {
            "Content-Type": "text/plain; charset=utf-8",
            "Title": header_text(message.subject),
            "Tags": "opsbot,hourglass",
            "Priority": "high",
        }
        if message.document.get("event") == "plan.approved_by_rule":
            # Nothing waits for anyone: news, not a call to act.
            headers.update({"Tags": "opsbot,robot", "Priority": "default"})
        if message.approve_url and message.reject_url:
            headers["Click"] = message.approve_url
            headers["Actions"] = (
                f"view, Approve, {message.approve_url}; view, Reject, {message.reject_url}"
            )
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def send(self, message: Message) -> None:
        post(
            self.context.http,
            self.url,
            content=message.text.encode(),
            headers=self.headers(message),
        )
