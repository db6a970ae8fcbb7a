"""News the approvers get with ``announce`` that asks nothing of them: a plan whose
verification found the symptom still there (UNRESOLVED), and the end of an incident
(VERIFIED, or FAILED and a human must look). Each is told once, only while it is news,
with a status link that shows the plan and can decide nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approver_svc.news import OUTCOME_HORIZON, WATCH_TTL
from plans import PlanStore
from plans.states import transition
from shared_schema import PlanState
from shared_schema.approver_socket import (
    Decide,
    Decided,
    Follow,
    Followed,
    OutcomeNotice,
    Refused,
    View,
)
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


def ran(b: Bench, plan_id: str, end: PlanState, seen: list[str] | None = None) -> None:
    """The plan ran (from PROPOSED or APPROVED, as opsbot-apply and opsbot-verify move
    it) and ended ``end``, opsbot-verify having seen ``seen``."""
    status = b.store.status(plan_id)
    if status.state is PlanState.PROPOSED:
        status = transition(status, PlanState.APPROVED, by="root", at=b.clock(), approved_by="root")
    status = transition(status, PlanState.APPLYING, by="opsbot-apply", at=b.clock())
    if end in (PlanState.FAILED, PlanState.INTERRUPTED):
        status = transition(status, end, by="opsbot-apply", at=b.clock(), reason="exit 1")
        b.store.save_status(status)
        return
    status = transition(status, PlanState.APPLIED, by="opsbot-apply", at=b.clock())
    verification = Verification(
        result="verified" if end is PlanState.VERIFIED else "unresolved",
        evidence=seen or [],
        at=b.clock(),
        by="opsbot-verify",
    )
    status = transition(
        status,
        end,
        by="opsbot-verify",
        at=b.clock(),
        reason="the symptom is gone" if end is PlanState.VERIFIED else "still failing",
        verification=verification,
    )
    b.store.save_status(status)


def outcomes(b: Bench) -> list[OutcomeNotice]:
    return b.announce().outcomes


def test_an_unresolved_plan_is_told_once_with_what_verify_saw(b: Bench) -> None:
    """alice approves with her link; the restart ran, and opsbot-verify found the unit
    failing again: the next announce tells every approver, once, that the plan is
    UNRESOLVED, what was seen, who approved it, and that a follow-up may come."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    b.clock.advance(30)
    ran(b, a.plan_id, PlanState.UNRESOLVED, ["nginx.service failed again", "port 80 closed"])
    told = outcomes(b)
    assert [(n.kind, n.plan.plan_id, n.state) for n in told] == [
        ("unresolved", a.plan_id, PlanState.UNRESOLVED)
    ]
    notice = told[0]
    assert notice.verification == ["nginx.service failed again", "port 80 closed"]
    assert (notice.approved_by, notice.incident, notice.plans) == ("alice", a.plan_id, 1)
    assert notice.approvers == ["alice", "bob"] and notice.watch
    assert "follow-up" in notice.next and f"opsbot show {a.plan_id}" in notice.next
    assert outcomes(b) == []


def test_an_incident_ends_when_its_plan_is_verified(b: Bench) -> None:
    """root approved on the host; the plan VERIFIED: the approvers hear the incident
    ended, once, with nothing left to do."""
    a = b.submit()
    ran(b, a.plan_id, PlanState.VERIFIED, ["nginx.service active"])
    told = outcomes(b)
    assert [(n.kind, n.state, n.next) for n in told] == [("ended", PlanState.VERIFIED, "")]
    assert told[0].approved_by == "root"
    assert outcomes(b) == []


def test_a_failed_apply_ends_with_a_human_to_look(b: Bench) -> None:
    """The step failed: the incident ends, and the news says a human must look."""
    a = b.submit()
    ran(b, a.plan_id, PlanState.FAILED)
    (notice,) = outcomes(b)
    assert (notice.kind, notice.state, notice.reason) == ("ended", PlanState.FAILED, "exit 1")
    assert "a human must look" in notice.next


def test_old_news_is_not_told(b: Bench) -> None:
    """A plan that ended UNRESOLVED longer ago than the horizon (notify was down, or the
    approvers were just configured) is not told: no flood of old news."""
    a = b.submit()
    ran(b, a.plan_id, PlanState.UNRESOLVED)
    b.clock.advance(OUTCOME_HORIZON.total_seconds() + 1)
    assert outcomes(b) == []


