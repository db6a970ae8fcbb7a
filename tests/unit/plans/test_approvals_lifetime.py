"""An approval's lifetime, checked at apply with an injected clock: it may not be dated
after now (beyond a minute of clock skew), and it may not hold longer than today's
``approval_ttl_seconds``. With the clock 30 days behind, or an approval that expires in
2099, nothing runs and the plan says why."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from executor_svc.apply import Applier
from plans import CLOCK_SKEW, ApprovalRefused, PlanRecord, PlanStore, approval_path, check_approval
from shared_schema import Approval, PlanState, canonical_json

from .helpers import (
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    dry_run_of,
    plan_of,
    submitted,
    unit_in,
)

TTL = POLICY.approval_ttl_seconds


def write_approval_at(
    approvals_dir: Path, record: PlanRecord, approved_at: datetime, expires_at: datetime
) -> None:
    """A root-owned approval with whatever dates its writer chose (``opsbot approve``
    always writes now and now + ttl; root's own hand, or a forger with root, may not)."""
    approval = Approval(
        plan_id=record.plan_id,
        sha256=record.sha256,
        approver="alice",
        approved_at=approved_at,
        expires_at=expires_at,
    )
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(canonical_json(approval.model_dump(mode="json")) + b"\n")
    path.chmod(0o644)


def refusal(approvals_dir: Path, record: PlanRecord, store: PlanStore, now: datetime) -> str:
    with pytest.raises(ApprovalRefused) as caught:
        check_approval(approvals_dir, record, store, now, ttl_ceiling_seconds=TTL)
    return caught.value.message


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def test_with_the_clock_30_days_behind_an_approval_is_dated_in_the_future_and_refused(
    approvals_dir: Path, record: PlanRecord, store: PlanStore, clock: Clock
) -> None:
    """Root approved at NOW; then the clock is set 30 days back, so the approval seems to
    hold for 30 days and an hour. The apply refuses it: it is dated after now, saying
    both times and what to do."""
    approved_at = NOW
    write_approval_at(approvals_dir, record, approved_at, approved_at + timedelta(seconds=TTL))
    behind = NOW - timedelta(days=30)
    assert refusal(approvals_dir, record, store, behind) == (
        f"approval is dated {approved_at.isoformat()}, later than now ({behind.isoformat()}): "
        "the clock went back, or `opsbot approve` did not write it; approve the plan again"
    )


def test_a_clock_a_few_seconds_behind_is_within_the_allowed_skew(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """An NTP step of a few seconds back right after an approval does not refuse it: up to
    CLOCK_SKEW (a minute) ahead of now is accepted, a second more is not."""
    write_approval_at(approvals_dir, record, NOW, NOW + timedelta(seconds=TTL))
    checked = check_approval(
        approvals_dir, record, store, NOW - CLOCK_SKEW, ttl_ceiling_seconds=TTL
    )
    assert checked.approval.approved_at == NOW
    late = NOW - CLOCK_SKEW - timedelta(seconds=1)
    assert refusal(approvals_dir, record, store, late).startswith("approval is dated")


def test_an_approval_expiring_in_2099_is_refused_for_holding_longer_than_the_ttl(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """An approval written now that expires in 2099 is not "valid for 73 years": it holds
    longer than approval_ttl_seconds, and is refused, naming the ceiling."""
    far = datetime(2099, 1, 1, tzinfo=UTC)
    write_approval_at(approvals_dir, record, NOW, far)
    lifetime = (far - NOW).total_seconds()
    assert refusal(approvals_dir, record, store, NOW + timedelta(seconds=60)) == (
        f"approval holds for {lifetime:.0f} s (until {far.isoformat()}), more than "
        f"approval_ttl_seconds={TTL}; approve the plan again"
    )


def test_an_approval_of_exactly_the_ttl_passes_and_one_second_more_does_not(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """The ceiling is inclusive: ``opsbot approve`` writes exactly now + ttl."""
    write_approval_at(approvals_dir, record, NOW, NOW + timedelta(seconds=TTL))
    assert check_approval(approvals_dir, record, store, NOW, ttl_ceiling_seconds=TTL)
    write_approval_at(approvals_dir, record, NOW, NOW + timedelta(seconds=TTL + 1))
    assert refusal(approvals_dir, record, store, NOW).startswith(f"approval holds for {TTL + 1} s")


def test_lowering_approval_ttl_seconds_refuses_approvals_written_for_longer(
    approvals_dir: Path, record: PlanRecord, store: PlanStore
) -> None:
    """Today's ceiling counts: an approval of an hour, once the config says 600 s, is
    refused."""
    write_approval_at(approvals_dir, record, NOW, NOW + timedelta(seconds=3600))
    with pytest.raises(ApprovalRefused, match="more than approval_ttl_seconds=600"):
        check_approval(approvals_dir, record, store, NOW, ttl_ceiling_seconds=600)


@pytest.mark.parametrize(
    ("how", "reason"),
    [("clock-behind", "approval is dated"), ("expires-2099", "approval holds for")],
)
def test_the_apply_runs_nothing_with_such_an_approval_and_says_why(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
    how: str,
    reason: str,
) -> None:
    """Through the apply (the one decision, gate.decide): the plan is APPROVED, its
    approval has a lifetime the gate refuses; nothing runs, the approval is not consumed,
    the plan keeps its state with the refusal as its reason, and a dry run says the same."""
    approved(store, approvals_dir, record)
    if how == "clock-behind":
        clock.at = NOW - timedelta(days=30)
    else:
        write_approval_at(approvals_dir, record, NOW, datetime(2099, 1, 1, tzinfo=UTC))
    applier = Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )
    [dry] = dry_run_of(applier)
    assert dry.message.startswith(f"would not run: {reason}")
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.message.startswith(f"not run: {reason}")
    status = store.status(record.plan_id)
    assert status.state is PlanState.APPROVED and status.refusal.startswith(reason)
    assert not store.is_consumed(record.plan_id)
