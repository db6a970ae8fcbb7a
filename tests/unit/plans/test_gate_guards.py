"""The gate's words and what it hands on, pinned where mutation testing found them loose:
the dry run shows the steps of a plan it would not run, whatever the reason; several
refusals are each said, in order; a step is named by its number; and the windows are
judged with the calendar of the host the gate is handed, for the approval's lifetime and
for whether a window is open."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from executor_svc.apply import Applier
from plans import (
    Accepted,
    AwaitWindow,
    Decision,
    Expire,
    PlanRecord,
    PlanStore,
    Run,
    StatusRecord,
    approval_path,
    approve,
    decide,
    dry_run,
    write_rejection,
)
from shared_io.errors import UnitStateError
from shared_io.unit_show import UnitState
from shared_schema import ExecutorPolicy, PlanState
from shared_schema.config import ApplyWindow

from .helpers import (
    INVOCATION,
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    plan_of,
    restart_argv,
    step,
    submitted,
    unit_in,
)

S = PlanState
NGINX = [restart_argv("nginx.service")]


def applier(store: PlanStore, approvals_dir: Path, clock: Clock, **policy: object) -> Applier:
    return Applier(
        store,
        approvals_dir,
        POLICY.model_copy(update=policy),
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=Systemctl(),
    )


# -- the dry run shows what it would not run ------------------------------------------------

#: (store, approvals dir, clock, the plan of nginx's restart submitted at NOW) -> the
#: policy to judge with, once the case has put the plan where it says.
Setup = Callable[[PlanStore, Path, Clock, PlanRecord], ExecutorPolicy]


def _proposed(store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord) -> ExecutorPolicy:
    return POLICY


def _rejected(store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord) -> ExecutorPolicy:
    # Root rejected it; the executor's uid flipped the status back to APPROVED.
    approved(store, approvals_dir, r)
    write_rejection(approvals_dir, r, "alice", NOW, "wrong unit")
    return POLICY


def _approval_expired(
    store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord
) -> ExecutorPolicy:
    approved(store, approvals_dir, r, ttl=600)
    clock.advance(601)
    return POLICY


def _approval_gone(
    store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord
) -> ExecutorPolicy:
    approved(store, approvals_dir, r)
    approval_path(approvals_dir, r.plan_id).unlink()
    return POLICY


def _policy_narrowed(
    store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord
) -> ExecutorPolicy:
    approved(store, approvals_dir, r)
    return POLICY.model_copy(update={"allow": {"restart_unit": ["app.service"]}})


def _budget_spent(
    store: PlanStore, approvals_dir: Path, clock: Clock, r: PlanRecord
) -> ExecutorPolicy:
    earlier = submitted(store, plan_of(step("restart_unit", "nginx.service", reason="first")))
    approved(store, approvals_dir, earlier)
    # Applied alone: the restart of the case's plan waits, unapproved, meanwhile.
    applier(store, approvals_dir, clock, restart_budget=1).apply_all()
    assert store.status(earlier.plan_id).state is S.APPLIED
    approved(store, approvals_dir, r)
    return POLICY.model_copy(update={"restart_budget": 1})


@pytest.mark.parametrize(
    ("setup", "would"),
    [
        (_proposed, "wait"),
        (_rejected, "refuse"),
        (_approval_expired, "expire"),
        (_approval_gone, "refuse"),
        (_policy_narrowed, "stale"),
        (_budget_spent, "stale"),
    ],
    ids=["not-approved", "rejected", "approval-expired", "no-approval", "policy", "budget"],
)
def test_the_dry_run_shows_the_steps_of_a_plan_it_would_not_run(
    store: PlanStore, approvals_dir: Path, clock: Clock, setup: Setup, would: str
) -> None:
    """Waiting for approval, rejected by root, its approval expired or gone, refused by
    today's policy or the restart budget: `opsbot apply --dry-run` says why it would not
    run, and still shows the command each step would run and what it does, so that the
    operator sees what was held back."""
    record = submitted(store, plan_of(step("restart_unit", "nginx.service")))
    policy = setup(store, approvals_dir, clock, record)
    [outcome] = [
        o
        for o in dry_run(store, approvals_dir, policy, now=clock(), read_state=unit_in("failed"))
        if o.plan_id == record.plan_id
    ]
    assert outcome.would == would
    assert outcome.argv == NGINX
    assert [(p.argv, p.does[:22]) for p in outcome.preview] == [
        (NGINX[0], "restart nginx.service:")
    ]


# -- several refusals, each said ------------------------------------------------------------


def test_every_step_todays_policy_refuses_is_named_in_turn(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan of two restarts, approved; the allowlist then narrowed to worker@1.service:
    the apply makes it STALE naming both steps, one after the other."""
    record = submitted(
        store,
        plan_of(step("restart_unit", "nginx.service"), step("restart_unit", "app.service")),
    )
    approved(store, approvals_dir, record)
    applier(store, approvals_dir, clock, allow={"restart_unit": ["worker@1.service"]}).apply_all()
    status = store.status(record.plan_id)
    assert (status.state, status.reason) == (
        S.STALE,
        "today's policy refuses it: "
        "steps.0.args.unit: restart_unit may not touch nginx.service; allowed: worker@1.service; "
        "steps.1.args.unit: restart_unit may not touch app.service; allowed: worker@1.service",
    )


