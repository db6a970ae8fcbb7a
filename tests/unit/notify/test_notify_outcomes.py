"""When a plan that ran turns out badly, or its incident is over, the approvers hear of it
without asking: the approver's ``announce`` carries it in ``outcomes``, and opsbot-notify
tells each approver it names, once, on each of their channels: the plan is UNRESOLVED
(what opsbot-verify saw, what comes next), or the incident ended (VERIFIED, or FAILED
and a human must look). Every piece of news, a rule's approval too, carries a status
link when the page is configured and the approver minted one: a read-only view of the
plan, drawn in the chats as a plain button that decides nothing. What came from the
journal is shown as escapes everywhere."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from notify_svc.channels import slack, teams
from notify_svc.message import Message
from notify_svc.news import render_outcome, render_ruled
from notify_svc.run import notify
from shared_schema.approver_socket import Announced, OutcomeNotice
from shared_schema.escape import CONTROL
from tests.unit.notify.test_notify_chat_cards import (
    MARKUP,
    adaptive_card_errors,
    assert_slack_takes,
    elements,
)
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    SHA256,
    WATCH,
    Sleeps,
    approver,
    config,
    credentials,
    notice,
    outcome_notice,
    plan_brief,
    plan_view,
    receiver,
    rule_notice,
    signed_by,
)

KEY = b"webhook-key-0123456789"
BASE = "https://ops.example.com/opsbot"
STATUS = f"{BASE}/p/{WATCH}/status"
COMMAND = "systemctl start --no-block app.service"
FOLLOW_UP = "a follow-up diagnosis may propose another plan (its link comes as any plan's)"
LOOK = f"nothing runs again by itself: a human must look (`opsbot show {PLAN_ID}` on the host)"


def failed() -> OutcomeNotice:
    """The incident's plan FAILED (a step exited 1): it ends, and a human must look."""
    return outcome_notice(
        "ended",
        state="FAILED",
        reason="step 1 exited with status 1",
        verification=[],
        next=LOOK,
        approved_by="alice",
        plans=2,
        watch=WATCH,
    )


def news() -> dict[str, Message]:
    """Every kind of news, with and without a status link, and one as long as the schema
    lets it be, all of it markup."""
    longest = outcome_notice(
        plan=plan_brief(
            host="web1." + MARKUP * 50,
            goal=MARKUP * 180,
            units=[f"unit-{i}-{'x' * 40}.service" for i in range(40)],
            argv=[["systemctl", "start", MARKUP * 180]] * 12,
        ),
        reason=MARKUP * 180,
        verification=[MARKUP * 180] * 2,
        approved_by=MARKUP * 180,
        next=MARKUP * 180,
        watch=WATCH,
    )
    return {
        "unresolved": render_outcome(outcome_notice(watch=WATCH), "alice", BASE),
        "unresolved, no link_base": render_outcome(outcome_notice(watch=WATCH), "alice", None),
        "verified": render_outcome(outcome_notice("ended", watch=WATCH), "alice", BASE),
        "failed": render_outcome(failed(), "alice", BASE),
        "unresolved, longest": render_outcome(longest, "alice", BASE),
        "ruled, status": render_ruled(rule_notice(watch=WATCH), "alice", BASE),
    }


# -- the messages -----------------------------------------------------------------------


def test_an_unresolved_plan_says_what_verify_saw_and_what_comes_next() -> None:
    """The rule's restart ran and app.service failed again: alice reads that plan ID is
    UNRESOLVED, the goal, the step that ran, since when and why, what opsbot-verify saw,
    the incident so far, who approved it, that a follow-up diagnosis may come, the status
    link, and how to follow the plan on the host. Nothing to approve: no decision link."""
    message = render_outcome(outcome_notice(watch=WATCH), "alice", BASE)
    head = f"opsbot: plan {PLAN_ID} for app.service on web1 is UNRESOLVED"
    assert message.subject == head
    assert message.text.splitlines() == [
        head,
        "Goal: start app.service, killed by SIGKILL",
        f"Step 1: {COMMAND}",
        "State: UNRESOLVED since 2026-12-01 18:41 UTC: app.service failed again",
        "Verification: app.service is failed (signal)",
        "              journal: Main process exited, code=killed, status=9/KILL",
        f"Incident: {PLAN_ID}, 1 plan since 2026-12-01 18:35 UTC",
        "Approved by: rule night-restarts",
        f"Next: {FOLLOW_UP}",
        f"Status: {STATUS}",
        f"On the host: opsbot show {PLAN_ID}",
    ]
    assert (message.plan_id, message.approver) == (PLAN_ID, "alice")
    assert message.approve_url is None and message.reject_url is None
    assert "opsbot approve" not in message.text and "confirm" not in message.text


