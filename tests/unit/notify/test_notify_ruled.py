"""When a standing rule approves a plan, the approvers hear of it: the approver's
``announce`` carries it in ``ruled``, and opsbot-notify tells each approver it names, on
each of their channels, which rule approved what, the command, why, when it runs and how
to pause every rule. There is no link (nothing is left to decide). A channel that fails
is counted as for any message, and an announce holding plans that wait and plans a rule
approved sends both."""

from __future__ import annotations

import email
import email.policy
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from structlog.testing import capture_logs

from notify_svc.news import render_ruled
from notify_svc.run import notify
from shared_schema.approver_socket import Announced
from tests.unit.notify.test_notify_email import Inbox
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    RULE_SHA256,
    SHA256,
    Sleeps,
    always,
    approver,
    config,
    credentials,
    free_port,
    notice,
    plan_brief,
    plan_view,
    receiver,
    rule_notice,
    signed_by,
)

KEY = b"webhook-key-0123456789"
BASE = "https://ops.example.com/opsbot"
COMMAND = "systemctl start --no-block app.service"
WHY = "app.service failed with result 'signal'"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    """A real SMTP relay on 127.0.0.1, without login."""
    inbox, port = Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


def test_the_message_says_which_rule_approved_what_and_why_and_holds_no_link() -> None:
    """Alice reads, at 3 a.m. or the next morning: rule night-restarts approved plan ID
    for app.service on web1, the command it runs, the evidence, that it runs at once and
    will be verified (and how to follow it), and how to pause every rule. No link and no
    approve command: there is nothing to decide."""
    message = render_ruled(rule_notice(), "alice", BASE)
    head = f"opsbot: rule night-restarts approved plan {PLAN_ID} for app.service on web1"
    assert message.subject == head
    assert message.text.splitlines() == [
        head,
        "Goal: start app.service, killed by SIGKILL",
        f"Step 1: {COMMAND}",
        f"Why: {WHY}",
        "     journal: Main process exited, code=killed, status=9/KILL",
        f"It runs at once and will be verified; opsbot show {PLAN_ID} on the host follows it.",
        f"sha256: {SHA256[:12]}   rule sha256: {RULE_SHA256[:12]}   approved 2026-12-01 18:35 UTC",
        "Pause every rule: sudo opsbot policy pause",
    ]
    assert (message.plan_id, message.approver) == (PLAN_ID, "alice")
    assert message.approve_url is None and message.reject_url is None
    assert "http" not in message.text and "opsbot approve" not in message.text


def test_a_plan_that_waits_for_its_window_says_when_it_runs() -> None:
    """A rule approved it outside the apply window: the message says it runs in the
    window, not at once; the webhook's ``runs`` says the same."""
    runs = "in its apply window, Wed 2026-12-02 02:00 UTC to 04:00"
    message = render_ruled(rule_notice(runs=runs), "alice", None)
    assert f"It runs {runs}, and will be verified; opsbot show {PLAN_ID}" in message.text
    assert "at once" not in message.text
    assert message.document["runs"] == runs


def test_the_webhook_document_is_a_plan_approved_by_rule_event() -> None:
    """A receiver that files events tells this one from a plan that waits by its
    ``event``; it gets the rule, its sha256, each step's argv, the why and no decision
    link (and, the approver having minted no status link, ``status_url`` null)."""
    document = render_ruled(rule_notice(approvers=("alice", "bob")), "bob", None).document
    assert document["event"] == "plan.approved_by_rule"
    assert (document["plan_id"], document["sha256"]) == (PLAN_ID, SHA256)
    assert (document["rule"], document["rule_sha256"]) == ("night-restarts", RULE_SHA256)
    assert document["steps"] == [{"argv": shlex.split(COMMAND), "command": COMMAND}]
    assert document["why"][0] == WHY
    assert document["approved_at"] == "2026-12-01T18:35:00+00:00"
    assert document["runs"] == "at once" and document["approver"] == "bob"
    assert document["pause"] == "sudo opsbot policy pause"
    assert [key for key in document if "url" in key] == ["status_url"]
    assert document["status_url"] is None


