"""Slack incoming webhooks: the message's card as Block Kit ``blocks``, with its plain
text as ``text`` (what a notification shows), POSTed to the URL that is the channel's
credential ``notify_<channel>`` (that URL is the secret; it is never logged).

The blocks: a header (the subject), the facts, the goal, the steps as code, why, the two
buttons (a digest: each plan and its two; news: its one status button, in Slack's
default style), then the lines under them (the confirmations, the command for the
host). A button is a plain link (``url``): Slack opens opsbot's page, where a person
types a code; no request comes back to opsbot, and nothing in Slack can approve. A link
longer than a button may hold is never cut (a cut link leads nowhere): the buttons are
left out and a line says so.

Slack reads ``&``, ``<`` and ``>`` as markup (``<!channel>``, ``<url|label>``), so they
are escaped everywhere, and every mrkdwn text is ``verbatim`` (Slack parses no mention
or channel name out of it): a plan's goal cannot ping a channel or disguise a link.
Each text is cut, once escaped, to Slack's limits (the constants below).
"""

from __future__ import annotations

import json
from typing import Any

from notify_svc.channels._base import Context, post, webhook_url
from notify_svc.message import Button, Card, Message
from shared_schema.approver_socket import Decision
from shared_schema.config import SlackChannel

#: Slack's bounds (api.slack.com/reference/block-kit): characters of a header's text, a
#: section's text, a field's, a button's text and url; fields per section, blocks.
HEADER_MAX = 150
SECTION_MAX = 3000
FIELD_MAX = 2000
FIELDS_MAX = 10
BUTTON_TEXT_MAX = 75
URL_MAX = 3000
BLOCKS_MAX = 50
ELLIPSIS = "…"
#: A button's style by its decision; any other button (a status link) has none, Slack's
#: default.
STYLES: dict[Decision | None, str] = {"approve": "primary"}


def slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, limit: int) -> str:
    """``text`` escaped for Slack, cut so that the escaped text is at most ``limit``
    characters (an entity is never cut in two; the cut ends in "…")."""
    escaped = slack_escape(text)
    if len(escaped) <= limit:
        return escaped
    kept, size = 0, len(ELLIPSIS)
    for char in text:
        size += len(slack_escape(char))
        if size > limit:
            break
        kept += 1
    return slack_escape(text[:kept]) + ELLIPSIS


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def section(title: str, text: str) -> dict[str, Any]:
    """A section: ``title`` in bold over ``text`` (escaped and cut to fit)."""
    head = f"*{title}*\n"
    return {"type": "section", "text": mrkdwn(head + fit(text, SECTION_MAX - len(head)))}


def code(title: str, lines: tuple[str, ...]) -> dict[str, Any]:
    """A section: ``title`` over ``lines`` as a code block (no formatting inside)."""
    head, tail = f"*{title}*\n```\n", "\n```"
    body = fit("\n".join(lines), SECTION_MAX - len(head) - len(tail))
    return {"type": "section", "text": mrkdwn(head + body + tail)}


def paragraph(lines: str) -> dict[str, Any]:
    """A section of ``lines``, escaped and cut to fit."""
    return {"type": "section", "text": mrkdwn(fit(lines, SECTION_MAX))}


def actions(buttons: tuple[Button, ...]) -> list[dict[str, Any]]:
    """The actions block of ``buttons``, or a line saying why there is none."""
    if not buttons:
        return []
    if any(len(button.url) > URL_MAX for button in buttons):
        return [paragraph(f"The page's links are longer than a Slack button holds ({URL_MAX}).")]
    elements: list[dict[str, Any]] = []
    for button in buttons:
        element: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": fit(button.label, BUTTON_TEXT_MAX)},
            "url": button.url,
        }
        if button.decision in STYLES:
            element["style"] = STYLES[button.decision]
        elements.append(element)
    return [{"type": "actions", "elements": elements}]


def blocks(card: Card) -> list[dict[str, Any]]:
    """``card`` as Block Kit blocks, within Slack's limits: a digest's plans, each a
    section and its buttons, as many as 50 blocks hold, then a line saying how many more."""
    out: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": fit(card.title, HEADER_MAX)}}
    ]
    if card.facts:
        fields = []
        for label, value in card.facts[:FIELDS_MAX]:
            head = f"*{label}*\n"
            fields.append(mrkdwn(head + fit(value, FIELD_MAX - len(head))))
        out.append({"type": "section", "fields": fields})
    if card.goal:
        out.append(section("Goal", card.goal))
    if card.steps:
        out.append(code("Steps", card.steps))
    if card.why:
        out.append(section(card.why_label, "\n".join(card.why)))
    out.extend(actions(card.buttons))
    notes = [paragraph("\n".join(card.notes))] if card.notes else []
    for index, item in enumerate(card.items):
        shown = [paragraph(item.text), *actions(item.buttons)]
        last = index + 1 == len(card.items)
        if len(out) + len(shown) + len(notes) + (0 if last else 1) > BLOCKS_MAX:
            more = len(card.items) - index
            out.append(paragraph(f"… and {more} more (a Slack message holds {BLOCKS_MAX} blocks)"))
            break
        out.extend(shown)
    return out + notes


class SlackSender:
    def __init__(self, name: str, channel: SlackChannel, context: Context) -> None:
        self.url = webhook_url(
            context, name, "the Slack incoming-webhook URL (https://hooks.slack.com/services/...)"
        )
        self.context = context

    def body(self, message: Message) -> bytes:
        document = {"text": slack_escape(message.text), "blocks": blocks(message.card)}
        return json.dumps(document, ensure_ascii=False).encode()

    def send(self, message: Message) -> None:
        post(
            self.context.http,
            self.url,
            content=self.body(message),
            headers={"Content-Type": "application/json"},
        )