def test_an_incident_that_verified_ends_with_its_state_and_nothing_next() -> None:
    """The restart held: the subject says incident ID on web1 ended with app.service
    VERIFIED; the text has what opsbot-verify saw and no "Next:" (there is none)."""
    message = render_outcome(outcome_notice("ended"), "alice", BASE)
    head = f"opsbot: incident {PLAN_ID} on web1 ended: app.service VERIFIED"
    assert message.subject == head
    lines = message.text.splitlines()
    assert lines[0] == head
    assert "State: VERIFIED since 2026-12-01 18:41 UTC: app.service held 5 min" in lines
    assert "Verification: app.service is active (running) since 18:36 UTC" in lines
    assert not [line for line in lines if line.startswith("Next:")]


def test_an_incident_that_failed_says_a_human_must_look() -> None:
    """The second plan of the incident FAILED (opsbot-verify saw nothing: nothing was
    verified): the subject says the incident ended FAILED and a human must look, the text
    says so again with `opsbot show ID`, counts two plans, and names alice as approver."""
    message = render_outcome(failed(), "alice", BASE)
    head = f"opsbot: incident {PLAN_ID} on web1 ended FAILED: a human must look"
    assert message.subject == head
    lines = message.text.splitlines()
    assert "State: FAILED since 2026-12-01 18:41 UTC: step 1 exited with status 1" in lines
    assert "Verification: (none recorded)" in lines
    assert f"Incident: {PLAN_ID}, 2 plans since 2026-12-01 18:35 UTC" in lines
    assert "Approved by: alice" in lines
    assert f"Next: {LOOK}" in lines
    assert lines[-2:] == [f"Status: {STATUS}", f"On the host: opsbot show {PLAN_ID}"]


def test_the_webhook_documents_are_plan_unresolved_and_incident_ended_events() -> None:
    """A receiver that files events tells them apart by ``event``: ``plan.unresolved``
    and ``incident.ended``, each with the plan, its steps' argv, the state since when and
    why, what opsbot-verify saw, the incident, who approved it, what comes next, the
    status link and the same text."""
    message = render_outcome(outcome_notice(approvers=("alice", "bob"), watch=WATCH), "bob", BASE)
    document = message.document
    assert document["event"] == "plan.unresolved"
    assert (document["plan_id"], document["sha256"], document["host"]) == (PLAN_ID, SHA256, "web1")
    assert (document["units"], document["goal"]) == (
        ["app.service"],
        "start app.service, killed by SIGKILL",
    )
    assert document["steps"] == [{"argv": shlex.split(COMMAND), "command": COMMAND}]
    assert (document["state"], document["at"]) == ("UNRESOLVED", "2026-12-01T18:41:00+00:00")
    assert document["reason"] == "app.service failed again"
    assert document["verification"][0] == "app.service is failed (signal)"
    assert (document["incident"], document["plans"]) == (PLAN_ID, 1)
    assert document["started_at"] == "2026-12-01T18:35:00+00:00"
    assert (document["approved_by"], document["next"]) == ("rule night-restarts", FOLLOW_UP)
    assert (document["status_url"], document["approver"]) == (STATUS, "bob")
    assert document["text"] == message.text.rstrip("\n")
    assert [key for key in document if "url" in key] == ["status_url"]
    ended = render_outcome(failed(), "alice", BASE).document
    assert (ended["event"], ended["state"], ended["plans"]) == ("incident.ended", "FAILED", 2)
    assert ended["verification"] == [] and ended["next"] == LOOK