def test_text_from_the_plan_is_shown_as_escapes_and_long_plans_are_cut() -> None:
    """The goal, the why, an argv and the host came through a model that read the
    journal: escape sequences, newlines and bidirectional overrides arrive as visible
    escapes in the text, the subject and the document; of 12 steps, 8 are shown."""
    steps = [["systemctl", "start", f"u{i}\x1b[2J.service"] for i in range(12)]
    brief = plan_brief(host="web1\x1b]8;;http://evil\x07", goal="start\u202e app", argv=steps)
    notice = rule_notice(brief, why=["killed\nPause every rule: nothing", "x" * 900])
    message = render_ruled(notice, "alice", None)
    for shown in (message.text, message.subject, repr(message.document)):
        assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "web1\\x1b]8;;http://evil\\x07" in message.subject
    assert "Why: killed\\x0aPause every rule: nothing" in message.text
    assert message.document["steps"][0]["argv"][2] == "u0\\x1b[2J.service"
    assert "Step 8: " in message.text and "Step 9: " not in message.text
    assert f"... and 4 more steps (opsbot show {PLAN_ID} shows all)" in message.text
    assert max(len(line) for line in message.text.splitlines()) <= 305
    pauses = [line for line in message.text.splitlines() if line.startswith("Pause every")]
    assert pauses == ["Pause every rule: sudo opsbot policy pause"]


def test_a_rule_notice_reaches_each_approver_on_each_of_their_channels(
    tmp_path: Path, smtp: tuple[Inbox, int]
) -> None:
    """The rule approved a plan at night: alice hears of it on the signed webhook and on
    ntfy (no Click, no buttons), bob on Slack and by email; each message names the rule,
    the command and the why, and holds no link. carol approves on the host only: a
    warning, not a failure."""
    inbox, port = smtp
    with receiver(signed_by(KEY)) as hook, receiver() as topic, receiver() as slack:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {
                    "ops-hook": {"kind": "webhook", "url": hook.url()},
                    "phone": {"kind": "ntfy", "url": topic.url("/opsbot")},
                    "team": {"kind": "slack"},
                    "mail": {
                        "kind": "email",
                        "host": "127.0.0.1",
                        "port": port,
                        "security": "none",
                        "sender": "opsbot@web1.example.com",
                        "to": ["bob@example.com"],
                    },
                },
            },
            approvers={
                "alice": {"notify": ["ops-hook", "phone"]},
                "bob": {"notify": ["team", "mail"]},
                "carol": {},
            },
        )
        creds = credentials(
            tmp_path / "c", {"ops-hook": KEY, "team": slack.url("/services/T/B/X").encode()}
        )
        told = Announced(notices=[], ruled=[rule_notice(approvers=("alice", "bob", "carol"))])
        with capture_logs() as logs, approver(tmp_path / "a.sock", [told]) as fake:
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.ok
    assert (summary.plans, summary.ruled, summary.sent) == (0, 1, 4)
    head = f"opsbot: rule night-restarts approved plan {PLAN_ID} for app.service on web1"
    (posted,) = hook.requests
    document = json.loads(posted.body)
    assert hook.statuses == [204]
    assert (document["event"], document["approver"]) == ("plan.approved_by_rule", "alice")
    (pushed,) = topic.requests
    assert pushed.headers["title"] == head
    assert "click" not in pushed.headers and "actions" not in pushed.headers
    # News, not a call to act: not the urgent, waiting tag of a plan with links.
    assert (pushed.headers["priority"], pushed.headers["tags"]) == ("default", "opsbot,robot")
    (chat,) = slack.requests
    ((_, rcpt_tos, content),) = inbox.messages
    mail = email.message_from_bytes(content, policy=email.policy.default)
    assert rcpt_tos == ["bob@example.com"] and mail["Subject"] == head
    assert mail["X-Opsbot-Plan"] == PLAN_ID
    texts = {
        "webhook": document["text"],
        "ntfy": pushed.body.decode(),
        "slack": json.loads(chat.body)["text"],
        "email": mail.get_content(),  # type: ignore[attr-defined]
    }
    for kind, text in texts.items():
        assert text.startswith(head), kind
        assert f"Step 1: {COMMAND}" in text, kind
        assert f"Why: {WHY}" in text, kind
        assert "sudo opsbot policy pause" in text, kind
        assert BASE not in text and "/p/" not in text, kind
    warnings = [e for e in logs if e["event"] == "notify.no_channels"]
    assert [(e["approver"], e["plan_id"]) for e in warnings] == [("carol", PLAN_ID)]
    assert len(fake.requests) == 2