def test_plans_that_did_not_run_make_no_news(b: Bench) -> None:
    """A plan still waiting, and one approved that has not run, are not outcomes."""
    waiting = b.submit()
    approved = b.submit(unit="app.service")
    b.links(waiting.plan_id)
    link = b.links(approved.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    assert outcomes(b) == []


def test_a_status_link_shows_its_plan_and_decides_nothing(b: Bench) -> None:
    """The status link the news carried shows the plan (approved by alice, UNRESOLVED,
    what verify saw) until it expires; the page's view and decide refuse it as a link
    they do not know, with bob's right code and any confirmation, and nothing is written."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.decide(link.token, b.code()), Decided)
    ran(b, a.plan_id, PlanState.UNRESOLVED, ["nginx.service failed again"])
    (notice,) = outcomes(b)
    assert notice.watch is not None
    seen = b.ask(b.web_socket, Follow(token=notice.watch))
    assert isinstance(seen, Followed), seen
    assert (seen.state, seen.decision, seen.approved_by) == (PlanState.UNRESOLVED, None, "alice")
    assert seen.verification == ["nginx.service failed again"]

    viewed = b.ask(b.web_socket, View(token=notice.watch))
    assert isinstance(viewed, Refused) and viewed.kind == "token", viewed
    before = b.state_bytes()
    decided = b.ask(
        b.web_socket,
        Decide(
            token=notice.watch,
            code=b.code("bob"),
            confirm="ABCD",
            reason="",
            source="198.51.100.7",
        ),
    )
    assert isinstance(decided, Refused) and decided.kind == "token", decided
    assert b.store.status(a.plan_id).state is PlanState.UNRESOLVED
    assert b.state_bytes() == before

    b.clock.advance(WATCH_TTL.total_seconds())
    gone = b.ask(b.web_socket, Follow(token=notice.watch))
    assert isinstance(gone, Refused) and gone.kind == "token", gone


def test_without_approvers_outcomes_are_marked_and_never_told_later(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """A host with no approver configured: the outcome is passed over (marked), and an
    approver configured later is not told old news."""
    with bench(tmp_path, store, approvals_dir, approvers=()) as lonely:
        a = lonely.submit()
        ran(lonely, a.plan_id, PlanState.VERIFIED)
        assert outcomes(lonely) == []
        assert f"{a.plan_id}:ended" in lonely.service.state.load().told


def test_an_unresolved_plan_names_the_plan_that_follows_it_or_the_cap(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """On a host that allows two plans an incident: the first plan ended UNRESOLVED and
    its follow-up was stored before the news went out: the news names the follow-up. The
    follow-up ends UNRESOLVED too: the incident has had its two plans, a human must look."""
    from shared_schema import Plan
    from tests.unit.plans.helpers import DIAGNOSE, POLICY, plan_of, step

    capped = POLICY.model_copy(update={"max_plans_per_incident": 2})
    with bench(tmp_path, store, approvals_dir, policy=capped) as b:
        first = b.submit()
        ran(b, first.plan_id, PlanState.UNRESOLVED)
        b.clock.advance(5)
        again = Plan.model_validate(
            {**plan_of(step("start_unit", "nginx.service")).model_dump(), "follows": first.plan_id}
        )
        follow_id, _, _ = b.store.add(again, DIAGNOSE, b.clock(), incident=first.plan_id)
        b.submit(b.store.load(follow_id))
        (told,) = outcomes(b)
        assert told.next == f"plan {follow_id} follows it; its link comes as any plan's"
        assert (told.incident, told.plans) == (first.plan_id, 2)
        ran(b, follow_id, PlanState.UNRESOLVED)
        (last,) = outcomes(b)
        assert (last.plan.plan_id, last.incident, last.plans) == (follow_id, first.plan_id, 2)
        assert last.next.startswith("the incident has had its 2 plans: a human must look")


def test_a_burst_of_outcomes_is_told_in_batches_newest_first(b: Bench) -> None:
    """Thirty plans ended within the hour: the first announce tells the twenty newest,
    the next the ten others, and none twice."""
    from approver_svc.news import MAX_OUTCOMES

    ids = []
    for n in range(30):
        record = b.submit(unit=f"app{n}.service")
        ran(b, record.plan_id, PlanState.VERIFIED)
        ids.append(record.plan_id)
        b.clock.advance(1)
    first, second = outcomes(b), outcomes(b)
    assert [n.plan.plan_id for n in first] == ids[::-1][:MAX_OUTCOMES]
    assert sorted(n.plan.plan_id for n in [*first, *second]) == sorted(ids)
    assert outcomes(b) == []


def test_status_links_are_bounded_and_shed_before_any_decision_link(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its byte limit the approver's state sheds status links first: alice's link
    to approve still works, and the file is written within the limit."""
    from approver_svc import state as state_module
    from approver_svc.news import watch

    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    state = b.service.state.load()
    for _ in range(state_module.MAX_WATCHES + 50):
        watch(state, a.plan_id, a.sha256, b.clock())
    assert len(state.watches) == state_module.MAX_WATCHES
    limit = len(state.model_dump_json()) // 2
    monkeypatch.setattr(state_module, "MAX_STATE_BYTES", limit)
    b.service.state.save(state)
    assert len(b.state_bytes()) <= limit
    kept = b.service.state.load()
    assert 0 < len(kept.watches) < state_module.MAX_WATCHES
    assert isinstance(b.decide(link.token, b.code()), Decided)
