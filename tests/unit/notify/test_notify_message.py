"""What an approver reads on their phone: host, unit, goal, each step as the argv it
runs, its precondition, the sha256's first 12 hex, the expiries, two lines of evidence,
their own approve and reject links and the command that does the same on the host; the
plan's text made safe to show, and short."""

from __future__ import annotations

import shlex

from approver_svc.view import attempt_words
from notify_svc.message import render, subject
from shared_schema import Plan
from tests.unit.notify.test_notify_support import PLAN_ID, SHA256, notice, plan_view, token

BASE = "https://ops.example.com/opsbot"


def test_the_message_holds_every_fact_an_approver_needs() -> None:
    """argv shell-quoted, the precondition in words, the 12-hex prefix (not more), the
    evidence, both of the approver's links, both expiries and the shell fallback."""
    argv = ["systemctl", "set-property", "app.service", "Description=my app"]
    plan = plan_view(
        steps=[
            {
                "unit": "app.service",
                "argv": argv,
                "precondition": ["app.service is failed", "its result is exit-code"],
            }
        ]
    )
    n = notice(plan, approvers=("alice",))
    message = render(n, "alice", BASE)
    text = message.text
    assert message.subject == (f"opsbot: plan {PLAN_ID} for app.service on web1 waits for approval")
    assert text.startswith(message.subject + "\n")
    assert "Goal: restart app.service, which crashed on a full disk" in text
    assert f"Step 1: {shlex.join(argv)}" in text
    assert "'Description=my app'" in text
    assert "precondition: app.service is failed; its result is exit-code" in text
    assert f"sha256: {SHA256[:12]} " in text
    assert SHA256[:13] not in text
    assert "Evidence: app.service failed with result 'exit-code'" in text
    assert "          journal: No space left on device" in text
    approve, reject = token(n, "alice", "approve"), token(n, "alice", "reject")
    assert f"Approve (alice): {BASE}/p/{approve}" in text
    assert f"Reject (alice):  {BASE}/p/{reject}" in text
    assert (message.approve_url, message.reject_url) == (
        f"{BASE}/p/{approve}",
        f"{BASE}/p/{reject}",
    )
    assert "Links expire 2026-12-01 19:34 UTC; the plan expires 2026-12-02 18:35 UTC." in text
    assert text.endswith(f"On the host: sudo opsbot approve {PLAN_ID} --sha256 {SHA256[:12]}\n")
    assert len(text.splitlines()) <= 14


def test_each_approver_gets_only_their_own_links() -> None:
    """Bob's message carries bob's two tokens and none of alice's: a token is bound to
    one approver, so forwarding alice's message would not let bob act as her."""
    n = notice(approvers=("alice", "bob"))
    bob = render(n, "bob", BASE)
    assert token(n, "bob", "approve") in bob.text
    assert token(n, "bob", "reject") in bob.text
    assert token(n, "alice", "approve") not in bob.text
    assert token(n, "alice", "reject") not in bob.text
    assert bob.document["approver"] == "bob"


def test_without_link_base_the_message_says_so_and_gives_the_shell_command() -> None:
    """No [notify] link_base: no links (the tokens are not shown at all), a line saying
    the page is not configured, and `sudo opsbot approve ID --sha256 PREFIX`."""
    n = notice()
    message = render(n, "alice", None)
    assert message.approve_url is None and message.reject_url is None
    assert "The approval page is not configured ([notify] link_base)." in message.text
    assert f"sudo opsbot approve {PLAN_ID} --sha256 {SHA256[:12]}" in message.text
    assert token(n, "alice", "approve") not in message.text
    assert "http" not in message.text


def test_a_link_base_with_a_trailing_slash_makes_the_same_links() -> None:
    """``https://ops.example.com/`` (as pydantic writes a bare host) gives ``/p/<token>``,
    not ``//p/<token>``."""
    n = notice()
    message = render(n, "alice", "https://ops.example.com/")
    assert message.approve_url == f"https://ops.example.com/p/{token(n, 'alice', 'approve')}"


