"""The approver's road from a click to root's approval at its edges: which plans get
links (to the second of their expiry, never one root rejected, never past the bound of
live links), a click the plan refuses or a disk that fails at each point of the road
(the link spent or not, the failure said as the plan's or the approver's), a reject
link for a plan that already ran, the words of the reply, who approved a plan as a
followed link shows it, and what the state file keeps of a link."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import plans
from plans import PlanStore, approval_path
from plans.states import transition
from shared_schema import PlanState
from shared_schema.approver_socket import (
    ApplyRules,
    Decided,
    Follow,
    Followed,
    PolicySwitch,
    Refused,
    RulesApplied,
)
from shared_schema.executor_socket import Verification
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import NOW


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers notice their stop within 50 ms, not the daemon's half second."""
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def refused(reply: object, kind: str) -> Refused:
    assert isinstance(reply, Refused), reply
    assert reply.kind == kind, reply
    return reply


def follow(b: Bench, token: str) -> Followed | Refused:
    reply = b.ask(b.web_socket, Follow(token=token))
    assert isinstance(reply, Followed | Refused), reply
    return reply


def disk_full_when_writing(monkeypatch: pytest.MonkeyPatch, marker: bytes) -> None:
    """From now on, the disk is full for any file whose new bytes contain ``marker``."""
    real_write = os.write

    def write(fd: int, data: memoryview | bytes) -> int:
        if marker in bytes(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr("shared_io.files.os.write", write)


def ran(b: Bench, plan_id: str, end: PlanState) -> None:
    """The approved plan ran, and opsbot-verify judged it ``end``."""
    status = transition(b.store.status(plan_id), PlanState.APPLYING, by="apply", at=b.clock())
    status = transition(status, PlanState.APPLIED, by="opsbot-apply", at=b.clock())
    verification = Verification(
        result="verified" if end is PlanState.VERIFIED else "unresolved",
        evidence=["nginx.service active"],
        at=b.clock(),
        by="opsbot-verify",
    )
    status = transition(
        status, end, by="opsbot-verify", at=b.clock(), reason="judged", verification=verification
    )
    b.store.save_status(status)


# -- which plans get links ------------------------------------------------------------


def test_a_plan_is_announced_to_its_last_second_and_not_at_its_expiry(b: Bench) -> None:
    """Two plans stored half a second apart; a day later (plan_ttl_seconds), at the very
    instant the first expires: it gets no links, and the second, with half a second left
    and an id of the same second, still does."""
    first = b.submit()
    b.clock.advance(0.5)
    second = b.submit(unit="app.service")
    assert (first.submitted_at, first.plan_id[:15]) == (NOW, second.plan_id[:15])
    b.clock.at = first.submitted_at + timedelta(seconds=b.service.policy.plan_ttl_seconds)
    assert [n.plan.plan_id for n in b.announce().notices] == [second.plan_id]


def test_a_plan_root_rejected_is_not_announced_though_its_status_file_says_it_waits(
    b: Bench,
) -> None:
    """root rejected plan A before any announce; then its status file (the executor's
    uid writes it) says PROPOSED again: root's rejection file stands, and A gets no
    links."""
    a = b.submit()
    waiting = b.store.status(a.plan_id)
    plans.reject(b.store, b.approvals_dir, a.plan_id, by="root", now=b.clock(), reason="no")
    b.store.save_status(waiting)
    assert b.store.status(a.plan_id).state is PlanState.PROPOSED
    assert b.announce().notices == []


def test_announce_never_mints_past_the_live_link_bound(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound of 42 live links, two approvers (four links a plan) and twenty plans
    waiting: ten plans get their links (forty), the eleventh would pass the bound and
    waits, whatever later announces ask."""
    monkeypatch.setattr("approver_svc.service.MAX_LIVE_TOKENS", 42)
    with bench(tmp_path, store, approvals_dir) as b:
        for number in range(20):
            b.submit(unit=f"flood{number}.service")
        minted = sum(len(b.announce().notices) for _ in range(3))
        assert minted == 10
        assert b.service.state.load().live_tokens() == 40


def test_applying_the_rules_tells_root_whether_the_policy_is_paused(b: Bench) -> None:
    """After `opsbot policy pause`, opsbot-rules asking the rules hears that the policy
    is paused; after `resume`, that it is not."""
    b.as_root(PolicySwitch(paused=True, by="carol", reason="a bad night"))
    reply = b.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied) and reply.paused, reply
    b.as_root(PolicySwitch(paused=False, by="carol"))
    reply = b.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied) and not reply.paused, reply


# -- a click that fails on the road ---------------------------------------------------


def test_a_click_the_plan_refuses_leaves_its_link_unspent(b: Bench) -> None:
    """The executor's journal does not name plan A's sha256 yet: alice's click is refused
    as ``plan`` before the link is spent, so following it says it is still unused; once
    the journal names it, the link approves with her next code."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    logged = b.witness.logged[a.plan_id]
    b.witness.logged[a.plan_id] = {"f" * 64}
    refused(b.decide(link.token, b.code()), "plan")
    seen = refused(follow(b, link.token), "token")
    assert seen.reason == "this link decided nothing: it is still unused"
    b.witness.logged[a.plan_id] = logged
    b.clock.advance(30)
    assert isinstance(b.decide(link.token, b.code()), Decided)


def test_a_disk_full_as_the_link_is_spent_leaves_it_unspent(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan passed every check, but the disk is full just as the approver writes the
    link used: ``internal``, nothing approved, and the link is not spent on disk, so
    with room again alice's next code approves."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    disk_full_when_writing(monkeypatch, b'"ended_by":"used",')
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert "no space left on device" in reply.reason
    assert not approval_path(b.approvals_dir, a.plan_id).exists()
    monkeypatch.undo()
    b.clock.advance(30)
    assert isinstance(b.decide(link.token, b.code()), Decided)
    assert b.store.status(a.plan_id).state is PlanState.APPROVED


def test_a_status_that_cannot_be_written_after_the_link_was_spent_is_the_approvers_failure(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link is spent, then the disk is full as the plan's status is written APPROVED:
    the failure is the approver's (``internal``, saying why), not the plan's; no
    approval stands, and following the link says it decided nothing."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    disk_full_when_writing(monkeypatch, b'"state":"APPROVED"')
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert "no space left on device" in reply.reason
    monkeypatch.undo()
    assert not approval_path(b.approvals_dir, a.plan_id).exists()
    assert b.store.status(a.plan_id).state is PlanState.PROPOSED
    assert "decided nothing" in refused(follow(b, link.token), "token").reason


def test_a_status_file_unreadable_at_a_reject_is_the_approvers_failure(b: Bench) -> None:
    """alice clicks her reject link while plan A's status file is garbage: the failure is
    the approver's store (``internal``, naming the file), not the plan's, and the link
    is spent."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "reject")]
    (b.store.status_dir / f"{a.plan_id}.json").write_text("not a status record")
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert f"{a.plan_id}.json is not a valid status record" in reply.reason
    b.clock.advance(30)
    assert "used already" in refused(b.decide(link.token, b.code()), "token").reason


def test_a_reject_link_for_a_plan_that_already_ran_is_refused_and_decides_nothing(
    b: Bench,
) -> None:
    """bob approved plan A and it ran (VERIFIED); alice then clicks her reject link: it
    is refused as ``plan`` (a plan that ran cannot be rejected), the link is spent, and
    following it says it decided nothing."""
    a = b.submit()
    links = b.links(a.plan_id)
    assert isinstance(b.decide(links[("bob", "approve")].token, b.code("bob")), Decided)
    ran(b, a.plan_id, PlanState.VERIFIED)
    reject = links[("alice", "reject")]
    refused(b.decide(reject.token, b.code()), "plan")
    assert b.store.status(a.plan_id).state is PlanState.VERIFIED
    seen = refused(follow(b, reject.token), "token")
    assert "decided nothing (used; nothing was decided)" in seen.reason


# -- what the reply and a followed link say -------------------------------------------


def test_the_apply_words_in_the_reply_are_cut_to_one_line(b: Bench) -> None:
    """What starts the apply says 3000 characters: the approval is made and the reply
    carries the first 2000 of them."""
    words = "opsbot-apply.service starts now " + "x" * 3000
    b.service.start_apply = lambda busy: (words, True)
    a = b.submit()
    reply = b.decide(b.links(a.plan_id)[("alice", "approve")].token, b.code())
    assert isinstance(reply, Decided), reply
    assert reply.applies == words[:2000]


def test_following_an_approve_link_says_who_approved_the_plan_and_when(b: Bench) -> None:
    """alice approved plan A with her link; a minute later following it says A was
    approved by alice, at the moment of her click."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    clicked = b.clock()
    b.clock.advance(60)
    seen = follow(b, link.token)
    assert isinstance(seen, Followed), seen
    assert (seen.approved_by, seen.approved_at) == ("alice", clicked)


def test_a_status_link_says_when_its_plan_was_approved(b: Bench) -> None:
    """alice approved plan A, it ran and ended UNRESOLVED; the status link of the news
    says A was approved by alice, at the moment of her click."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    clicked = b.clock()
    b.clock.advance(60)
    ran(b, a.plan_id, PlanState.UNRESOLVED)
    (notice,) = b.announce().outcomes
    assert notice.watch is not None
    seen = follow(b, notice.watch)
    assert isinstance(seen, Followed), seen
    assert (seen.approved_by, seen.approved_at) == ("alice", clicked)


def test_the_state_keeps_a_link_and_its_confirmation_only_as_digests(b: Bench) -> None:
    """After an announce the state file holds no token: each link is known by its
    sha256, and its confirmation by sha256("<that sha256>:<CONFIRMATION>"), the form a
    link sent before a restart or an upgrade is checked against."""
    a = b.submit()
    links = b.links(a.plan_id)
    raw = b.state_bytes()
    records = json.loads(raw)["tokens"]
    for link in links.values():
        assert link.token.encode() not in raw
        key = hashlib.sha256(link.token.encode()).hexdigest()
        expected = hashlib.sha256(f"{key}:{link.confirm}".encode()).hexdigest()
        assert records[key]["confirm_sha256"] == expected
