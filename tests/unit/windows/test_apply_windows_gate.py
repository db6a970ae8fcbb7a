"""An approved plan and its apply window, through the one decision (gate.decide) and the
apply that acts on it, with an injected clock and the real systemd-analyze: outside its
window the plan waits in APPROVED (its status saying when the window opens), inside it
runs; the approval holds until the window's end and no longer; ``--now`` lets it run at
once and is recorded; a forged long approval is refused at apply.

Windows: weekdays 02:00 to 04:00 (UTC). 2026-12-01 is a Tuesday; the plan is proposed
and approved at 18:00, so its window is Wednesday 02:00 to 04:00."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from executor_svc.apply import Applier
from executor_svc.service import summary
from plans import (
    Accepted,
    Approved,
    NoApplyWindow,
    PlanRecord,
    PlanStore,
    approval_path,
    approve,
    decide,
)
from shared_schema import Approval, ExecutorPolicy, PlanState, canonical_json
from shared_schema.config import ApplyWindow
from shared_schema.executor_socket import WindowWait
from tests.unit.plans.helpers import (
    POLICY,
    Clock,
    Systemctl,
    dry_run_of,
    plan_of,
    submitted,
    unit_in,
)

APPROVED_AT = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
OPENS = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
CLOSES = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
IN_WINDOW = datetime(2026, 12, 2, 2, 30, tzinfo=UTC)
WINDOWS = [ApplyWindow(start="Mon..Fri 02:00 UTC", duration="2h")]
WINDOWED = POLICY.model_copy(update={"apply_window": WINDOWS})
TTL = POLICY.approval_ttl_seconds
WAITS = "approved; waits for its apply window, Wed 2026-12-02 02:00 UTC to 04:00"


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times in words in UTC, whatever zone runs the tests."""
    monkeypatch.setenv("TZ", "UTC")


@pytest.fixture
def clock() -> Clock:
    return Clock(APPROVED_AT)


@pytest.fixture
def systemctl() -> Systemctl:
    return Systemctl()


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of(), at=APPROVED_AT - timedelta(minutes=5))


def root_approves(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    *,
    now: datetime = APPROVED_AT,
    windows: list[ApplyWindow] = WINDOWS,
    override: bool = False,
) -> Approved:
    """What `opsbot approve ID --sha256 ...` (and opsbot-approver) do, at ``now``."""
    return approve(
        store,
        approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256[:12],
        accepted=Accepted(frozenset({record.sha256}), now - timedelta(days=1)),
        approver="alice",
        now=now,
        ttl_seconds=TTL,
        windows=windows,
        override_window=override,
    )


def applier(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    systemctl: Systemctl,
    policy: ExecutorPolicy = WINDOWED,
) -> Applier:
    return Applier(
        store,
        approvals_dir,
        policy,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )


def forge(approvals_dir: Path, record: PlanRecord, expires_at: datetime, **extra: bool) -> None:
    """A root-owned approval with dates and flags `opsbot approve` would not write."""
    approval = Approval(
        plan_id=record.plan_id,
        sha256=record.sha256,
        approver="alice",
        approved_at=APPROVED_AT,
        expires_at=expires_at,
        **extra,
    )
    path = approval_path(approvals_dir, record.plan_id)
    path.write_bytes(canonical_json(approval.model_dump(mode="json")) + b"\n")
    path.chmod(0o644)


# -- waiting, then running ------------------------------------------------------------------


