"""The chat cards, read by the chats' own code: Slack's blocks parsed by slack_sdk's Block
Kit models (which check Slack's lengths), a Teams Adaptive Card parsed by the npm package
adaptivecards (Microsoft's renderer library, run by node); for a plan that waits, a plan
a standing rule approved, a digest, and a plan as long as the schema lets it be; then
both delivered by a real run to receivers on 127.0.0.1. The buttons only open the page:
nothing in a card can approve."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from structlog.testing import capture_logs

from notify_svc.channels import slack, teams
from notify_svc.message import Message, render, render_digest
from notify_svc.news import render_ruled
from notify_svc.run import notify
from shared_schema.approver_socket import Announced, Notice, StepView
from testbed.skips import skip_unless
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    WATCH,
    Sleeps,
    approver,
    config,
    credentials,
    notice,
    plan_brief,
    plan_view,
    receiver,
    rule_notice,
    token,
)

BASE = "https://ops.example.com/opsbot"
#: Where scripts/setup installs the npm package (npm install --prefix).
NPM_PREFIX = Path(os.environ.get("OPSBOT_NPM_PREFIX", "/opt/opsbot/npm"))
ADAPTIVECARDS = NPM_PREFIX / "node_modules" / "adaptivecards" / "dist" / "adaptivecards.js"
PARSER = Path(__file__).with_name("parse_adaptive_card.js")
#: Every character the chats read as markup, so that escaping makes the text longest.
MARKUP = "<&>*_`[]()!"


def longest_plan() -> Notice:
    """A plan as long as the schema lets it be, all of it markup: goal, evidence and argv
    of about 2000 characters, 12 steps, 40 units, a long host name."""
    step = StepView(
        unit="app.service",
        argv=["systemctl", "restart", MARKUP * 180],
        precondition=[MARKUP * 180],
    )
    return notice(
        plan_view(
            host="web1." + MARKUP * 50,
            goal=MARKUP * 180,
            units=[f"unit-{i}-{'x' * 40}.service" for i in range(40)],
            steps=[step] * 12,
            evidence=[MARKUP * 180, MARKUP * 180],
            runs=MARKUP * 180,
            attempt=MARKUP * 180,
        )
    )


@functools.cache
def cards() -> dict[str, Message]:
    """Every kind of message, short and long, with and without the page's links."""
    long_rule = rule_notice(
        plan_brief(goal=MARKUP * 180, argv=[["systemctl", "start", MARKUP * 180]] * 12),
        why=[MARKUP * 180] * 2,
        runs=MARKUP * 180,
        watch=WATCH,
    )
    return {
        "waiting": render(notice(), "alice", BASE),
        "waiting, no link_base": render(notice(), "alice", None),
        "waiting, longest": render(longest_plan(), "alice", BASE),
        "ruled": render_ruled(rule_notice(), "alice", None),
        "ruled, status": render_ruled(rule_notice(watch=WATCH), "alice", BASE),
        "ruled, longest": render_ruled(long_rule, "alice", BASE),
        "digest of 600": render_digest(
            [notice(plan_view(f"20261201-183500-{i:08x}")) for i in range(600)], "alice", BASE
        ),
    }


# -- Slack ------------------------------------------------------------------------------