def test_a_long_plan_shows_eight_steps_and_says_how_to_see_the_rest() -> None:
    """A plan of 12 steps ended UNRESOLVED: 8 steps in the message, then how many more
    and that `opsbot show ID` shows all; the webhook has all 12."""
    argv = [["systemctl", "restart", f"u{i}.service"] for i in range(12)]
    message = render_outcome(outcome_notice(plan=plan_brief(argv=argv)), "alice", BASE)
    assert "Step 8: systemctl restart u7.service" in message.text
    assert "Step 9: " not in message.text
    assert f"... and 4 more steps (opsbot show {PLAN_ID} shows all)" in message.text
    assert len(message.document["steps"]) == 12


# -- the status link --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["unresolved", "ended", "ruled"])
def test_the_status_link_is_in_the_text_the_document_and_a_plain_button(kind: str) -> None:
    """With [notify] link_base and a status token from the approver, each piece of news
    has `Status: <link_base>/p/TOKEN/status` in its text, ``status_url`` in its document,
    and one button, "Status", a plain link in the chat's default style: Slack's has no
    style, Teams' Action.OpenUrl none either (the approve button's colours are for
    deciding, and this link decides nothing)."""
    if kind == "ruled":
        message = render_ruled(rule_notice(watch=WATCH), "alice", BASE)
    else:
        message = render_outcome(outcome_notice(kind, watch=WATCH), "alice", BASE)
    assert f"Status: {STATUS}" in message.text.splitlines()
    assert message.document["status_url"] == STATUS
    (actions,) = [b for b in slack.blocks(message.card) if b["type"] == "actions"]
    assert actions["elements"] == [
        {"type": "button", "text": {"type": "plain_text", "text": "Status"}, "url": STATUS}
    ]
    assert teams.adaptive_card(message.card)["actions"] == [
        {"type": "Action.OpenUrl", "title": "Status", "url": STATUS}
    ]


@pytest.mark.parametrize("kind", ["unresolved", "ended", "ruled"])
@pytest.mark.parametrize(
    ("link_base", "watch"), [(None, WATCH), (BASE, None)], ids=["no link_base", "no token"]
)
def test_without_the_page_or_a_token_there_is_no_status_link(
    kind: str, link_base: str | None, watch: str | None
) -> None:
    """Without [notify] link_base there is no page to open; without a token from the
    approver there is nothing to show: no `Status:` line, ``status_url`` null, no button,
    and no ``/p/`` anywhere; `opsbot show ID` on the host is still said."""
    if kind == "ruled":
        message = render_ruled(rule_notice(watch=watch), "alice", link_base)
    else:
        message = render_outcome(outcome_notice(kind, watch=watch), "alice", link_base)
    assert "Status:" not in message.text and "/p/" not in message.text
    assert f"opsbot show {PLAN_ID}" in message.text
    assert message.document["status_url"] is None
    assert message.card.buttons == ()
    assert not [b for b in slack.blocks(message.card) if b["type"] == "actions"]
    assert teams.adaptive_card(message.card)["actions"] == []


# -- text from the journal ----------------------------------------------------------------


def strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (a JSON document, as the receiver or the chat reads it)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_journal_text_in_the_reason_and_what_verify_saw_is_shown_as_escapes() -> None:
    """The reason, what opsbot-verify saw, who approved it, what comes next, the goal, an
    argv and the host came from text anyone can write to the journal (through a model):
    escape sequences, a newline that would forge a `State:` line, bidirectional
    overrides and a bell arrive as visible escapes in the subject, the text, the webhook
    document, the Slack blocks and the Teams card."""
    brief = plan_brief(
        host="web1\x1b]8;;http://evil\x07",
        goal="start\u202e app",
        argv=[["systemctl", "start", "app\x1b[2J.service"]],
    )
    notice = outcome_notice(
        plan=brief,
        reason="failed again\x1b[2J\u202e",
        verification=["killed\nState: VERIFIED", "\u2066journal: ok\u2069"],
        approved_by="alice\x07",
        next="look\x1b]8;;http://evil\x07",
        watch=WATCH,
    )
    message = render_outcome(notice, "alice", BASE)
    shown = {
        "subject": [message.subject],
        "text": message.text.splitlines(),
        "document": [*strings(message.document)],
        "slack": [*strings(slack.blocks(message.card))],
        "teams": [*strings(teams.adaptive_card(message.card))],
    }
    for where, texts in shown.items():
        # The chats' own line breaks (a section's title, a code block) are theirs.
        assert not [t for t in texts if CONTROL.search(t.replace("\n", ""))], where
    lines = message.text.splitlines()
    assert "web1\\x1b]8;;http://evil\\x07" in message.subject
    assert "State: UNRESOLVED since 2026-12-01 18:41 UTC: failed again\\x1b[2J\\u202e" in lines
    assert "Verification: killed\\x0aState: VERIFIED" in lines
    assert "              \\u2066journal: ok\\u2069" in lines
    assert [line for line in lines if line.startswith("State:")] == [lines[3]]
    assert "Approved by: alice\\x07" in lines
    assert "Next: look\\x1b]8;;http://evil\\x07" in lines
    assert message.document["verification"] == [
        "killed\\x0aState: VERIFIED",
        "\\u2066journal: ok\\u2069",
    ]
    assert message.document["steps"][0]["argv"][2] == "app\\x1b[2J.service"
    assert "Goal: start\\u202e app" in lines


# -- the chats --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(news()))
def test_each_piece_of_news_is_block_kit_that_slack_sdk_accepts(kind: str) -> None:
    """UNRESOLVED, VERIFIED, FAILED, a rule's approval, with and without the status link,
    and one whose every text is as long as the schema allows and made of markup: slack_sdk
    takes every block as it is, within Slack's limits; what opsbot-verify saw is under
    "Verification", not "Why"."""
    message = news()[kind]
    blocks = slack.blocks(message.card)
    assert_slack_takes(blocks)
    titles = [b["text"]["text"].split("\n")[0] for b in blocks if "text" in b]
    if "ruled" not in kind:
        assert "*Verification*" in titles and "*Why*" not in titles


def test_an_unresolved_plan_on_slack_shows_its_facts_and_what_comes_next() -> None:
    """bob's Slack: the header, the host, units, state since when, the reason, the
    incident, who approved it; the step; what opsbot-verify saw; the Status button; then
    what comes next and `opsbot show ID`."""
    blocks = slack.blocks(news()["unresolved"].card)
    header, facts, goal, steps, seen, actions, notes = blocks
    assert header["text"]["text"] == f"opsbot: plan {PLAN_ID} for app.service on web1 is UNRESOLVED"
    assert [f["text"] for f in facts["fields"]] == [
        "*Host*\nweb1",
        "*Units*\napp.service",
        "*State*\nUNRESOLVED since 2026-12-01 18:41 UTC",
        "*Reason*\napp.service failed again",
        f"*Incident*\n{PLAN_ID}, 1 plan since 2026-12-01 18:35 UTC",
        "*Approved by*\nrule night-restarts",
        f"*sha256*\n{SHA256[:12]}",
    ]
    assert f"```\nStep 1: {COMMAND}\n```" in steps["text"]["text"]
    assert seen["text"]["text"].startswith("*Verification*\napp.service is failed (signal)")
    assert actions["elements"][0]["url"] == STATUS
    assert notes["text"]["text"] == f"Next: {FOLLOW_UP}\nOn the host: opsbot show {PLAN_ID}"


@pytest.mark.parametrize("kind", list(news()))
def test_each_piece_of_news_is_an_adaptive_card_that_adaptivecards_parses(kind: str) -> None:
    """Microsoft's adaptivecards package parses and validates each card with no error,
    the status action among them, and the card is at most 24 KB."""
    card = teams.adaptive_card(news()[kind].card)
    assert len(json.dumps(card, ensure_ascii=False).encode()) <= teams.MAX_BYTES
    assert adaptive_card_errors(card) == []