def test_outside_its_window_an_approved_plan_waits_and_inside_it_runs(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, systemctl: Systemctl
) -> None:
    """Approved at 18:00: the apply at 18:01 runs nothing, the plan stays APPROVED and its
    status says when its window opens; at 02:30 the apply runs it (preconditions checked
    then), and the plan no longer waits for a window."""
    clock = Clock(APPROVED_AT + timedelta(minutes=1))
    done = root_approves(store, approvals_dir, record)
    assert done.approval.expires_at == CLOSES
    assert not done.window.open
    outcomes = applier(store, approvals_dir, clock, systemctl).apply_all()
    assert [(o.state, o.message, o.ran, o.would) for o in outcomes] == [
        (PlanState.APPROVED, WAITS + " (its preconditions are checked then)", False, "wait")
    ]
    assert systemctl.calls == []
    status = store.status(record.plan_id)
    assert status.state is PlanState.APPROVED
    assert status.waits_for_window == WindowWait(opens_at=OPENS, closes_at=CLOSES)
    assert not store.is_consumed(record.plan_id)

    clock.at = IN_WINDOW
    [outcome] = applier(store, approvals_dir, clock, systemctl).apply_all()
    assert (outcome.state, outcome.ran) == (PlanState.APPLIED, True)
    assert len(systemctl.calls) == 1
    assert store.status(record.plan_id).waits_for_window is None


