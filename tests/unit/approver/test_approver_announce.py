"""What opsbot-notify gets to send, and what the page gets to show: ``announce`` hands
out one approve and one reject link per configured approver for each plan that waits
(once per plan, only when the executor's journal vouches for its bytes), and ``view``
tells the page what a link is for without changing anything."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from approver_svc import tokens
from plans import PlanStore
from shared_schema import PlanState
from shared_schema.approver_socket import Announce, Refused, Viewed
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import NOW, approved, edit_record, plan_of, step, submitted


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def test_a_waiting_plan_is_announced_once_with_a_link_per_approver_and_decision(b: Bench) -> None:
    """One notice for the plan: what it runs (argv, precondition in words, live state),
    its full sha256, host and expiries, and four links (alice and bob, approve and
    reject), each a distinct 22-character token expiring with the approval TTL. The
    next announce has nothing new."""
    plan = plan_of(
        step(
            "restart_unit",
            "nginx.service",
            expect={"active_state": ["failed"]},
            reason="it died of a bad reload",
        )
    )
    record = b.submit(submitted(b.store, plan, NOW))
    [notice] = b.announce().notices
    view = notice.plan
    assert (view.plan_id, view.sha256, view.host, view.state) == (
        record.plan_id,
        record.sha256,
        "testhost",
        "PROPOSED",
    )
    [shown] = view.steps
    assert shown.argv == ["systemctl", "restart", "--no-ask-password", "--", "nginx.service"]
    assert shown.precondition == ["nginx.service is failed"]
    assert shown.live == "nginx.service is failed/failed (load: loaded)"
    assert shown.reason == "it died of a bad reload"
    assert view.plan_expires_at == NOW + timedelta(days=1)
    assert view.approval_expires_at == NOW + timedelta(hours=1)
    pairs = sorted((link.approver, link.decision) for link in notice.links)
    assert pairs == [
        ("alice", "approve"),
        ("alice", "reject"),
        ("bob", "approve"),
        ("bob", "reject"),
    ]
    assert len({link.token for link in notice.links}) == 4
    assert all(len(link.token) == 22 for link in notice.links)
    assert all(link.expires_at == NOW + timedelta(hours=1) for link in notice.links)
    assert b.announce().notices == []


def test_the_newest_plan_is_announced_first_behind_a_backlog(b: Bench) -> None:
    """Approvers configured on a host where 24 plans already wait, then one more is
    stored: the first announce (20 at most) has the new one; the next has the oldest."""
    from approver_svc.service import MAX_NOTICES

    records = []
    for n in range(MAX_NOTICES + 5):
        records.append(b.submit(unit=f"app{n}.service"))
        b.clock.advance(1)  # plan ids begin with the second they were stored in
    first = [n.plan.plan_id for n in b.announce().notices]
    assert len(first) == MAX_NOTICES and records[-1].plan_id in first
    second = [n.plan.plan_id for n in b.announce().notices]
    assert records[0].plan_id in second and not set(first) & set(second)


def test_the_state_file_holds_no_token_only_its_sha256(b: Bench) -> None:
    """Reading the approver's state gives no link: it holds each token's sha256, and
    the directory and file are root's alone."""
    b.submit()
    [notice] = b.announce().notices
    state = b.state_bytes().decode()
    for link in notice.links:
        assert link.token not in state
        assert tokens.digest(link.token) in state
    assert os.stat(b.state_dir / "state.json").st_mode & 0o777 == 0o600


def test_a_link_never_outlives_its_plan(b: Bench) -> None:
    """A plan ten minutes from its own expiry gets links that expire with it, not an
    hour later."""
    record = b.submit(
        submitted(b.store, plan_of(), NOW - timedelta(days=1) + timedelta(minutes=10))
    )
    links = b.links(record.plan_id)
    assert {link.expires_at for link in links.values()} == {NOW + timedelta(minutes=10)}


def test_only_plans_that_wait_and_that_the_executor_logged_are_announced(b: Bench) -> None:
    """Not announced: a plan the journal does not vouch for (until it does), one whose
    bytes were edited, an approved one, an expired one."""
    unlogged = submitted(b.store, plan_of(step("restart_unit", "app.service")), NOW)
    edited = b.submit(submitted(b.store, plan_of(step("stop_unit", "nginx.service")), NOW))
    edit_record(b.store, edited.plan_id, plan=edited.plan.replace("nginx", "apache"))
    done = b.submit(submitted(b.store, plan_of(step("start_unit", "nginx.service")), NOW))
    approved(b.store, b.approvals_dir, done)
    old = b.submit(
        submitted(b.store, plan_of(step("reload_unit", "nginx.service")), NOW - timedelta(days=2))
    )
    with capture_logs() as logs:
        assert b.announce().notices == []
    assert {e["plan_id"] for e in logs if e["event"] == "announce.unwitnessed"} == {
        unlogged.plan_id
    }
    assert old.plan_id not in {e.get("plan_id") for e in logs}
    b.submit(unlogged)
    assert [n.plan.plan_id for n in b.announce().notices] == [unlogged.plan_id]


def test_without_approvers_nothing_is_announced_and_that_is_logged(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """No [approvers.*]: no links at all (nobody could use them), and the journal says
    why the plan was not sent."""
    with bench(tmp_path, store, approvals_dir, approvers=()) as running:
        running.submit()
        with capture_logs() as logs:
            assert running.announce().notices == []
        assert [e["event"] for e in logs if e["event"].startswith("announce.")] == [
            "announce.no_approvers"
        ]


def test_a_view_shows_the_plan_and_changes_nothing(b: Bench) -> None:
    """A GET of the link (or a chat's preview of it): the plan, who is asked and for
    which decision; the state file is byte for byte the same and the link still works,
    however often it is viewed."""
    record = b.submit()
    link = b.links(record.plan_id)[("bob", "reject")]
    before = b.state_bytes()
    for _ in range(3):
        seen = b.view(link.token)
        assert isinstance(seen, Viewed), seen
        assert (seen.approver, seen.decision, seen.plan.sha256) == ("bob", "reject", record.sha256)
        assert seen.plan.steps[0].argv[-1] == "nginx.service"
    assert b.state_bytes() == before
    assert b.store.status(record.plan_id).state is PlanState.PROPOSED


def test_a_state_directory_others_can_read_refuses_everything(b: Bench) -> None:
    """If the state directory is not root's alone (mode 0755, say), the approver does
    nothing and says so (``internal``), rather than trusting or leaking what is there."""
    b.submit()
    os.chmod(b.state_dir, 0o755)
    reply = b.ask(b.notify_socket, Announce())
    assert isinstance(reply, Refused) and reply.kind == "internal", reply
    assert "mode 0700" in reply.reason
