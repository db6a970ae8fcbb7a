"""Microsoft Teams: the message's card as an Adaptive Card, POSTed to the URL that is the
channel's credential ``notify_<channel>`` (a Workflows "When a Teams webhook request is
received" URL, or an incoming webhook's; that URL is the secret, never logged), in the
envelope both take::

    {"type": "message", "attachments": [{"contentType":
      "application/vnd.microsoft.card.adaptive", "content": CARD}]}

The card: the subject, the facts, the goal, the steps in monospace, why, the lines under
them, and two ``Action.OpenUrl`` buttons (a digest: each plan and its two; news: its one
status button, in the default style) that only open opsbot's page, where a person types
a code; no request comes back to opsbot, and nothing in Teams can approve.

Every text is a ``TextRun`` of a ``RichTextBlock``, which Teams shows as written: a
TextBlock reads Markdown, in which a goal could draw a link of its own
(``[Review and approve](https://...)``). Teams takes a card of about 28 KB: a digest
shows the plans that fit in :data:`MAX_BYTES`, then a line saying how many more.
"""

from __future__ import annotations

import json
from typing import Any

from notify_svc.channels._base import Context, post, webhook_url
from notify_svc.message import Button, Card, Message
from shared_schema.approver_socket import Decision
from shared_schema.config import TeamsChannel

#: Adaptive Card 1.4: RichTextBlock, Action.OpenUrl's style; what Teams and Workflows show.
VERSION = "1.4"
CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
#: The body's bound, below Teams' 28 KB for a message.
MAX_BYTES = 24_000
CUT = "… and {more} more (a Teams message holds about 28 KB)"
#: An action's style by its button's decision; any other (a status link) has none, the
#: default.
STYLES: dict[Decision | None, str] = {"approve": "positive"}


def run(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextRun", "text": text, **style}


def line(*inlines: dict[str, Any], **style: Any) -> dict[str, Any]:
    return {"type": "RichTextBlock", "inlines": list(inlines), **style}


def labelled(label: str, value: str) -> dict[str, Any]:
    """One line: ``label`` in bold, then ``value``."""
    return line(run(f"{label}: ", weight="Bolder"), run(value), spacing="None")


def open_urls(buttons: tuple[Button, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "Action.OpenUrl",
            "title": button.label,
            "url": button.url,
            **({"style": STYLES[button.decision]} if button.decision in STYLES else {}),
        }
        for button in buttons
    ]


def adaptive_card(card: Card) -> dict[str, Any]:
    """``card`` as an Adaptive Card, at most :data:`MAX_BYTES` of JSON: a digest's plans,
    each its lines and its buttons, as many as fit, then a line saying how many more."""
    body = [line(run(card.title, weight="Bolder", size="Medium"))]
    body.extend(labelled(label, value) for label, value in card.facts)
    if card.goal:
        body.append(labelled("Goal", card.goal) | {"spacing": "Medium"})
    if card.steps:
        body.append(line(run("Steps", weight="Bolder"), spacing="Medium"))
        body.extend(line(run(s, fontType="Monospace"), spacing="None") for s in card.steps)
    if card.why:
        body.append(line(run(card.why_label, weight="Bolder"), spacing="Medium"))
        body.extend(line(run(w), spacing="None") for w in card.why)
    notes = [line(run(note, isSubtle=True), spacing="Small") for note in card.notes]
    if notes:
        notes[0]["separator"] = True
    document: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": VERSION,
        "fallbackText": card.title,
        "body": body,
        "actions": open_urls(card.buttons),
    }
    room = MAX_BYTES - size(document) - sum(size(note) for note in notes)
    for index, item in enumerate(card.items):
        lines = item.text.split("\n")
        shown = [line(run(lines[0]), separator=True), *(line(run(t)) for t in lines[1:])]
        if item.buttons:
            shown.append({"type": "ActionSet", "actions": open_urls(item.buttons)})
        more = line(run(CUT.format(more=len(card.items) - index), isSubtle=True))
        room -= sum(size(element) for element in shown)
        if room < (size(more) if index + 1 < len(card.items) else 0):
            body.append(more)
            break
        body.extend(shown)
    body.extend(notes)
    return document


def size(value: Any) -> int:
    """Bytes ``value`` takes in the JSON, with the comma and space before it."""
    return len(json.dumps(value, ensure_ascii=False).encode()) + 2


def envelope(card: Card) -> dict[str, Any]:
    """What Workflows and incoming webhooks take: a message with the card attached."""
    return {
        "type": "message",
        "attachments": [
            {"contentType": CONTENT_TYPE, "contentUrl": None, "content": adaptive_card(card)}
        ],
    }


class TeamsSender:
    def __init__(self, name: str, channel: TeamsChannel, context: Context) -> None:
        self.url = webhook_url(
            context, name, "the Teams workflow's or incoming webhook's URL (https://...)"
        )
        self.context = context

    def body(self, message: Message) -> bytes:
        return json.dumps(envelope(message.card), ensure_ascii=False).encode()

    def send(self, message: Message) -> None:
        post(
            self.context.http,
            self.url,
            content=self.body(message),
            headers={"Content-Type": "application/json"},
        )
