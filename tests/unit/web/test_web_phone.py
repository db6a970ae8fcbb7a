"""The page on a phone: it opens at what will change, on which host and why (no autofocus
scrolls it to the form); a wrong code is said beside the code field; the answer names
what was approved and links to a status view that shows what root's approver says of
the plan until it settles; times read "in 14 min" with the exact time in the element;
relayed text has no raw backticks or ISO times. (tests/integration/
test_approval_in_a_browser.py measures the same page in chromium at 390x844.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared_schema.approver_socket import Follow, Followed, StepView
from shared_schema.states import PlanState
from testbed.scripted_approver import brief_of, plan_view
from tests.unit.web.conftest import APPROVE, REJECT, Start, Web, argv_lines, csrf_of
from web_svc.app import STYLE
from web_svc.words import headline, relative, relayed, span, time_element

NOW = datetime(2026, 12, 1, 15, 36, 1, tzinfo=UTC)


def _approved(web: Web) -> str:
    """alice's answer page, once her code approved the plan."""
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
        answer = client.post(
            f"/p/{APPROVE}",
            data={"csrf": csrf_of(page.text), "confirm": "K7QM", "code": "123456"},
        )
    assert answer.status_code == 200, answer.text
    return answer.text


def test_the_plan_page_opens_at_what_changes_where_and_why(start_web: Start) -> None:
    """Nothing on the page takes the focus (autofocus would scroll a phone past the top),
    and the goal, the host, the units and the argv come before the form."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}").text
    assert "autofocus" not in page
    order = [page.index(f'id="{name}"') for name in ("goal", "host", "units", "argv")]
    assert order == sorted(order) and order[-1] < page.index("<form")
    assert "systemctl restart -- app.service" in argv_lines(page[: page.index("<form")])


def test_a_wrong_code_is_said_beside_the_code_field(start_web: Start) -> None:
    """After a wrong code the message follows the code field, which points to it; the
    top of the page is still the goal."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
        wrong = client.post(
            f"/p/{APPROVE}",
            data={"csrf": csrf_of(page.text), "confirm": "K7QM", "code": "999999"},
        )
    assert wrong.status_code == 400
    text = wrong.text
    code = text.index('id="code"')
    message = text.index('id="message"')
    assert code < message < text.index('id="reason"')
    assert 'aria-describedby="message"' in text[code:message]
    assert text.index('id="goal"') < code


def test_the_answer_names_what_was_approved_and_links_to_its_status(start_web: Start) -> None:
    """The approved page says the goal, the units and each step's argv, and links to the
    status view of the same link (relative, so that it works behind a proxy's prefix)."""
    web = start_web()
    answer = _approved(web)
    assert 'id="goal">bring app.service back<' in answer
    assert 'id="units" class="mono">app.service<' in answer
    assert argv_lines(answer) == ["systemctl restart -- app.service"]
    assert f'<a class="follow" id="follow" href="{APPROVE}/status">' in answer


def test_the_status_view_follows_the_plan_until_it_settles(start_web: Start) -> None:
    """The status view shows the state root's approver relays: while the plan moves it
    reloads itself every 10 s (no script: a meta refresh); once VERIFIED it says so,
    with what opsbot-verify saw, and stops reloading. It only ever asks ``follow``."""
    web = start_web()
    _approved(web)
    issued = web.approver.tokens[APPROVE]
    with web.client() as client:
        moving = client.get(f"/p/{APPROVE}/status")
        issued.state = PlanState.VERIFIED
        issued.verification = ["health target app: HTTP 200 for 30 s"]
        done = client.get(f"/p/{APPROVE}/status")
    assert moving.status_code == 200
    assert '<meta http-equiv="refresh" content="10">' in moving.text
    assert '<span id="state">APPROVED</span>' in moving.text
    assert done.status_code == 200
    assert "http-equiv" not in done.text
    assert '<span id="state">VERIFIED</span>' in done.text
    assert "It worked" in done.text and "HTTP 200 for 30 s" in done.text
    assert 'id="goal">bring app.service back<' in done.text
    follows = [r for r in web.approver.requests if isinstance(r, Follow)]
    assert follows == [Follow(token=APPROVE)] * 2