def slack_texts(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every text object of ``blocks``."""
    found = []
    for block in blocks:
        found.extend([block["text"]] if "text" in block else [])
        found.extend(block.get("fields", []))
        found.extend(element["text"] for element in block.get("elements", []))
    return found


def assert_slack_takes(blocks: list[dict[str, Any]]) -> None:
    """``blocks`` as Slack reads them: slack_sdk parses each into its model and back to
    the same JSON (nothing unknown, nothing dropped) and its length checks pass; the limits
    it does not check (50 blocks, 2000 characters a field) hold too."""
    parsed = Block.parse_all(blocks)
    assert [block.to_dict() for block in parsed] == blocks  # to_dict() validates
    assert len(blocks) <= 50
    for block in blocks:
        assert len(block.get("fields", [])) <= 10
        assert all(len(field["text"]) <= 2000 for field in block.get("fields", []))
    for text in slack_texts(blocks):
        # Escaped whole: an entity is never cut in two, no markup character is left bare.
        assert not re.search(r"&(?!amp;|lt;|gt;)|[<>]", text["text"]), text["text"]
        assert text["type"] == "plain_text" or text["verbatim"] is True


@pytest.mark.parametrize("kind", list(cards()))
def test_each_slack_message_is_block_kit_that_slack_sdk_accepts_within_slacks_limits(
    kind: str,
) -> None:
    """A plan that waits (with and without the page), one a rule approved, a burst of 600
    plans, and plans whose every text is as long as the schema allows and made of markup
    characters (each escaped into up to five): slack_sdk's Block Kit models take every
    block as it is, and each header, section, field, button and url is within Slack's
    limits, cut with "…" where it had to be."""
    message = cards()[kind]
    blocks = slack.blocks(message.card)
    assert_slack_takes(blocks)
    if "longest" in kind or "600" in kind:
        shown = [t["text"] for t in slack_texts(blocks)]
        assert any(t.endswith(("…", "…\n```")) or t.startswith("… and ") for t in shown)


def test_a_waiting_plan_on_slack_shows_its_facts_and_two_buttons_that_only_open_the_page() -> None:
    """alice sees the host, the units, when it runs and expires, the goal, each step's
    argv, why; "Review and approve" and "Reject" are plain links to her own two pages
    (no value, no action to send back: opsbot has no endpoint for Slack); beneath them,
    her confirmations and the command for the host."""
    n = notice()
    blocks = slack.blocks(render(n, "alice", BASE).card)
    header, facts, goal, steps, why, actions, notes = blocks
    assert header["text"]["text"].startswith(f"opsbot: plan {PLAN_ID} for app.service on web1")
    assert [f["text"].split("\n")[0] for f in facts["fields"]] == [
        "*Host*",
        "*Units*",
        "*Runs*",
        "*Expires*",
        "*sha256*",
    ]
    assert "*Host*\nweb1" in [f["text"] for f in facts["fields"]]
    assert "links 2026-12-01 19:34 UTC, plan 2026-12-02 18:35 UTC" in facts["fields"][3]["text"]
    assert goal["text"]["text"] == "*Goal*\nrestart app.service, which crashed on a full disk"
    assert "```\nStep 1: systemctl restart --no-block app.service\n" in steps["text"]["text"]
    assert "journal: No space left on device" in why["text"]["text"]
    assert actions["elements"] == [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Review and approve"},
            "url": f"{BASE}/p/{token(n, 'alice', 'approve')}",
            "style": "primary",
        },
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Reject"},
            "url": f"{BASE}/p/{token(n, 'alice', 'reject')}",
        },
    ]
    confirm = {k.decision: k.confirm for k in n.links}
    assert (
        f"{confirm['approve']} to approve, {confirm['reject']} to reject" in (notes["text"]["text"])
    )
    assert "On the host: sudo opsbot approve" in notes["text"]["text"]


def test_without_the_page_slack_shows_no_button_and_says_why() -> None:
    """Without [notify] link_base there is no page to open: no actions block, and the
    message says the page is not configured and how to approve on the host."""
    blocks = slack.blocks(render(notice(), "alice", None).card)
    assert not [b for b in blocks if b["type"] == "actions"]
    assert "The approval page is not configured" in blocks[-1]["text"]["text"]


def test_a_link_too_long_for_a_slack_button_is_not_cut_and_the_buttons_are_left_out() -> None:
    """A link_base so long that a link passes Slack's 3000 characters: a cut link would
    lead nowhere, so there is no button, a line says why, and the blocks still parse."""
    base = "https://ops.example.com/" + "a" * 3000
    blocks = slack.blocks(render(notice(), "alice", base).card)
    assert_slack_takes(blocks)
    assert not [b for b in blocks if b["type"] == "actions"]
    assert any("longer than a Slack button holds" in t["text"] for t in slack_texts(blocks))


def test_a_goal_written_as_slack_markup_cannot_ping_or_draw_a_link() -> None:
    """A goal holding <!channel> and <url|label> arrives escaped and verbatim in every
    block: Slack shows it as text, pings no one, draws no link of its own."""
    goal = "fix <!channel> <https://evil.example|Review and approve> @here & more"
    blocks = slack.blocks(render(notice(plan_view(goal=goal)), "alice", BASE).card)
    assert_slack_takes(blocks)
    (shown,) = [t["text"] for t in slack_texts(blocks) if t["text"].startswith("*Goal*")]
    assert shown == (
        "*Goal*\nfix &lt;!channel&gt; &lt;https://evil.example|Review and approve&gt; "
        "@here &amp; more"
    )


def test_a_rule_approved_plan_on_slack_has_no_button_and_says_how_to_follow_it() -> None:
    """Nothing is left to decide, and this approver minted no status link: no button.
    The card says, as the text does, that `opsbot show ID` on the host follows it, and
    how to pause every rule."""
    blocks = slack.blocks(render_ruled(rule_notice(), "alice", BASE).card)
    assert not [b for b in blocks if b["type"] == "actions"]
    fields = [f["text"] for f in blocks[1]["fields"]]
    assert f"*Rule*\nnight-restarts (sha256 {rule_notice().rule_sha256[:12]})" in fields
    assert blocks[-1]["text"]["text"] == (
        f"It runs at once and will be verified; opsbot show {PLAN_ID} on the host follows "
        "it.\nPause every rule: sudo opsbot policy pause"
    )


def digest(plans: int) -> tuple[list[Notice], Message]:
    notices = [notice(plan_view(f"20261201-183500-{i:08x}")) for i in range(plans)]
    return notices, render_digest(notices, "alice", BASE)


def test_a_digest_on_slack_shows_each_plan_with_its_own_two_buttons() -> None:
    """Four plans at once: one message, each plan a section (its id, unit, goal and
    confirmations) followed by its own "Review and approve" and "Reject" links."""
    notices, message = digest(4)
    blocks = slack.blocks(message.card)
    assert_slack_takes(blocks)
    assert len(blocks) == 1 + 4 * 2 + 1
    pairs = zip(blocks[1:-1:2], blocks[2:-1:2], strict=True)
    for n, (plan, buttons) in zip(notices, pairs, strict=True):
        assert plan["text"]["text"].startswith(f"{n.plan.plan_id} (app.service): restart")
        assert [b["url"] for b in buttons["elements"]] == [
            f"{BASE}/p/{token(n, 'alice', decision)}" for decision in ("approve", "reject")
        ]
    assert "`opsbot plans` on the host lists them" in blocks[-1]["text"]["text"]


def test_a_burst_of_plans_on_slack_shows_what_fifty_blocks_hold_and_counts_the_rest() -> None:
    """600 plans at once (a diagnosis gone wrong): as many plans, each with its buttons,
    as Slack's 50 blocks hold, then a line saying how many more; the last line stays."""
    blocks = slack.blocks(cards()["digest of 600"].card)
    assert len(blocks) <= 50
    shown = len([b for b in blocks if b["type"] == "actions"])
    assert shown == 23
    assert (
        blocks[-2]["text"]["text"] == f"… and {600 - shown} more (a Slack message holds 50 blocks)"
    )
    assert "`opsbot plans` on the host lists them" in blocks[-1]["text"]["text"]


# -- Teams ------------------------------------------------------------------------------


def adaptive_card_errors(card: dict[str, Any]) -> list[str]:
    """What the npm package adaptivecards reports parsing and validating ``card`` (run
    by node); [] when it takes the card as written."""
    node = shutil.which("node")
    skip_unless(
        node is not None and ADAPTIVECARDS.is_file(),
        f"node or {ADAPTIVECARDS} is missing (scripts/setup installs both)",
    )
    assert node is not None
    done = subprocess.run(
        [node, str(PARSER), str(ADAPTIVECARDS)],
        input=json.dumps(card),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    errors: list[str] = json.loads(done.stdout)
    return errors


def elements(card: dict[str, Any]) -> list[dict[str, Any]]:
    """Every element and inline of ``card``'s body."""
    return [e for block in card["body"] for e in (block, *block.get("inlines", []))]


def test_the_adaptive_card_check_reports_a_broken_card() -> None:
    """The check is not blind: a card with an element Teams does not know, a bad size and
    a button without its url gets one error for each."""
    broken = {
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [{"type": "Marquee"}, {"type": "TextBlock", "text": "x", "size": "Huge"}],
        "actions": [{"type": "Action.OpenUrl", "title": "Review and approve"}],
    }
    errors = adaptive_card_errors(broken)
    assert len(errors) == 3, errors
    assert any(e.startswith("UnknownElementType") for e in errors)
    assert any(e.startswith("PropertyCantBeNull") and '"url"' in e for e in errors)


@pytest.mark.parametrize("kind", list(cards()))
def test_each_teams_message_is_an_adaptive_card_that_adaptivecards_parses_without_errors(
    kind: str,
) -> None:
    """Every kind of message, the longest and the burst of 600 too: Microsoft's
    adaptivecards package parses and validates the card with no error, the card is at
    most 24 KB (Teams takes about 28), and the envelope is the one Workflows and
    incoming webhooks take."""
    message = cards()[kind]
    envelope = teams.envelope(message.card)
    (attachment,) = envelope["attachments"]
    assert envelope["type"] == "message"
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert len(json.dumps(card, ensure_ascii=False).encode()) <= teams.MAX_BYTES
    assert adaptive_card_errors(card) == []
    if "600" in kind:
        (more,) = [e for e in elements(card) if e.get("text", "").startswith("… and ")]
        assert more["text"].endswith("more (a Teams message holds about 28 KB)")


def test_a_waiting_plan_on_teams_has_its_facts_and_two_buttons_that_only_open_the_page() -> None:
    """alice's card: the subject, host, units, expiry, goal, each step's argv in
    monospace, why, her confirmations; its two actions are Action.OpenUrl to her own two
    pages, "Review and approve" and "Reject" (nothing that submits anything)."""
    n = notice()
    card = teams.adaptive_card(render(n, "alice", BASE).card)
    texts = [e["text"] for e in elements(card) if e["type"] == "TextRun"]
    assert texts[0].startswith(f"opsbot: plan {PLAN_ID} for app.service on web1")
    for shown in ("Host: ", "web1", "Units: ", "app.service", "Goal: ", "Steps", "Why"):
        assert shown in texts
    steps = [e["text"] for e in elements(card) if e.get("fontType") == "Monospace"]
    assert steps == [
        "Step 1: systemctl restart --no-block app.service",
        "  precondition: app.service is failed",
    ]
    assert "links 2026-12-01 19:34 UTC, plan 2026-12-02 18:35 UTC" in texts
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Review and approve",
            "url": f"{BASE}/p/{token(n, 'alice', 'approve')}",
            "style": "positive",
        },
        {
            "type": "Action.OpenUrl",
            "title": "Reject",
            "url": f"{BASE}/p/{token(n, 'alice', 'reject')}",
        },
    ]
    confirm = {k.decision: k.confirm for k in n.links}
    assert any(f"{confirm['approve']} to approve" in t for t in texts)