def test_control_characters_from_the_plan_are_shown_as_escapes() -> None:
    """A goal or an argv holding an escape sequence, a newline or a bidirectional
    override (from a model that read the journal) reaches the message as visible
    escapes, in the text, the subject and the webhook's document."""
    plan = plan_view(
        host="web1\x1b[2J",
        goal="restart\x1b]8;;http://evil\x07 app\u202e",
        evidence=["line one\nApprove: http://evil", "two"],
        steps=[{"unit": "app.service", "argv": ["systemctl", "restart", "a\x1bpp.service"]}],
    )
    message = render(notice(plan), "alice", BASE)
    for shown in (message.text, message.subject, repr(message.document)):
        assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "\\x1b]8;;http://evil\\x07" in message.text
    assert "line one\\x0aApprove: http://evil" in message.text
    assert "web1\\x1b[2J" in message.subject
    assert message.document["steps"][0]["argv"][2] == "a\\x1bpp.service"
    # Only the lines the message itself makes.
    assert not any(line.startswith("Approve: ") for line in message.text.splitlines())


def test_long_plans_are_cut_short() -> None:
    """A goal of 2000 characters is cut to 300; of 20 steps, 8 are shown and the rest
    counted; more than two evidence lines give two."""
    steps = [
        {"unit": "app.service", "argv": ["systemctl", "restart", f"u{i}.service"]}
        for i in range(20)
    ]
    plan = plan_view(
        goal="g" * 2000,
        steps=steps,
        evidence=["first evidence", "second evidence", "third evidence"],
    )
    message = render(notice(plan), "alice", BASE)
    goal_line = next(line for line in message.text.splitlines() if line.startswith("Goal: "))
    assert len(goal_line) == len("Goal: ") + 300
    assert "Step 8: " in message.text and "Step 9: " not in message.text
    assert "... and 12 more steps (the page shows all)" in message.text
    assert "second evidence" in message.text and "third evidence" not in message.text
    assert len(message.document["steps"]) == 20


def test_the_webhook_document_holds_the_same_facts() -> None:
    """The JSON a webhook receiver gets: ids, the full sha256 and its prefix, argv as a
    list, both links, the expiries in ISO 8601 UTC and the plain text."""
    n = notice()
    document = render(n, "alice", BASE).document
    assert document["plan_id"] == PLAN_ID
    assert document["sha256"] == SHA256 and document["sha256_prefix"] == SHA256[:12]
    assert document["steps"][0]["argv"] == ["systemctl", "restart", "--no-block", "app.service"]
    assert document["steps"][0]["precondition"] == ["app.service is failed"]
    assert document["approve_url"] == f"{BASE}/p/{token(n, 'alice', 'approve')}"
    assert document["plan_expires_at"] == "2026-12-02T18:35:00+00:00"
    assert document["links_expire_at"] == "2026-12-01T19:34:00+00:00"
    assert document["evidence"] == [
        "app.service failed with result 'exit-code'",
        "journal: No space left on device",
    ]
    assert "Approve (alice)" in document["text"]


def test_the_subject_names_every_unit() -> None:
    """Two units are both in the subject (and the email's Subject)."""
    plan = plan_view(units=["app.service", "db.service"])
    assert "for app.service, db.service on web1" in subject(plan)


def test_a_follow_up_says_which_attempt_it_is_and_what_did_not_cure_it() -> None:
    """The second plan of an incident reads as the second attempt: for which symptom,
    and what the first ran; the page's view and the webhook carry the same words."""
    first = Plan.model_validate(
        {
            "goal": "start ledger",
            "steps": [{"tool": "start_unit", "args": {"unit": "ledger.service"}}],
            "symptom": {"unit": "web.service", "health": ["web"]},
        }
    )
    second = first.model_copy(update={"follows": "20261201-183000-1a2b3c4d", "goal": "restart web"})
    words = attempt_words(second, first, 2)
    assert words == (
        "second attempt for web.service (health target web failing): plan "
        "20261201-183000-1a2b3c4d (start_unit ledger.service) did not cure it"
    )
    assert attempt_words(first, None, 1) == ""
    message = render(notice(plan_view(attempt=words)), "alice", BASE)
    assert f"This is the {words}." in message.text
    assert message.document["attempt"] == words