def test_a_link_that_decided_nothing_has_nothing_to_follow(start_web: Start) -> None:
    """The status view of a link not used yet, of an unknown one, or of a malformed one:
    a refusal page (410, or 404 without asking the approver), and the link still works."""
    web = start_web()
    with web.client() as client:
        for token in (APPROVE, REJECT, "Z" * 22):
            refused = client.get(f"/p/{token}/status")
            assert refused.status_code == 410, token
            assert "Nothing to follow here" in refused.text
        assert client.get("/p/short/status").status_code == 404
        assert client.post(f"/p/{APPROVE}/status").status_code == 405
        assert client.get(f"/p/{APPROVE}").status_code == 200
    assert not web.approver.tokens[APPROVE].used


def test_a_used_link_says_when_in_words_and_offers_the_status(start_web: Start) -> None:
    """Reopened, a used link's refusal is in words: the approver's ISO time as a <time>
    saying how long ago (the exact time in its title), `code` as <code>, escaped; the
    page offers the status view of the plan the link decided."""
    web = start_web()
    web.approver.tokens[APPROVE].used = True
    at = (datetime.now(UTC) - timedelta(minutes=3, seconds=10)).isoformat(timespec="seconds")
    reason = f"this link was used already (used, {at}): ask for a fresh one: `opsbot <b>`"
    web.approver.refusal = reason
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
    assert page.status_code == 410
    text = page.text
    assert "`" not in text and "<b>" not in text
    assert "<code>opsbot &lt;b&gt;</code>" in text
    assert f'<time datetime="{at}" title="' in text and ">3 min ago</time>" in text
    assert f'<a class="follow" id="follow" href="{APPROVE}/status">' in text


def test_times_are_said_as_a_person_says_them() -> None:
    """Seconds, minutes, hours and days, ahead and behind, rounded down; the element
    keeps the ISO time and the exact time with its zone."""
    assert [span(s) for s in (40, 14 * 60 + 59, 2 * 3600 + 5 * 60, 12 * 3600, 3 * 86400)] == [
        "40 s",
        "14 min",
        "2 h 5 min",
        "12 h",
        "3 days",
    ]
    assert relative(NOW + timedelta(minutes=14, seconds=30), NOW) == "in 14 min"
    assert relative(NOW - timedelta(minutes=3), NOW) == "3 min ago"
    assert relative(NOW + timedelta(seconds=2), NOW) == "just now"
    said = time_element(NOW + timedelta(minutes=14), NOW, full=True)
    assert said == (
        '<time datetime="2026-12-01T15:50:01+00:00" title="2026-12-01 15:50:01 UTC">'
        "in 14 min</time> (2026-12-01 15:50:01 UTC)"
    )


def test_relayed_text_is_escaped_and_has_no_raw_backticks() -> None:
    """`code` becomes <code>, a lone backtick is dropped, markup is escaped (inside code
    too), an ISO time becomes a <time>, and a malformed one stays text."""
    said = relayed(
        "run `opsbot approve <ID>` at 2026-12-01T15:33:01+00:00; a ` alone & "
        "2026-13-45T99:99:99+00:00",
        NOW,
    )
    assert said == (
        "run <code>opsbot approve &lt;ID&gt;</code> at "
        '<time datetime="2026-12-01T15:33:01+00:00" title="2026-12-01 15:33:01 UTC">'
        "3 min ago</time>; a  alone &amp; 2026-13-45T99:99:99+00:00"
    )


def test_a_status_link_from_a_news_message_shows_who_approved(start_web: Start) -> None:
    """The status link of a news message (a rule approved the plan; it ended UNRESOLVED)
    shows the plan, approved by the rule, UNRESOLVED, with what opsbot-verify saw, and
    offers no form: the page only asked ``follow``."""
    web = start_web()
    watch = "W" * 21 + "w"
    at = datetime.now(UTC) - timedelta(minutes=5)
    web.approver.watches[watch] = Followed(
        plan=brief_of(plan_view()),
        approved_by="rule night-restarts",
        approved_at=at,
        state=PlanState.UNRESOLVED,
        since=at + timedelta(minutes=2),
        verification=["app.service failed again: port 8080 refused"],
    )
    with web.client() as client:
        page = client.get(f"/p/{watch}/status")
    assert page.status_code == 200
    assert '<span id="state">UNRESOLVED</span>' in page.text
    assert 'id="decided">Approved by rule night-restarts' in page.text
    assert "port 8080 refused" in page.text
    assert "<form" not in page.text and "http-equiv" not in page.text
    assert web.approver.requests == [Follow(token=watch)]


