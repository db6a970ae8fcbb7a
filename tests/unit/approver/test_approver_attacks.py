"""A compromised opsbot-web or opsbot-notify cannot approve anything: the approver, on a
real Unix socket, turns a click into root's approval only for the one plan, sha256,
approver and decision its single-use token was made for, with that approver's TOTP code,
once. Forged, replayed, expired and cross-plan tokens, a reject link used to approve,
wrong and reused codes, guessing past the limits, and each relay asking what only the
other may ask: all refused, and no approval file written."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from approver_svc import tokens
from plans import PlanStore, approval_path
from shared_schema import PlanState
from shared_schema.approver_socket import Announce, Decide, Decided, Refused, View
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import edit_record, plan_of, step


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers notice their stop within 50 ms, not the daemon's half second."""
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def approval_of(b: Bench, plan_id: str) -> dict[str, object] | None:
    path = approval_path(b.approvals_dir, plan_id)
    return json.loads(path.read_text()) if path.exists() else None


def refused(reply: object, kind: str) -> Refused:
    assert isinstance(reply, Refused), reply
    assert reply.kind == kind, reply
    return reply


def test_an_approve_link_and_its_code_write_the_approval_opsbot_approve_writes(b: Bench) -> None:
    """alice's approve link and her code: the approval file binds plan A's id and full
    sha256 to alice, the plan is APPROVED by alice, the journal says it came from the
    web (with the source and reason), and the apply is asked to start."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    with capture_logs() as logs:
        reply = b.decide(link.token, b.code(), reason="looks right")
    assert isinstance(reply, Decided), reply
    assert (reply.decision, reply.plan_id, reply.sha256, reply.approver) == (
        "approve",
        a.plan_id,
        a.sha256,
        "alice",
    )
    approval = approval_of(b, a.plan_id)
    assert approval is not None
    assert (approval["plan_id"], approval["sha256"], approval["approver"]) == (
        a.plan_id,
        a.sha256,
        "alice",
    )
    status = b.store.status(a.plan_id)
    assert (status.state, status.approved_by) == (PlanState.APPROVED, "alice")
    assert reply.applies.startswith("opsbot-apply.service starts now")
    assert b.applies_started == [False]
    [web] = [e for e in logs if e["event"] == "approval.web"]
    assert (web["plan_id"], web["sha256"], web["approver"], web["via"]) == (
        a.plan_id,
        a.sha256,
        "alice",
        "web",
    )
    assert (web["source"], web["reason"]) == ("192.0.2.7", "looks right")


def test_a_forged_token_is_refused_in_the_words_of_any_unknown_one(b: Bench) -> None:
    """A well-formed token the approver never made: refused as ``token`` with the one
    message every unknown token gets, before anything else (no code checked, no attempt
    counted: the state file is untouched), and nothing approved."""
    a = b.submit()
    b.links(a.plan_id)
    before = b.state_bytes()
    for forged in (secrets.token_urlsafe(16), "A" * 22):
        reply = refused(b.decide(forged, b.code()), "token")
        assert reply.reason.startswith(tokens.UNKNOWN)
        assert refused(b.view(forged), "token").reason == reply.reason
    assert b.state_bytes() == before
    assert approval_of(b, a.plan_id) is None


def test_a_used_link_is_refused_the_second_time_and_takes_its_sibling_with_it(b: Bench) -> None:
    """Approved once; the same link again (a replay, with the next valid code) is refused
    as used, and so is the reject link for the same plan and approver. Bob's own links
    are his: one approver's click uses up nobody else's."""
    a = b.submit()
    links = b.links(a.plan_id)
    assert isinstance(b.decide(links[("alice", "approve")].token, b.code()), Decided)
    b.clock.advance(30)
    again = refused(b.decide(links[("alice", "approve")].token, b.code()), "token")
    assert "used already" in again.reason
    assert "used already" in refused(b.view(links[("alice", "reject")].token), "token").reason
    assert isinstance(b.view(links[("bob", "approve")].token), object)
    assert b.store.status(a.plan_id).state is PlanState.APPROVED


def test_an_expired_link_is_refused(b: Bench) -> None:
    """A link past its expiry (approval_ttl_seconds after the announce, by the injected
    clock) is refused as ``token`` and approves nothing."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert (link.expires_at - b.clock()).total_seconds() == 3600
    b.clock.advance(3600)
    refused(b.view(link.token), "token")
    refused(b.decide(link.token, b.code()), "token")
    assert approval_of(b, a.plan_id) is None