def test_a_restart_budget_spent_on_two_units_names_both(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """With a budget of one restart, two plans restarting nginx and app, approved
    together: the apply runs the first, and the second ends STALE naming each unit's
    spent budget, one after the other."""
    steps = (step("restart_unit", "nginx.service"), step("restart_unit", "app.service"))
    first = submitted(store, plan_of(*steps))
    second = submitted(store, plan_of(*steps, goal="again"), at=NOW + timedelta(seconds=1))
    for record in (first, second):
        approved(store, approvals_dir, record)
    applier(store, approvals_dir, clock, restart_budget=1).apply_all()
    assert store.status(first.plan_id).state is S.APPLIED
    status = store.status(second.plan_id)
    assert status.state is S.STALE
    budget = "restart budget spent: opsbot's plans started or restarted {} 1 times in the last "
    assert status.reason == "; ".join(
        budget.format(unit) + f"30 min (plans {first.plan_id}; limit 1): restarts are not fixing it"
        for unit in ("nginx.service", "app.service")
    )


# -- the step by its number ------------------------------------------------------------------


def test_a_step_whose_unit_state_cannot_be_read_is_named_by_its_number(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """The second step expects app.service failed, and `systemctl show app.service`
    fails: the plan ends STALE saying "step 2", the step the operator sees second."""

    def read_state(unit: str) -> UnitState:
        if unit == "app.service":
            raise UnitStateError("systemctl show app.service exited 1: Access denied")
        return UnitState(unit, "loaded", "failed", "failed", INVOCATION)

    record = submitted(
        store,
        plan_of(
            step("restart_unit", "nginx.service"),
            step("restart_unit", "app.service", expect={"active_state": ["failed"]}),
        ),
    )
    approved(store, approvals_dir, record)
    systemctl = Systemctl()
    Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=read_state,
        run_step=systemctl,
    ).apply_all()
    status = store.status(record.plan_id)
    assert (status.state, status.reason) == (
        S.STALE,
        "step 2: systemctl show app.service exited 1: Access denied",
    )
    assert systemctl.calls == []


# -- the host's own calendar -----------------------------------------------------------------

#: A host in Tokyo whose window opens at 02:00 every day: 17:00 UTC.
TOKYO_WINDOWS = [ApplyWindow(start="*-*-* 02:00", duration="2h")]
TOKYO_OPENS = datetime(2026, 11, 30, 17, 0, tzinfo=UTC)
TOKYO_CLOSES = TOKYO_OPENS + timedelta(hours=2)


def tokyo_calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze on a host in Asia/Tokyo for "*-*-* 02:00": 02:00 JST is 17:00 UTC."""
    first = base.replace(hour=17, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


@pytest.fixture
def tokyo_approved(
    store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> PlanRecord:
    """A plan approved at NOW (21:35 UTC, 06:35 in Tokyo) on the Tokyo host, outside its
    window: the approval holds until the window's end. This process's own zone is UTC, so
    a calendar asked of this machine's systemd would say 02:00 UTC."""
    monkeypatch.setenv("TZ", "UTC")
    record = submitted(store, plan_of())
    done = approve(
        store,
        approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256,
        accepted=Accepted(frozenset({record.sha256}), NOW - timedelta(days=1)),
        approver="alice",
        now=NOW,
        ttl_seconds=POLICY.approval_ttl_seconds,
        windows=TOKYO_WINDOWS,
        analyze=tokyo_calendar,
    )
    assert done.approval.expires_at == TOKYO_CLOSES
    return record


def judged(store: PlanStore, approvals_dir: Path, record: PlanRecord, now: datetime) -> Decision:
    status: StatusRecord = store.status(record.plan_id, record)
    return decide(
        store,
        record,
        status,
        approvals_dir=approvals_dir,
        policy=POLICY.model_copy(update={"apply_window": TOKYO_WINDOWS}),
        now=now,
        analyze=tokyo_calendar,
    )


def test_an_approval_held_to_the_end_of_the_hosts_window_is_honoured(
    store: PlanStore, approvals_dir: Path, tokyo_approved: PlanRecord
) -> None:
    """The approval holds until 19:00 UTC, the end of the Tokyo window: the gate bounds its
    lifetime with the same calendar, so five minutes later the plan waits for that window
    (it is not refused as an approval that holds too long)."""
    decision = judged(store, approvals_dir, tokyo_approved, NOW + timedelta(minutes=5))
    assert isinstance(decision, AwaitWindow)
    assert (decision.window.opens_at, decision.window.closes_at) == (TOKYO_OPENS, TOKYO_CLOSES)


def test_the_plan_runs_when_the_hosts_window_is_open(
    store: PlanStore, approvals_dir: Path, tokyo_approved: PlanRecord
) -> None:
    """At 17:30 UTC (02:30 in Tokyo) the host's window is open: the gate says run, though
    no window of a UTC calendar would be."""
    decision = judged(store, approvals_dir, tokyo_approved, TOKYO_OPENS + timedelta(minutes=30))
    assert isinstance(decision, Run)
    assert decision.approval.approval.expires_at == TOKYO_CLOSES


def test_a_plan_expires_at_the_instant_every_guard_calls_its_expiry(
    store: PlanStore, approvals_dir: Path
) -> None:
    """plan_ttl_seconds after its submission an approved plan no longer runs: the gate
    expires it at that very instant, as the road, the approver and the rules refuse to
    approve it then; a microsecond before, it runs."""
    record = submitted(store, plan_of())
    expiry = record.submitted_at + timedelta(seconds=POLICY.plan_ttl_seconds)
    approved(store, approvals_dir, record, at=expiry - timedelta(minutes=1))

    def at(now: datetime) -> object:
        return decide(
            store,
            record,
            store.status(record.plan_id),
            approvals_dir=approvals_dir,
            policy=POLICY,
            now=now,
        )

    late = at(expiry)
    assert isinstance(late, Expire) and late.reason == "older than plan_ttl_seconds=86400"
    assert isinstance(at(expiry - timedelta(microseconds=1)), Run)