def test_a_goal_written_as_markdown_is_shown_as_text_on_teams() -> None:
    """A TextBlock reads Markdown, so a goal could draw its own "Review and approve"
    link; every text of the card is a TextRun, which Teams shows as written."""
    goal = "fix [Review and approve](https://evil.example/p/x) **now**"
    card = teams.adaptive_card(render(notice(plan_view(goal=goal)), "alice", BASE).card)
    assert {e["type"] for e in card["body"]} == {"RichTextBlock"}
    assert {"type": "TextRun", "text": goal} in elements(card)
    assert adaptive_card_errors(card) == []


def test_a_rule_approved_plan_on_teams_has_no_button_and_says_how_to_follow_it() -> None:
    """No action (nothing to decide, and no status link was minted for this plan): the
    card names the rule and ends with how to follow the plan and to pause every rule."""
    card = teams.adaptive_card(render_ruled(rule_notice(), "alice", BASE).card)
    assert card["actions"] == []
    texts = [e["text"] for e in elements(card) if e["type"] == "TextRun"]
    assert texts[-2:] == [
        f"It runs at once and will be verified; opsbot show {PLAN_ID} on the host follows it.",
        "Pause every rule: sudo opsbot policy pause",
    ]


def test_a_digest_on_teams_shows_each_plan_with_its_own_two_buttons() -> None:
    """Four plans at once: each plan's lines, then an ActionSet of its own two links;
    adaptivecards takes the card."""
    notices, message = digest(4)
    card = teams.adaptive_card(message.card)
    sets = [e["actions"] for e in card["body"] if e["type"] == "ActionSet"]
    assert [[a["url"] for a in actions] for actions in sets] == [
        [f"{BASE}/p/{token(n, 'alice', decision)}" for decision in ("approve", "reject")]
        for n in notices
    ]
    assert adaptive_card_errors(card) == []


