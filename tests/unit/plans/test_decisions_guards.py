"""Root's decisions (plans/decisions.py) and the road to them (plans/road.py), pinned
where mutation testing found them loose: the words of a refusal (an empty journal, two
sha256s logged, a plan applied or being applied, a plan a rule approved), what a renewed
approval changes in the status, which rule approvals are refused, what reject says, the
calendar approve is handed, and the grant of `--now`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from plans import (
    Accepted,
    ApprovalRefused,
    PlanRecord,
    PlanRefused,
    PlanStore,
    StatusRecord,
    UsageError,
    approval_path,
    approve,
    reject,
    rejection_path,
    review,
)
from plans.records import Transition
from plans.road import Person, Request, Road, still_waits
from shared_schema import PlanState
from shared_schema.config import ApplyWindow
from shared_schema.executor_socket import WindowWait

from .helpers import NOW, POLICY, plan_of, submitted

S = PlanState
RULE = ("night-restarts", "ab" * 32)


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def logged(record: PlanRecord) -> Accepted:
    """What the journal holds when the executor stored ``record`` (and nothing rotated)."""
    return Accepted(frozenset({record.sha256}), NOW - timedelta(days=1))


def refusal_of_review(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, accepted: Accepted
) -> str:
    """What root's review (every check of approve but the operator's sha256) refuses with."""
    with pytest.raises(PlanRefused) as refused:
        review(store, approvals_dir, record.plan_id, accepted)
    return refused.value.message


# -- the journal witness, in words -----------------------------------------------------------


def test_an_empty_journal_is_said_to_be_empty(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The journal holds nothing at all (no entry, no beginning): approve refuses saying
    it is empty, and so rotated or vacuumed since the plan was submitted."""
    with pytest.raises(ApprovalRefused) as refused:
        review(store, approvals_dir, record.plan_id, Accepted(frozenset(), None))
    assert refused.value.message == (
        f"no plan.accepted entry of opsbot-executor.service for plan {record.plan_id} in the "
        f"journal: it is empty, after the plan was submitted ({record.submitted_at.isoformat()})"
        "; it was rotated or vacuumed"
    )


def test_a_journal_that_begins_as_the_plan_was_submitted_says_it_was_never_logged(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The journal begins at the very instant the plan was submitted, so it holds the
    moment the executor would have logged storing it: nothing was rotated away; the
    executor never logged it."""
    with pytest.raises(ApprovalRefused) as refused:
        review(store, approvals_dir, record.plan_id, Accepted(frozenset(), record.submitted_at))
    assert refused.value.message == (
        f"no plan.accepted entry of opsbot-executor.service for plan {record.plan_id} in the "
        "journal: the executor never logged storing it"
    )


def test_two_sha256s_logged_for_one_plan_are_both_named(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The executor's unit logged accepting two sha256s under one id: the refusal names
    both, shortened, in order, so the operator can compare them with the plan on disk."""
    other = "0" * 64
    with pytest.raises(ApprovalRefused) as refused:
        review(
            store,
            approvals_dir,
            record.plan_id,
            Accepted(frozenset({record.sha256, other}), NOW - timedelta(days=1)),
        )
    first, second = sorted([record.sha256, other])
    assert refused.value.message == (
        f"plan {record.plan_id} on disk has sha256 {record.sha256[:16]}..., but "
        f"opsbot-executor.service logged accepting {first[:16]}..., {second[:16]}...: the "
        "stored plan was rewritten after it was accepted; nothing was approved"
    )


# -- a plan that ran, in words ---------------------------------------------------------------


def test_a_plan_applying_with_no_recorded_start_is_said_to_be_applied_now(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The status says APPLYING but keeps no history (the executor's uid wrote it so):
    approve refuses, saying the plan is being applied, with no start time it cannot
    know."""
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPLYING))
    assert refusal_of_review(store, approvals_dir, record, logged(record)) == (
        f"plan {record.plan_id} is being applied now"
    )


@pytest.fixture
def tokyo_local_time() -> Iterator[None]:
    """This process's local zone is Tokyo's (UTC+9) for the test."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "JST-9"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_when_a_plan_was_applied_is_said_in_utc_whatever_the_local_zone(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, tokyo_local_time: None
) -> None:
    """On a host in Tokyo, approving a plan applied at 21:35 UTC is refused saying so in
    UTC, as its words claim (not 06:35 the next day, Tokyo's time, labelled UTC)."""
    applied = Transition(state=S.APPLIED, at=NOW, by="opsbot-executor")
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPLIED, history=[applied]))
    assert refusal_of_review(store, approvals_dir, record, logged(record)) == (
        f"plan {record.plan_id} was applied at 2026-11-29 21:35:00 UTC (APPLIED)"
    )


