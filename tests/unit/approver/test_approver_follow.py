"""``follow``: the page's status view asks root's approver where the plan a used link
decided is now. It only reads: the plan's goal, units and argv, who decided it with this
link and when, its state, and what opsbot-verify saw. A link that decided nothing (not
used yet, killed by its sibling, forged) is refused as ``token``, and only the page's
uid may ask."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plans import PlanStore
from shared_schema import PlanState
from shared_schema.approver_socket import Decided, Follow, Followed, Refused, Viewed
from shared_schema.executor_socket import Verification
from tests.unit.approver.bench import Bench, bench


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers notice their stop within 50 ms, not the daemon's half second."""
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def follow(b: Bench, token: str) -> Followed | Refused:
    reply = b.ask(b.web_socket, Follow(token=token))
    assert isinstance(reply, Followed | Refused), reply
    return reply


def test_an_approve_link_follows_its_plan_to_verified(b: Bench) -> None:
    """alice approves with her link: the answer names the goal, the units and the argv;
    following the same link then says APPROVED, by alice, when; once opsbot-verify has
    said VERIFIED, it says that, with what was seen. Following changes nothing."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    decided = b.decide(link.token, b.code())
    assert isinstance(decided, Decided) and decided.plan is not None
    brief = decided.plan
    assert (brief.plan_id, brief.sha256, brief.host) == (a.plan_id, a.sha256, "testhost")
    assert brief.units == ["nginx.service"] and brief.goal
    assert brief.argv == [["systemctl", "restart", "--no-ask-password", "--", "nginx.service"]]
    decided_at = b.clock()
    b.clock.advance(60)
    seen = follow(b, link.token)
    assert isinstance(seen, Followed), seen
    assert (seen.plan, seen.decision, seen.approver) == (brief, "approve", "alice")
    assert (seen.decided_at, seen.state) == (decided_at, PlanState.APPROVED)
    status = b.store.status(a.plan_id)
    b.store.save_status(
        status.model_copy(
            update={
                "state": PlanState.VERIFIED,
                "verification": Verification(
                    result="verified",
                    evidence=["nginx.service active", "health 200", "third line"],
                    at=b.clock(),
                    by="opsbot-verify",
                ),
            }
        )
    )
    before = b.state_bytes()
    seen = follow(b, link.token)
    assert isinstance(seen, Followed), seen
    assert seen.state is PlanState.VERIFIED
    assert seen.verification == ["nginx.service active", "health 200"]
    assert b.state_bytes() == before


def test_a_link_that_decided_nothing_is_refused(b: Bench) -> None:
    """Bob's unused link, alice's reject link (killed when her approve link was used) and
    a forged token: each ``token``; bob's link still opens afterwards."""
    a = b.submit()
    links = b.links(a.plan_id)
    assert isinstance(b.decide(links[("alice", "approve")].token, b.code()), Decided)
    for token in (links[("bob", "approve")].token, links[("alice", "reject")].token, "F" * 22):
        refused = follow(b, token)
        assert isinstance(refused, Refused) and refused.kind == "token", (token, refused)
    assert "still unused" in str(follow(b, links[("bob", "approve")].token))
    assert isinstance(b.view(links[("bob", "approve")].token), Viewed)


def test_follow_is_the_web_relays_alone(b: Bench) -> None:
    """From the notify relay's uid, which holds every fresh token, follow is refused
    (``request``)."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    reply = b.ask(b.notify_socket, Follow(token=link.token))
    assert isinstance(reply, Refused) and reply.kind == "request", reply


def test_a_link_is_followed_only_until_it_would_have_expired(b: Bench) -> None:
    """alice's used link shows its plan while the link would have held; after that, the
    approver has forgotten it, as the page says, even on a host where nothing else came
    to prune its state."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    assert isinstance(follow(b, link.token), Followed)
    b.clock.at = link.expires_at
    refused = follow(b, link.token)
    assert isinstance(refused, Refused) and refused.kind == "token", refused


def test_a_link_spent_on_an_approval_that_failed_does_not_say_it_approved(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """alice's code and confirmation are right, the link is spent (it works once), but
    the approval itself fails (systemd-analyze cannot read the apply window): following
    the link says it decided nothing, never "approved by alice"."""
    from plans import CalendarError
    from shared_schema.config import ApplyWindow
    from tests.unit.plans.helpers import POLICY

    def broken(expression: str, base: object, iterations: int) -> list[object]:
        raise CalendarError(f"systemd-analyze cannot read {expression!r}")

    windowed = POLICY.model_copy(
        update={"apply_window": [ApplyWindow(start="*-*-* 02:00", duration="2h")]}
    )
    with bench(tmp_path, store, approvals_dir, policy=windowed, analyze=broken) as b:
        a = b.submit()
        link = b.links(a.plan_id)[("alice", "approve")]
        refused = b.decide(link.token, b.code())
        assert isinstance(refused, Refused) and refused.kind == "plan", refused
        assert b.store.status(a.plan_id).state is PlanState.PROPOSED
        seen = follow(b, link.token)
        assert isinstance(seen, Refused) and "decided nothing" in seen.reason, seen