# -- delivery ---------------------------------------------------------------------------


def test_slack_and_teams_each_get_their_card_at_the_url_of_their_credential(
    tmp_path: Path,
) -> None:
    """A real run: alice's plan and a plan the rule approved go to her Slack and her
    Teams channel, each POSTed as JSON to the path of the URL in its credential; what
    arrives is blocks slack_sdk takes and an Adaptive Card in the Workflows envelope."""
    n, ruled = notice(), rule_notice()
    with receiver() as slack_hook, receiver() as teams_hook:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {"team": {"kind": "slack"}, "room": {"kind": "teams"}},
            },
            approvers={"alice": {"notify": ["team", "room"]}},
        )
        creds = credentials(
            tmp_path / "c",
            {
                "team": slack_hook.url("/services/T0/B0/x").encode(),
                "room": teams_hook.url("/workflows/w1/triggers/manual/paths/invoke").encode(),
            },
        )
        with approver(tmp_path / "a.sock", [Announced(notices=[n], ruled=[ruled])]) as fake:
            summary = notify(
                cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps(), clock=time.time
            )
    assert summary.ok and summary.sent == 4
    assert {r.path for r in slack_hook.requests} == {"/services/T0/B0/x"}
    assert {r.path for r in teams_hook.requests} == {"/workflows/w1/triggers/manual/paths/invoke"}
    for request in (*slack_hook.requests, *teams_hook.requests):
        assert request.headers["content-type"] == "application/json"
    waiting, news = (json.loads(r.body) for r in slack_hook.requests)
    assert_slack_takes(waiting["blocks"])
    assert_slack_takes(news["blocks"])
    assert waiting["text"].startswith(f"opsbot: plan {PLAN_ID}")
    assert waiting["blocks"][5]["elements"][0]["url"] == f"{BASE}/p/{token(n, 'alice', 'approve')}"
    assert [json.loads(r.body) for r in teams_hook.requests] == [
        teams.envelope(render(n, "alice", BASE).card),
        teams.envelope(render_ruled(ruled, "alice", BASE).card),
    ]
    for request in teams_hook.requests:
        assert adaptive_card_errors(json.loads(request.body)["attachments"][0]["content"]) == []


def test_a_teams_credential_that_is_not_a_url_is_refused_without_quoting_it(
    tmp_path: Path,
) -> None:
    """A credential holding something else (a token pasted in the wrong file): the
    channel is unusable, and the log says so without the value."""
    cfg = config(
        notify={"channels": {"room": {"kind": "teams"}}}, approvers={"alice": {"notify": ["room"]}}
    )
    creds = credentials(tmp_path / "c", {"room": b"not-a-url-secret"})
    with approver(tmp_path / "a.sock", [[notice()]]) as fake, capture_logs() as logs:
        summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.failed == 1
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert unusable["kind"] == "teams" and "notify_room" in unusable["reason"]
    assert "not-a-url-secret" not in repr(logs)


def test_a_teams_url_written_in_opsbot_toml_is_refused() -> None:
    """The workflow's URL is its secret (its sig= signs any post): it belongs in
    /etc/opsbot/notify/NAME, and the config refuses it in opsbot.toml."""
    with pytest.raises(ValueError, match="url\n  Extra inputs are not permitted"):
        config(notify={"channels": {"room": {"kind": "teams", "url": "https://x.example/"}}})