# -- approve ---------------------------------------------------------------------------------


def approve_as(
    store: PlanStore,
    record: PlanRecord,
    approvals_dir: Path,
    *,
    approver: str = "alice",
    rule: tuple[str, str] | None = None,
    renew: bool = True,
    override_window: bool = False,
    windows: list[ApplyWindow] | None = None,
) -> None:
    approve(
        store,
        approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256,
        accepted=logged(record),
        approver=approver,
        now=NOW,
        ttl_seconds=600,
        windows=windows or [],
        override_window=override_window,
        analyze=utc_calendar,
        renew=renew,
        rule=rule,
    )


def utc_calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze on a host in UTC for "*-*-* 02:00": daily at 02:00."""
    first = base.replace(hour=2, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


NIGHTLY = [ApplyWindow(start="*-*-* 02:00", duration="2h")]


def test_a_click_on_a_plan_a_rule_approved_is_refused_naming_no_one(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """A standing rule approved the plan (no person did): a click that reaches approve
    under the lock is refused saying it was approved already, and by no one in
    particular."""
    approve_as(store, record, approvals_dir, approver="", rule=RULE, renew=False)
    with pytest.raises(PlanRefused) as refused:
        approve_as(store, record, approvals_dir, approver="bob", renew=False)
    assert refused.value.message == (
        f"plan {record.plan_id} was approved already; nothing was changed"
    )


def test_the_road_refuses_a_click_on_a_plan_a_rule_approved_naming_no_one(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The road's own check, before any door commits: a plan a rule approved is
    "approved already", with no approver's name (there is none)."""
    approve_as(store, record, approvals_dir, approver="", rule=RULE, renew=False)
    reviewed = review(store, approvals_dir, record.plan_id, logged(record))
    click = Request(
        plan_id=record.plan_id,
        sha256=record.sha256,
        by=Person("bob", via="web"),
        ttl_seconds=600,
        now=NOW,
    )
    with pytest.raises(PlanRefused) as refused:
        still_waits(click, reviewed, POLICY)
    assert refused.value.message == (
        f"plan {record.plan_id} was approved already; nothing was changed"
    )