def test_decide_says_wait_outside_and_run_inside(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The one decision, as apply, --dry-run and the pages use it."""
    root_approves(store, approvals_dir, record)

    def decision(now: datetime) -> str:
        status = store.status(record.plan_id)
        d = decide(store, record, status, approvals_dir=approvals_dir, policy=WINDOWED, now=now)
        return f"{type(d).__name__}: {getattr(d, 'reason', '')}"

    assert decision(APPROVED_AT + timedelta(hours=1)).startswith(f"AwaitWindow: {WAITS}")
    assert decision(IN_WINDOW) == "Run: "
    assert decision(CLOSES - timedelta(seconds=1)) == "Run: "


def test_the_dry_run_says_it_waits_for_its_window(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
) -> None:
    """`opsbot apply --dry-run` outside the window: would not run now, and when it will;
    nothing is written (the status still says what approve wrote)."""
    root_approves(store, approvals_dir, record)
    before = store.status(record.plan_id)
    clock.at = APPROVED_AT + timedelta(hours=2)
    [outcome] = dry_run_of(applier(store, approvals_dir, clock, systemctl))
    assert outcome.would == "wait"
    assert outcome.message.startswith(f"would not run now: {WAITS}")
    assert store.status(record.plan_id) == before
    assert systemctl.calls == []


def test_the_apply_records_the_wait_once_not_every_minute(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    clock: Clock,
    systemctl: Systemctl,
) -> None:
    """Approved before the windows were configured (its status says nothing of them): the
    first apply outside the window records the wait and logs it; the timer's next runs
    neither rewrite the status file nor log it again."""
    root_approves(store, approvals_dir, record, windows=[])
    assert store.status(record.plan_id).waits_for_window is None
    status_file = store.status_dir / f"{record.plan_id}.json"
    inodes = []
    with capture_logs() as events:
        for minute in range(3):
            clock.at = APPROVED_AT + timedelta(minutes=1 + minute)
            applier(store, approvals_dir, clock, systemctl).apply_all()
            inodes.append(status_file.stat().st_ino)  # each save is a new file, renamed
    waiting = [e for e in events if e["event"] == "plan.waiting"]
    assert [e["opens_at"] for e in waiting] == [OPENS.isoformat()]
    assert inodes[0] == inodes[1] == inodes[2]
    assert store.status(record.plan_id).waits_for_window == WindowWait(
        opens_at=OPENS, closes_at=CLOSES
    )


# -- how long the approval holds ------------------------------------------------------------


def test_the_approval_holds_until_the_windows_end_and_then_the_plan_expires(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, systemctl: Systemctl
) -> None:
    """Nothing applied it in the window (the timer was off): at 04:00 its approval is
    over and the plan EXPIRED, never run."""
    root_approves(store, approvals_dir, record)
    [outcome] = applier(store, approvals_dir, Clock(CLOSES), systemctl).apply_all()
    assert outcome.state is PlanState.EXPIRED
    assert outcome.message == f"approval expired at {CLOSES.isoformat()}"
    assert systemctl.calls == []


def test_a_forged_approval_longer_than_its_window_allows_is_refused(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, systemctl: Systemctl
) -> None:
    """Approved at 18:00 its approval may hold until 04:00 (10 h), more than the 1 h TTL.
    One that says 05:00 is refused in the window, and so is one that overrides the
    window and holds longer than the TTL; exactly 04:00 runs."""
    root_approves(store, approvals_dir, record)
    forge(approvals_dir, record, CLOSES + timedelta(hours=1))
    [outcome] = applier(store, approvals_dir, Clock(IN_WINDOW), systemctl).apply_all()
    assert outcome.message == (
        f"not run: approval holds for 39600 s (until {(CLOSES + timedelta(hours=1)).isoformat()}), "
        "more than the 36000 s its apply window allows (until that window's end, at most "
        "7 days); approve the plan again"
    )
    forge(approvals_dir, record, CLOSES, override_window=True)
    [outcome] = applier(store, approvals_dir, Clock(IN_WINDOW), systemctl).apply_all()
    assert outcome.message.startswith("not run: approval holds for 36000 s")
    assert "more than approval_ttl_seconds=3600" in outcome.message
    assert systemctl.calls == []
    forge(approvals_dir, record, CLOSES)
    [outcome] = applier(store, approvals_dir, Clock(IN_WINDOW), systemctl).apply_all()
    assert outcome.state is PlanState.APPLIED


def test_no_window_within_seven_days_approves_nothing(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """A window months away: approve refuses before it writes anything, saying to use
    --now or change the config; the plan stays PROPOSED."""
    far = [ApplyWindow(start="2027-06-01 02:00 UTC", duration="2h")]
    with pytest.raises(NoApplyWindow) as caught:
        root_approves(store, approvals_dir, record, windows=far)
    assert "`opsbot approve --now`" in str(caught.value.hint)
    assert caught.value.exit_status == 5
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is PlanState.PROPOSED


# -- --now ------------------------------------------------------------------------------------


def test_now_overrides_the_window_for_this_plan_and_is_recorded(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, systemctl: Systemctl
) -> None:
    """`opsbot approve --now` at 18:00: the approval says so, holds for the TTL, the
    journal's plan.approved says override_window; the apply runs it at once."""
    with capture_logs() as events:
        done = root_approves(store, approvals_dir, record, override=True)
    assert done.approval.override_window
    assert done.approval.expires_at == APPROVED_AT + timedelta(seconds=TTL)
    assert b'"override_window":true' in approval_path(approvals_dir, record.plan_id).read_bytes()
    [approved] = [e for e in events if e["event"] == "plan.approved"]
    assert approved["override_window"] is True
    assert store.status(record.plan_id).waits_for_window is None
    clock = Clock(APPROVED_AT + timedelta(minutes=1))
    [outcome] = applier(store, approvals_dir, clock, systemctl).apply_all()
    assert outcome.state is PlanState.APPLIED


def test_an_approval_without_override_keeps_the_bytes_it_always_had(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """The file of an ordinary approval has exactly the keys it had before windows, and
    the journal entry no override_window field."""
    with capture_logs() as events:
        root_approves(store, approvals_dir, record, windows=[])
    data = approval_path(approvals_dir, record.plan_id).read_bytes()
    assert data.startswith(b'{"approved_at":"2026-12-01T18:00:00Z","approver":"alice",')
    assert b"override_window" not in data
    [approved] = [e for e in events if e["event"] == "plan.approved"]
    assert approved.get("override_window") is None


def test_the_executor_tells_operators_when_the_window_opens(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """`opsbot show` and `opsbot plans` read it from the executor's summary: set while the
    plan is APPROVED, left out once it is not."""
    root_approves(store, approvals_dir, record)
    status = store.status(record.plan_id)
    said = summary(record, status, None).model_dump(mode="json")["waits_for_window"]
    assert said == {"opens_at": "2026-12-02T02:00:00Z", "closes_at": "2026-12-02T04:00:00Z"}
    applying = status.model_copy(update={"state": PlanState.APPLYING})
    assert summary(record, applying, None).waits_for_window is None