def test_a_failed_incident_on_teams_says_a_human_must_look() -> None:
    """alice's Teams card: the title says the incident ended FAILED and a human must
    look, "Verification" says none was recorded, and the last lines are what comes next
    and how to follow the plan on the host."""
    card = teams.adaptive_card(news()["failed"].card)
    texts = [e["text"] for e in elements(card) if e["type"] == "TextRun"]
    assert texts[0] == f"opsbot: incident {PLAN_ID} on web1 ended FAILED: a human must look"
    assert texts[texts.index("Verification") + 1] == "(none recorded)"
    assert texts[-2:] == [f"Next: {LOOK}", f"On the host: opsbot show {PLAN_ID}"]


# -- delivery ---------------------------------------------------------------------------


def test_outcomes_reach_each_approver_they_name_once_on_each_of_their_channels(
    tmp_path: Path,
) -> None:
    """One announce holds a plan a rule approved, the UNRESOLVED news of another (naming
    alice twice, and bob) and the end of a third's incident (alice only): alice's signed
    webhook gets the three in that order, bob's Slack the first two, each with its status
    link; the run counts them and the journal says how many outcomes it was told."""
    unresolved = outcome_notice(
        plan=plan_brief("20261201-183501-2b3c4d5e"),
        approvers=("alice", "bob", "alice"),
        watch=WATCH,
    )
    ended = outcome_notice("ended", plan=plan_brief("20261201-183502-3c4d5e6f"))
    with receiver(signed_by(KEY)) as hook, receiver() as chat:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {
                    "ops-hook": {"kind": "webhook", "url": hook.url()},
                    "team": {"kind": "slack"},
                },
            },
            approvers={"alice": {"notify": ["ops-hook"]}, "bob": {"notify": ["team"]}},
        )
        creds = credentials(
            tmp_path / "c", {"ops-hook": KEY, "team": chat.url("/services/T/B/X").encode()}
        )
        told = Announced(
            notices=[],
            ruled=[rule_notice(approvers=("alice", "bob"), watch=WATCH)],
            outcomes=[unresolved, ended],
        )
        with capture_logs() as logs, approver(tmp_path / "a.sock", [told]) as fake:
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.ok
    assert (summary.plans, summary.ruled, summary.outcomes, summary.sent) == (0, 1, 2, 5)
    bodies = [json.loads(r.body) for r in hook.requests]
    assert [(b["event"], b["plan_id"], b["approver"]) for b in bodies] == [
        ("plan.approved_by_rule", PLAN_ID, "alice"),
        ("plan.unresolved", "20261201-183501-2b3c4d5e", "alice"),
        ("incident.ended", "20261201-183502-3c4d5e6f", "alice"),
    ]
    assert [b["status_url"] for b in bodies] == [STATUS, STATUS, None]
    assert hook.statuses == [204, 204, 204]
    texts = [json.loads(r.body)["text"] for r in chat.requests]
    assert [t.splitlines()[0] for t in texts] == [
        f"opsbot: rule night-restarts approved plan {PLAN_ID} for app.service on web1",
        "opsbot: plan 20261201-183501-2b3c4d5e for app.service on web1 is UNRESOLVED",
    ]
    for request in chat.requests:
        assert_slack_takes(json.loads(request.body)["blocks"])
    (announced, *_) = [e for e in logs if e["event"] == "notify.announced"]
    assert (announced["plans"], announced["ruled"], announced["outcomes"]) == (0, 1, 2)
    (done,) = [e for e in logs if e["event"] == "notify.done"]
    assert (done["outcomes"], done["sent"], done["failed"]) == (2, 5, 0)


