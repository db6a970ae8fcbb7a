"""A compromised opsbot-web or opsbot-notify cannot approve anything: the approver, on a
real Unix socket, turns a click into root's approval only for the one plan, sha256,
approver and decision its single-use token was made for, with that approver's TOTP code,
once. Forged, replayed, expired and cross-plan tokens, a reject link used to approve,
wrong and reused codes, guessing past the limits, and each relay asking what only the
other may ask: all refused, and no approval file written."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from approver_svc import tokens
from plans import PlanStore, approval_path
from shared_schema import PlanState
from shared_schema.approver_socket import Announce, Decide, Decided, Follow, Refused, View
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


def test_ten_wrong_codes_from_one_address_shut_that_address_not_the_approver(b: Bench) -> None:
    """Ten wrong codes from one address within 15 minutes, spread over alice's links so
    that no link burns: that address is refused (``limit``) for everyone, even with a
    right code (bob's too); alice, from her own address, decides with a link no one
    guessed at; a link that saw wrong codes stays locked while her count is over; once
    the wrong codes are 15 minutes old the address may try again."""
    a, c = b.submit(), b.submit(unit="app.service")
    links_a, links_c = b.links(a.plan_id), b.links(c.plan_id)
    spread = [links_a[("alice", "approve")], links_a[("alice", "reject")]]
    spread += [links_c[("alice", "reject")]]
    attacker, alice = "203.0.113.66", "192.0.2.7"
    for index in range(10):
        kind = "code" if index < 9 else "limit"
        refused(b.decide(spread[index % 3].token, wrong(b), source=attacker), kind)
    target = links_c[("alice", "approve")]
    refused(b.decide(target.token, b.code(), source=attacker), "limit")
    refused(b.decide(links_a[("bob", "approve")].token, b.code("bob"), source=attacker), "limit")
    assert approval_of(b, c.plan_id) is None
    # alice's count is over: a link that saw wrong codes is locked even from her address.
    refused(b.decide(spread[0].token, b.code(), source=alice), "limit")
    assert isinstance(b.decide(target.token, b.code(ahead=1), source=alice), Decided)
    b.clock.advance(15 * 60)
    assert isinstance(
        b.decide(links_a[("bob", "approve")].token, b.code("bob"), source=attacker), Decided
    )


def test_one_shared_message_cannot_lock_its_approver_out_of_every_plan(b: Bench) -> None:
    """Anyone who saw one message holds alice's two links of plan A: from many addresses
    they burn both (ten wrong codes, alice's limit reached). Plan B's link, from alice's
    phone, still approves with her code; plan A is still decided as root."""
    a, other = b.submit(), b.submit(unit="app.service")
    message = b.links(a.plan_id)
    for number in range(10):
        link = message[("alice", "approve" if number < 5 else "reject")]
        kind = "limit" if number in (4, 9) else "code"
        refused(b.decide(link.token, wrong(b), source=f"198.51.100.{number}"), kind)
    refused(b.decide(message[("alice", "approve")].token, b.code()), "token")
    assert approval_of(b, a.plan_id) is None
    theirs = b.links(other.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(theirs.token, b.code(), source="192.0.2.7"), Decided)


def test_a_locked_approver_gives_a_guesser_one_try_per_unused_link(b: Bench) -> None:
    """Thirty wrong codes of alice's in a day, from addresses and links that change
    (eight every 16 minutes: no address and no 15-minute window trips): every link and
    address used is locked for the day; a link never used, from an address never used,
    gets one try, and after a wrong one it is locked too. Guessing stays bounded by the
    links the guesser holds, not by time."""
    failures = 0
    plan_number = 0
    used: list[str] = []
    while failures < 30:
        plan_number += 1
        plan = b.submit(unit=f"app{plan_number}.service")
        links = b.links(plan.plan_id)
        for decision in ("approve", "reject"):
            for _ in range(4):
                if failures == 30:
                    break
                token = links[("alice", decision)].token
                used.append(token)
                source = f"198.51.100.{failures}"
                reply = b.decide(token, wrong(b), source=source)
                assert isinstance(reply, Refused)
                failures += 1
                expected = "limit" if failures == 30 else "code"
                assert reply.kind == expected, (failures, reply)
        b.clock.advance(16 * 60)
    refused(b.decide(used[-2], b.code(), source="192.0.2.7"), "limit")
    guessed, clean = b.submit(unit="fresh.service"), b.submit(unit="clean.service")
    target = b.links(guessed.plan_id)[("alice", "approve")]
    refused(b.decide(target.token, wrong(b), source="203.0.113.9"), "limit")  # its one try
    refused(b.decide(target.token, b.code(), source="192.0.2.7"), "limit")
    assert approval_of(b, guessed.plan_id) is None
    untouched = b.links(clean.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(untouched.token, b.code(), source="192.0.2.7"), Decided)
    b.clock.advance(24 * 3600 - 60 * 16 * plan_number + 60)
    later = b.submit(unit="later.service")
    assert isinstance(
        b.decide(b.links(later.plan_id)[("alice", "approve")].token, b.code()), Decided
    )


# -- what the human typed is bound to the decision they meant -------------------------


def test_a_code_typed_to_reject_cannot_approve_with_the_approve_link_the_page_saw(
    b: Bench,
) -> None:
    """alice opened plan A's approve link on the page (so a subverted page holds its
    token), then chose to reject A: she types her code and the reject link's
    confirmation. The page sends that code with A's approve token: refused
    (``confirm``), the code spent, nothing approved; the journal says why. Her reject,
    with the next code, still goes through."""
    a = b.submit()
    links = b.links(a.plan_id)
    approve, reject = links[("alice", "approve")], links[("alice", "reject")]
    typed = b.code()
    with capture_logs() as logs:
        reply = refused(b.decide(approve.token, typed, confirm=reject.confirm), "confirm")
    assert "not the one beside this link" in reply.reason
    assert approval_of(b, a.plan_id) is None
    assert b.store.status(a.plan_id).state is PlanState.PROPOSED
    assert any(e["event"] == "decide.unconfirmed" for e in logs)
    refused(b.decide(reject.token, typed), "code")  # spent: the page cannot replay it
    assert isinstance(b.decide(reject.token, b.code(ahead=1)), Decided)
    assert b.store.status(a.plan_id).state is PlanState.REJECTED


def test_a_code_typed_for_one_plan_cannot_approve_another(b: Bench) -> None:
    """alice approves plan B; the page sends her code and B's confirmation with plan
    A's approve token (a link she opened earlier): refused, A not approved."""
    a, other = b.submit(), b.submit(unit="app.service")
    link_a = b.links(a.plan_id)[("alice", "approve")]
    link_b = b.links(other.plan_id)[("alice", "approve")]
    refused(b.decide(link_a.token, b.code(), confirm=link_b.confirm), "confirm")
    assert approval_of(b, a.plan_id) is None and approval_of(b, other.plan_id) is None


def test_guessing_a_confirmation_burns_the_link(b: Bench) -> None:
    """A page guessing the confirmation needs a fresh right code of alice's for each
    guess, and five guesses burn the link."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    guesses = [g for g in ("AAAA", "BBBB", "CCCC", "DDDD", "EEEE", "FFFF") if g != link.confirm]
    for number, guess in enumerate(guesses[:5]):
        kind = "limit" if number == 4 else "confirm"
        refused(b.decide(link.token, b.code(), confirm=guess), kind)
        b.clock.advance(30)
    refused(b.decide(link.token, b.code(), confirm=link.confirm), "token")
    assert approval_of(b, a.plan_id) is None


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
    refused(
        b.ask(b.notify_socket, Decide(token=link.token, code=b.code(), confirm=link.confirm)),
        "request",
    )
    assert approval_of(b, a.plan_id) is None
    assert isinstance(b.decide(link.token, b.code()), Decided)  # the link was not spent


def test_anyone_else_is_refused_before_a_byte_is_read(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """A uid that is neither relay (root on the host by hand, say) is refused whatever it
    sends: root may ask only which config the approver has in force, nothing else."""
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
            if os.getuid() == 0:
                assert "may not announce" in reply.reason
                token = "A" * 22
                decide = Decide(token=token, code="123456", confirm="ABCD")
                for request in (View(token=token), decide, Follow(token=token)):
                    reply = refused(running.ask(path, request), "request")
                    assert f"may not {request.op}" in reply.reason
            else:
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