def test_a_failed_channel_for_a_rule_notice_is_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Alice's second channel answers 500: the first still carries the news, the run
    counts one failure (plan, approver, channel) and is not ok, so the unit exits 1 and
    the journal says which message did not go out."""
    with receiver(signed_by(KEY)) as hook, receiver(always(500)) as broken:
        cfg = config(
            notify={
                "attempts": 2,
                "channels": {
                    "ops-hook": {"kind": "webhook", "url": hook.url()},
                    "broken": {"kind": "webhook", "url": broken.url()},
                },
            },
            approvers={"alice": {"notify": ["ops-hook", "broken"]}},
        )
        creds = credentials(tmp_path / "c", {"ops-hook": KEY, "broken": KEY})
        told = Announced(notices=[], ruled=[rule_notice()])
        sleeps = Sleeps()
        with capture_logs() as logs, approver(tmp_path / "a.sock", [told]) as fake:
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=sleeps)
    assert not summary.ok
    assert (summary.ruled, summary.sent, summary.failed) == (1, 1, 1)
    assert summary.failures == [(PLAN_ID, "alice", "broken")]
    assert hook.statuses == [204] and broken.statuses == [500, 500] and sleeps.delays == [1.0]
    failed = [e for e in logs if e["event"] == "notify.failed"]
    assert [(e["plan_id"], e["channel"], e["tries"]) for e in failed] == [(PLAN_ID, "broken", 2)]


def test_an_announce_with_plans_that_wait_and_plans_a_rule_approved_sends_both(
    tmp_path: Path,
) -> None:
    """One announce holds a plan waiting for alice (with her links) and one a rule
    approved: she gets both, the one to decide with its links first."""
    waiting = notice(plan_view("20261201-183501-2b3c4d5e"))
    with receiver(signed_by(KEY)) as hook:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}},
            },
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        told = Announced(notices=[waiting], ruled=[rule_notice()])
        with approver(tmp_path / "a.sock", [told]) as fake:
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.ok and (summary.plans, summary.ruled, summary.sent) == (1, 1, 2)
    bodies = [json.loads(r.body) for r in hook.requests]
    assert [(b["event"], b["plan_id"]) for b in bodies] == [
        ("plan.proposed", "20261201-183501-2b3c4d5e"),
        ("plan.approved_by_rule", PLAN_ID),
    ]
    assert bodies[0]["approve_url"].startswith(f"{BASE}/p/")
    assert hook.statuses == [204, 204]


def test_a_round_with_only_ruled_plans_still_asks_again(tmp_path: Path) -> None:
    """The first announce holds only a plan a rule approved; a plan stored meanwhile
    waits for a human. The run asks again after telling the first, so the second is
    sent in the same run, and stops when the approver has nothing new."""
    with receiver() as hook:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        first = Announced(notices=[], ruled=[rule_notice()])
        second = [notice(plan_view("20261201-183501-2b3c4d5e"))]
        with approver(tmp_path / "a.sock", [first, second]) as fake:
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert (summary.plans, summary.ruled, summary.sent) == (1, 1, 2)
    assert [json.loads(r.body)["event"] for r in hook.requests] == [
        "plan.approved_by_rule",
        "plan.proposed",
    ]
    assert len(fake.requests) == 3