def test_a_link_for_plan_a_never_approves_a_rewritten_plan_a(b: Bench) -> None:
    """Between the announce and the click, someone with the executor's uid puts another
    plan in A's record (its sha256 recomputed, so the store's own check passes): the
    link was made for A's old sha256, so the approver refuses it as ``plan`` and writes
    no approval."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    other = plan_of(step("restart_unit", "app.service"))
    edit_record(b.store, a.plan_id, plan=other.canonical().decode(), sha256=other.fingerprint())
    b.witness.logged[a.plan_id].add(other.fingerprint())  # even a journal that agrees
    reply = refused(b.decide(link.token, b.code()), "plan")
    assert "not the plan this link was made for" in reply.reason
    assert approval_of(b, a.plan_id) is None
    assert b.store.status(a.plan_id).state is PlanState.PROPOSED


def test_a_plan_the_executor_never_logged_is_not_approved(b: Bench) -> None:
    """The record and the link agree, but the executor's journal names another sha256
    for the id (a record planted with its state forged): refused as ``plan``."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    b.witness.logged[a.plan_id] = {"f" * 64}
    refused(b.decide(link.token, b.code()), "plan")
    assert approval_of(b, a.plan_id) is None


def test_a_link_for_plan_a_approves_plan_a_only(b: Bench) -> None:
    """Two plans waiting: A's link approves A, the approval file written names A and its
    sha256 only, and B has no approval and is still PROPOSED."""
    a = b.submit()
    c = b.submit(unit="app.service")
    links = b.links(a.plan_id)
    assert isinstance(b.decide(links[("alice", "approve")].token, b.code()), Decided)
    approval = approval_of(b, a.plan_id)
    assert approval is not None and (approval["plan_id"], approval["sha256"]) == (
        a.plan_id,
        a.sha256,
    )
    assert approval_of(b, c.plan_id) is None
    assert b.store.status(c.plan_id).state is PlanState.PROPOSED


def test_a_reject_link_cannot_approve(b: Bench) -> None:
    """The reject link, whatever a relay that saw it sends with it, rejects: the plan is
    REJECTED by alice, no approval file exists, and the approve link is dead after it."""
    a = b.submit()
    links = b.links(a.plan_id)
    reply = b.decide(links[("alice", "reject")].token, b.code(), reason="not at night")
    assert isinstance(reply, Decided) and reply.decision == "reject"
    assert approval_of(b, a.plan_id) is None
    status = b.store.status(a.plan_id)
    assert (status.state, status.reason) == (PlanState.REJECTED, "not at night")
    b.clock.advance(30)
    refused(b.decide(links[("alice", "approve")].token, b.code()), "token")
    refused(b.decide(links[("bob", "approve")].token, b.code("bob")), "plan")
    assert approval_of(b, a.plan_id) is None


def test_a_wrong_code_approves_nothing_and_the_link_still_works(b: Bench) -> None:
    """A wrong code, and bob's code on alice's link: refused as ``code``; the link is not
    used up by it, and alice's right code then approves."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    wrong = f"{(int(b.code()) + 1) % 1000000:06d}"
    refused(b.decide(link.token, wrong), "code")
    if b.code("bob") != b.code():
        refused(b.decide(link.token, b.code("bob")), "code")
    assert approval_of(b, a.plan_id) is None
    assert isinstance(b.decide(link.token, b.code()), Decided)


def test_a_code_works_once(b: Bench) -> None:
    """alice's code approves plan A; the same code (same 30 s step) on her link for plan
    B is refused as used, and so is the code of the step before; the next step's works."""
    a, c = b.submit(), b.submit(unit="app.service")
    link_a = b.links(a.plan_id)[("alice", "approve")]
    link_c = b.links(c.plan_id)[("alice", "approve")]
    code = b.code()
    assert isinstance(b.decide(link_a.token, code), Decided)
    assert "used already" in refused(b.decide(link_c.token, code), "code").reason
    refused(b.decide(link_c.token, b.code(ahead=-1)), "code")
    assert approval_of(b, c.plan_id) is None
    assert isinstance(b.decide(link_c.token, b.code(ahead=1)), Decided)


def wrong(b: Bench, approver: str = "alice") -> str:
    return f"{(int(b.code(approver)) + 500000) % 1000000:06d}"