def test_a_round_with_only_outcomes_still_asks_again(tmp_path: Path) -> None:
    """The first announce holds only an UNRESOLVED plan; its follow-up, stored meanwhile,
    waits for a human. The run asks again after telling the first, so the follow-up's
    links go out in the same run, and it stops when the approver has nothing new."""
    with receiver() as hook:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        first = Announced(notices=[], outcomes=[outcome_notice()])
        second = [notice(plan_view("20261201-183501-2b3c4d5e"))]
        with approver(tmp_path / "a.sock", [first, second]) as fake:
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert (summary.plans, summary.outcomes, summary.sent) == (1, 1, 2)
    assert [json.loads(r.body)["event"] for r in hook.requests] == [
        "plan.unresolved",
        "plan.proposed",
    ]
    assert len(fake.requests) == 3


def test_the_escaped_text_is_what_the_chats_show_not_markup() -> None:
    """A reason written as Slack markup (`<!channel>`) cannot ping anyone: it arrives
    escaped and verbatim in the card's facts."""
    message = render_outcome(outcome_notice(reason="boom <!channel> & more"), "alice", BASE)
    blocks = slack.blocks(message.card)
    assert_slack_takes(blocks)
    fields = [f["text"] for f in blocks[1]["fields"]]
    assert "*Reason*\nboom &lt;!channel&gt; &amp; more" in fields
    assert not re.search(r"<!channel>", json.dumps(blocks))


def test_on_ntfy_a_fix_that_did_not_hold_is_urgent_and_an_incident_that_verified_is_not(
    tmp_path: Path,
) -> None:
    """alice's phone, on ntfy: the UNRESOLVED plan and the FAILED incident come at high
    priority with a warning tag, the VERIFIED end at the default priority with a check
    mark; tapping any of them opens its status view, and none has Approve or Reject
    buttons."""
    with receiver() as topic:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {"phone": {"kind": "ntfy", "url": topic.url("/opsbot")}},
            },
            approvers={"alice": {"notify": ["phone"]}},
        )
        told = Announced(
            notices=[],
            outcomes=[
                outcome_notice(watch=WATCH),
                failed(),
                outcome_notice("ended", watch=WATCH),
            ],
        )
        with approver(tmp_path / "a.sock", [told]) as fake:
            creds = credentials(tmp_path / "c", {})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.ok and summary.sent == 3
    pushed = [
        (r.headers["priority"], r.headers["tags"], r.headers["click"]) for r in topic.requests
    ]
    assert pushed == [
        ("high", "opsbot,warning", STATUS),
        ("high", "opsbot,warning", STATUS),
        ("default", "opsbot,white_check_mark", STATUS),
    ]
    assert all("actions" not in r.headers for r in topic.requests)


def test_a_channel_two_approvers_share_gets_the_news_once(tmp_path: Path) -> None:
    """alice and bob both read the team's Slack channel, and bob his own ntfy topic too:
    the UNRESOLVED news is posted once to the team channel and once to bob's topic,
    while a plan that waits still goes to each of them with their own links."""
    with receiver() as chat, receiver() as topic:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {
                    "team": {"kind": "slack"},
                    "bob-phone": {"kind": "ntfy", "url": topic.url("/bob")},
                },
            },
            approvers={"alice": {"notify": ["team"]}, "bob": {"notify": ["team", "bob-phone"]}},
        )
        creds = credentials(tmp_path / "c", {"team": chat.url("/services/T/B/X").encode()})
        told = Announced(
            notices=[notice(approvers=("alice", "bob"))],
            outcomes=[outcome_notice(approvers=("alice", "bob"), watch=WATCH)],
        )
        with approver(tmp_path / "a.sock", [told]) as fake:
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    # The question: alice's on team, bob's on team and his topic; the news: team, topic.
    assert summary.ok and summary.sent == 3 + 2
    heads = [json.loads(r.body)["text"].splitlines()[0] for r in chat.requests]
    assert sum(h.endswith("is UNRESOLVED") for h in heads) == 1, heads
    assert sum(h.endswith("waits for approval") for h in heads) == 2, heads
    assert [r.headers["title"].endswith("is UNRESOLVED") for r in topic.requests] == [False, True]
