"""ntfy (https://ntfy.sh, or your own server): the plain text POSTed to the topic URL,
with a ``Title``, ``Tags``, ``Priority`` (high for a plan that waits, a fix that did
not hold or an apply that failed; default for news that asks nothing), and, when the
page is configured, ``Click`` (tapping the notification opens the approve page, which
only shows the plan, or a news message's status view) and, for a plan that waits, two
``Actions`` buttons, Approve and Reject. ``Authorization: Bearer <token>`` when the credential
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
        event, state = message.document.get("event"), message.document.get("state")
        if event == "plan.approved_by_rule":
            # Nothing waits for anyone: news, not a call to act.
            headers.update({"Tags": "opsbot,robot", "Priority": "default"})
        elif event == "incident.ended" and state == "VERIFIED":
            headers.update({"Tags": "opsbot,white_check_mark", "Priority": "default"})
        elif event in ("plan.unresolved", "incident.ended"):
            # The fix did not hold, or the apply failed: someone must look.
            headers.update({"Tags": "opsbot,warning", "Priority": "high"})
        status_url = message.document.get("status_url")
        if isinstance(status_url, str) and status_url:
            headers["Click"] = status_url
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