def test_five_wrong_codes_burn_the_link(b: Bench) -> None:
    """Four wrong codes are ``code``; the fifth is ``limit`` and burns the link: alice's
    right code then gets ``token``, and nothing was approved."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    kinds = [refused(b.decide(link.token, wrong(b)), k).kind for k in ["code"] * 4 + ["limit"]]
    assert kinds == ["code"] * 4 + ["limit"]
    refused(b.decide(link.token, b.code()), "token")
    assert approval_of(b, a.plan_id) is None


def test_ten_wrong_codes_lock_the_approver_for_fifteen_minutes(b: Bench) -> None:
    """Ten wrong codes of alice's within 15 minutes, spread over links so that no link
    burns: alice is locked (``limit``, even with her right code), bob is not; once the
    wrong codes are 15 minutes old her link works again."""
    a, c = b.submit(), b.submit(unit="app.service")
    links_a, links_c = b.links(a.plan_id), b.links(c.plan_id)
    spread = [links_a[("alice", "approve")], links_a[("alice", "reject")]]
    spread += [links_c[("alice", "reject")]]
    for index in range(10):
        reply = refused(
            b.decide(spread[index % 3].token, wrong(b)), "code" if index < 9 else "limit"
        )
        assert reply.kind in ("code", "limit")
    target = links_c[("alice", "approve")]
    refused(b.decide(target.token, b.code()), "limit")
    assert approval_of(b, c.plan_id) is None
    assert isinstance(b.decide(links_a[("bob", "approve")].token, b.code("bob")), Decided)
    b.clock.advance(15 * 60)
    assert isinstance(b.decide(target.token, b.code()), Decided)


def test_thirty_wrong_codes_in_a_day_lock_the_approver_for_the_day(b: Bench) -> None:
    """Eight wrong codes every 16 minutes never trip the 15-minute lock, but the thirtieth
    of the day does: alice's right code is refused (``limit``) until a day after the
    first of them; a subverted page holding live links cannot guess on for ever."""
    failures = 0
    plan_number = 0
    while failures < 30:
        plan_number += 1
        plan = b.submit(unit=f"app{plan_number}.service")
        links = b.links(plan.plan_id)
        for decision in ("approve", "reject"):
            for _ in range(4):
                if failures == 30:
                    break
                reply = b.decide(links[("alice", decision)].token, wrong(b))
                assert isinstance(reply, Refused)
                failures += 1
                expected = "limit" if failures == 30 else "code"
                assert reply.kind == expected, (failures, reply)
        b.clock.advance(16 * 60)
    fresh = b.submit(unit="fresh.service")
    target = b.links(fresh.plan_id)[("alice", "approve")]
    refused(b.decide(target.token, b.code()), "limit")
    assert approval_of(b, fresh.plan_id) is None
    b.clock.advance(24 * 3600 - 60 * 16 * plan_number + 60)
    later = b.submit(unit="later.service")
    assert isinstance(
        b.decide(b.links(later.plan_id)[("alice", "approve")].token, b.code()), Decided
    )


def test_announce_is_the_notify_relays_alone(b: Bench) -> None:
    """From the web relay's uid an announce is refused (``request``): a subverted page
    cannot mint links for itself."""
    b.submit()
    refused(b.ask(b.web_socket, Announce()), "request")


def test_view_and_decide_are_the_web_relays_alone(b: Bench) -> None:
    """From the notify relay's uid, which holds every fresh token, view and decide are
    refused (``request``) even with a right token and code: nothing approved."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    refused(b.ask(b.notify_socket, View(token=link.token)), "request")
    refused(b.ask(b.notify_socket, Decide(token=link.token, code=b.code())), "request")
    assert approval_of(b, a.plan_id) is None
    assert isinstance(b.decide(link.token, b.code()), Decided)  # the link was not spent


def test_anyone_else_is_refused_before_a_byte_is_read(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """A uid that is neither relay (root on the host by hand, say) is refused at once,
    whatever it sends."""
    from approver_svc.daemon import Server
    from tests.unit.approver.bench import OTHER, listening, serving

    with bench(tmp_path, store, approvals_dir) as running:
        path = tmp_path / "neither.sock"
        server = Server(
            listening(path),
            running.service,
            idle_timeout=0,
            notify_user=OTHER,
            web_user=OTHER,
            notify=False,
        )
        with serving(server):
            reply = refused(running.ask(path, Announce()), "request")
            assert "permission denied" in reply.reason


def test_a_malformed_or_oversized_request_is_refused(b: Bench) -> None:
    """Not JSON, an unknown op, a token of the wrong shape, a line over the limit: each
    one ``request`` refusal."""
    from shared_io.framing import exchange
    from shared_schema.approver_socket import MAX_APPROVER_MESSAGE_BYTES, parse_approver_reply

    for line in (
        b"not json\n",
        b'{"v":1,"op":"approve_everything"}\n',
        b'{"v":1,"op":"decide","token":"short","code":"123456"}\n',
        b'{"v":1,"op":"view","token":"' + b"A" * (MAX_APPROVER_MESSAGE_BYTES + 1) + b'"}\n',
    ):
        reply = parse_approver_reply(exchange(b.web_socket, line, limit=65536, timeout=10))
        refused(reply, "request")