def test_renewing_with_now_a_plan_that_waits_for_its_window_clears_the_wait(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """Approved at 21:35, outside the nightly window: the status says it waits for
    02:00. Root renews it with --now: it no longer waits, and the status stops saying so
    (what `opsbot plans` and `opsbot show` print)."""
    approve_as(store, record, approvals_dir, windows=NIGHTLY)
    opens = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    waits = WindowWait(opens_at=opens, closes_at=opens + timedelta(hours=2))
    assert store.status(record.plan_id).waits_for_window == waits
    approve_as(store, record, approvals_dir, windows=NIGHTLY, override_window=True)
    status = store.status(record.plan_id)
    assert (status.state, status.waits_for_window) == (S.APPROVED, None)


@pytest.mark.parametrize(
    ("renew", "override_window", "approver"),
    [(True, False, ""), (False, True, ""), (False, False, "bob")],
    ids=["renewing", "with-now", "in-a-persons-name"],
)
def test_a_rule_approves_only_a_proposed_plan_in_its_windows_in_no_ones_name(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    renew: bool,
    override_window: bool,
    approver: str,
) -> None:
    """A rule's approval that would renew one, override the windows, or name a person
    is a usage error, and nothing is written."""
    with pytest.raises(UsageError) as refused:
        approve_as(
            store,
            record,
            approvals_dir,
            approver=approver,
            rule=RULE,
            renew=renew,
            override_window=override_window,
        )
    assert refused.value.message == (
        "a rule approves only a PROPOSED plan, in its windows, in no one's name"
    )
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is S.PROPOSED


def test_a_persons_approval_names_no_rule_in_the_status(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """alice approves: the status names her, and no rule nor a rule's sha256."""
    approve_as(store, record, approvals_dir, renew=False)
    status = store.status(record.plan_id)
    assert (status.approved_by, status.approved_by_rule, status.rule_sha256) == ("alice", "", "")


def test_root_renewing_a_persons_approval_makes_the_status_name_root(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """alice approved from her phone; root renews the approval at the terminal: the new
    approval file names root, and so does the status `opsbot show` prints (it names whose
    approval the apply will use)."""
    approve_as(store, record, approvals_dir, renew=False)
    approve_as(store, record, approvals_dir, approver="root")
    assert store.status(record.plan_id).approved_by == "root"
    on_disk = json.loads(approval_path(approvals_dir, record.plan_id).read_text())
    assert on_disk["approver"] == "root"


#: A host in Tokyo whose window opens at 02:00 every day: 17:00 UTC.
TOKYO_OPENS = datetime(2026, 11, 30, 17, 0, tzinfo=UTC)
TOKYO_CLOSES = TOKYO_OPENS + timedelta(hours=2)


def tokyo_calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze on a host in Asia/Tokyo for "*-*-* 02:00": 02:00 JST is 17:00 UTC."""
    first = base.replace(hour=17, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


def test_approve_reads_the_window_and_the_expiry_from_the_calendar_it_is_handed(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host in Tokyo (its calendar handed to approve; this process's zone is UTC),
    approved at 21:35 UTC, outside the 02:00 JST window: the approval holds until that
    window's end, 19:00 UTC, and the plan waits for it from 17:00 UTC."""
    monkeypatch.setenv("TZ", "UTC")
    done = approve(
        store,
        approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256,
        accepted=logged(record),
        approver="alice",
        now=NOW,
        ttl_seconds=600,
        windows=NIGHTLY,
        analyze=tokyo_calendar,
    )
    assert done.approval.expires_at == TOKYO_CLOSES
    assert (done.window.open, done.window.opens_at) == (False, TOKYO_OPENS)
    waits = store.status(record.plan_id).waits_for_window
    assert waits == WindowWait(opens_at=TOKYO_OPENS, closes_at=TOKYO_CLOSES)


# -- reject ----------------------------------------------------------------------------------


def test_a_rejection_without_a_reason_says_the_operator_rejected_it(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """`opsbot reject ID` with no reason: the plan is REJECTED "rejected by operator",
    and root's rejection file says the same."""
    status = reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason=None)
    assert (status.state, status.reason) == (S.REJECTED, "rejected by operator")
    rejection = json.loads(rejection_path(approvals_dir, record.plan_id).read_bytes())
    assert rejection["reason"] == "rejected by operator"


def test_rejecting_a_final_plan_with_no_approval_claims_no_removal(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """A plan applied already, its approval long gone: reject is refused, and its hint
    says nothing about an approval file removed (there was none)."""
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPLIED))
    with pytest.raises(PlanRefused) as refused:
        reject(store, approvals_dir, record.plan_id, by="alice", now=NOW, reason=None)
    assert refused.value.message == f"plan {record.plan_id} is APPLIED; it cannot become REJECTED"
    assert refused.value.hint is None


# -- the grant of --now ------------------------------------------------------------------------


def test_the_grant_of_now_names_its_plan(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, tmp_path: Path
) -> None:
    """Root's `approve --now` outside the window under polkit writes the plan's grant,
    whose first line says which plan's `opsbot approve --now` wrote it (what an operator
    reading /etc/polkit-1/rules.d finds)."""
    road = Road(
        store=store,
        approvals_dir=approvals_dir,
        policy=POLICY.model_copy(update={"apply_window": NIGHTLY}),
        start_apply=lambda busy: ("it starts now", True),
        window_apply=lambda window, now: ("in its window", True),
        witness=lambda plan_id: logged(record),
        apply_busy=lambda: False,
        analyze=utc_calendar,
        privilege=lambda: "polkit",
        grants_dir=tmp_path,
    )
    root = Person("root", via="terminal")
    road.approve(
        Request(
            plan_id=record.plan_id,
            sha256=record.sha256,
            by=root,
            ttl_seconds=600,
            now=NOW,
            renew=True,
            override_window=True,
        )
    )
    grant = (tmp_path / f"59-opsbot-now-{record.plan_id}.rules").read_text()
    assert grant.splitlines()[0] == (
        f"// Written by `opsbot approve {record.plan_id} --now`: this plan's steps outside the"
    )