def test_what_verify_saw_is_shown_with_its_bidi_and_control_characters_escaped(
    start_web: Start,
) -> None:
    """A unit logged a right-to-left override and an escape sequence, and opsbot-verify
    quoted the line: the status view shows them as escapes, never as characters the
    browser would obey."""
    web = start_web()
    watch = "W" * 21 + "x"
    web.approver.watches[watch] = Followed(
        plan=brief_of(plan_view()),
        state=PlanState.UNRESOLVED,
        reason="verify: app.service \u202etxt.exe\u202c failed",
        verification=["journal: \x1b[31mapprove now\u202e"],
    )
    failed = "F" * 21 + "x"  # one that ended without a verification: its reason shows
    web.approver.watches[failed] = web.approver.watches[watch].model_copy(
        update={"state": PlanState.FAILED, "verification": []}
    )
    with web.client() as client:
        page, other = client.get(f"/p/{watch}/status"), client.get(f"/p/{failed}/status")
    assert page.status_code == other.status_code == 200
    for text in (page.text, other.text):
        assert "\u202e" not in text and "\x1b" not in text
    assert "journal: \\x1b[31mapprove now\\u202e" in page.text
    assert "app.service \\u202etxt.exe\\u202c failed" in other.text


def test_the_headline_says_what_the_plan_does_and_where(start_web: Start) -> None:
    """The page's headline is the action a person decides on, from the argv root's
    approver built (never the model's goal): "Restart app.service on web1"; the plan id
    follows it, with the question the link asks. A plan of several steps names the first
    two and counts the rest."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}").text
    assert '<h1 id="headline">Restart app.service on web1</h1>' in page
    assert "<title>Restart app.service on web1: approve?</title>" in page
    asked = page[page.index("</h1>") : page.index('<dl class="summary">')]
    assert "Approve plan" in asked and "20261201-152001-0a1b2c3d" in asked

    def step(verb: str, unit: str) -> StepView:
        return StepView(unit=unit, argv=["systemctl", verb, "--no-ask-password", "--", unit])

    steps = [step("reset-failed", "db.service"), step("start", "db.service")]
    assert headline(steps[:1], "db1") == "Clear the failed state of db.service on db1"
    assert headline(steps, "db1") == (
        "Clear the failed state of db.service, then start db.service on db1"
    )
    three = headline([*steps, step("restart", "app.service")], "db1")
    assert (
        three
        == "Clear the failed state of db.service, then start db.service, then 1 more step on db1"
    )
    four = headline([*steps, step("restart", "a.service"), step("stop", "b.service")], "db1")
    assert four.endswith(", then 2 more steps on db1"), four


def test_argv_breaks_between_its_words_never_inside_one(start_web: Start) -> None:
    """Each word of a step's argv is an item of its own, which a narrow screen moves to
    the next line whole (`--no-ask-password` never reads `--no-ask-passwo` / `rd`); the
    text still reads, and copies, as the command. No rule of the page's style breaks a
    word anywhere (word-break: break-all). The browser story measures it on a phone."""
    argv = ["systemctl", "restart", "--no-ask-password", "--", "app.service"]
    web = start_web()
    plan = plan_view(steps=[StepView(unit="app.service", argv=argv)])
    web.approver.issue(APPROVE, "approve", plan)
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}").text
    words = "".join(f'<span class="arg">{word}</span> ' for word in argv).rstrip()
    assert f'<pre class="argv">{words}</pre>' in page
    assert argv_lines(page) == [" ".join(argv)] * 2  # the summary and the steps
    assert "break-all" not in STYLE and ".argv .arg{display:inline-block" in STYLE


def test_a_wrong_code_keeps_what_was_typed_but_the_code(start_web: Start) -> None:
    """alice types the confirmation, a wrong code and a reason: the form comes back with
    the confirmation and the reason as she typed them, and the code field empty, so that
    she types only the next code."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
        wrong = client.post(
            f"/p/{APPROVE}",
            data={
                "csrf": csrf_of(page.text),
                "confirm": "k7qm",
                "code": "999999",
                "reason": 'on call "tonight"',
            },
        )
    assert wrong.status_code == 400
    text = wrong.text
    confirm = text[text.index('id="confirm"') :]
    assert confirm[: confirm.index(">")].count('value="K7QM"') == 1, confirm[:300]
    code = text[text.index('id="code"') :]
    assert "value=" not in code[: code.index(">")]
    reason = text[text.index('id="reason"') :]
    assert 'value="on call &#34;tonight&#34;"' in reason[: reason.index(">")]
