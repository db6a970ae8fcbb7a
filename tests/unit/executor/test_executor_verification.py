"""After the steps, the executor's side: an applied plan waits for verification, a
report makes it VERIFIED or UNRESOLVED (and nothing else), and opsbot's own history
bounds what a new plan may do: the restart budget, and steps already tried."""

from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from executor_svc.apply import Applier
from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from plans import PlanStore
from plans.verification import sweep_unmarked
from shared_io.unit_show import UnitProperties
from shared_schema import (
    Accept,
    ExecutorPolicy,
    Pending,
    PendingVerification,
    PlanState,
    Recorded,
    Reject,
    ReportVerification,
    Revise,
    SubmitPlan,
)
from tests.unit.plans.helpers import (
    POLICY,
    Clock,
    Systemctl,
    approved,
    plan_of,
    step,
    submitted,
    unit_in,
)

S = PlanState
DIAGNOSE = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
OPERATOR = Peer(pid=4343, uid=1000, gid=1000, user="olivia", role=Role.OPERATOR)
ROOT = Peer(pid=1, uid=0, gid=0, user="root", role=Role.ROOT)


class Units:
    """What ``systemctl show`` says of the plan's units when a report comes: up since
    before the apply, unless a test says otherwise."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.state = "active"
        self.started = clock() - timedelta(seconds=1)

    def __call__(self, units: list[str]) -> list[UnitProperties]:
        return [
            UnitProperties(
                unit,
                {
                    "Id": unit,
                    "ActiveState": self.state,
                    "SubState": "running" if self.state == "active" else "failed",
                    "Type": "simple",
                    "Result": "success",
                    "ExecMainStartTimestamp": f"{self.started:%a %Y-%m-%d %H:%M:%S.%f} UTC",
                },
            )
            for unit in units
        ]


@pytest.fixture
def units(clock: Clock) -> Units:
    return Units(clock)


@pytest.fixture
def service(store: PlanStore, approvals_dir: Path, clock: Clock, units: Units) -> ExecutorService:
    return ExecutorService(store, POLICY, clock, approvals_dir, read_units=units)


def applied(
    store: PlanStore, approvals_dir: Path, clock: Clock, *steps: dict[str, str]
) -> tuple[str, str]:
    """A plan of ``steps`` submitted, approved and applied now: (plan id, sha256)."""
    record = submitted(store, plan_of(*steps), clock())
    approved(store, approvals_dir, record, clock())
    Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=Systemctl(),
    ).apply_all()
    assert store.status(record.plan_id).state is S.APPLIED
    return record.plan_id, record.sha256


def report(plan_id: str, sha: str, result: str = "verified") -> ReportVerification:
    return ReportVerification(
        plan_id=plan_id,
        sha256=sha,
        result=result,  # type: ignore[arg-type]
        evidence=["nginx.service is active/running 10.0 s after the last step"],
        seconds=10.4,
    )


def test_an_applied_plan_waits_for_verification_and_is_marked_for_the_path_unit(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """An applied plan is marked for opsbot-verify.path and offered to opsbot-diagnose for
    verification, with its sha256, its steps and the settle time."""
    plan_id, sha = applied(store, approvals_dir, clock)
    assert (store.verify / plan_id).exists()  # what opsbot-verify.path sees
    pending = service.handle(PendingVerification(), DIAGNOSE)
    assert isinstance(pending, Pending)
    assert [(p.plan_id, p.sha256) for p in pending.plans] == [(plan_id, sha)]
    assert [(s.tool, s.unit) for s in pending.plans[0].steps] == [("restart_unit", "nginx.service")]
    assert pending.settle_seconds == POLICY.settle_seconds


@pytest.mark.parametrize(
    ("scene", "refusal"),
    [
        ("at once", "a verification 0.0 s after the last step, before its 10 s window ended"),
        ("unit dead", "nginx.service is failed"),
        ("restarted", "nginx.service was started again 5.0 s after the last step"),
        ("other targets", "the report judged targets web; the plan's symptom is no target"),
    ],
)
def test_a_verified_report_that_cannot_be_true_is_refused_and_the_plan_still_waits(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    service: ExecutorService,
    units: Units,
    scene: str,
    refusal: str,
) -> None:
    """The diagnose user's uid says VERIFIED where it cannot be: at once after the apply,
    while the unit is dead, after systemd started it again, or about targets the plan
    does not carry. The executor reads the units itself and refuses, naming why; the
    plan stays APPLIED and a true report later still ends it."""
    plan_id, sha = applied(store, approvals_dir, clock)
    forged = report(plan_id, sha)
    if scene != "at once":
        clock.advance(11)
    if scene == "unit dead":
        units.state = "failed"
    if scene == "restarted":
        units.started = clock() - timedelta(seconds=6)
    if scene == "other targets":
        forged = forged.model_copy(update={"targets": ["web"]})
    answer = service.handle(forged, DIAGNOSE)
    assert isinstance(answer, Reject)
    assert answer.reason == f"VERIFIED refused for plan {plan_id}: {refusal}"
    assert store.status(plan_id).state is S.APPLIED
    assert (store.verify / plan_id).exists()
    units.state, units.started = "active", clock() - timedelta(seconds=60)
    clock.advance(11)
    assert service.handle(report(plan_id, sha), DIAGNOSE) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


@pytest.mark.parametrize(
    ("result", "state"), [("verified", S.VERIFIED), ("unresolved", S.UNRESOLVED)]
)
def test_a_report_ends_the_plan_verified_or_unresolved_with_its_evidence(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    service: ExecutorService,
    result: str,
    state: PlanState,
) -> None:
    """A report, verified or unresolved alike, ends the plan in that state with its evidence
    and who reported it, logged once, and no longer waiting; a second report cannot change
    it."""
    plan_id, sha = applied(store, approvals_dir, clock)
    clock.advance(11)
    with capture_logs() as logs:
        answer = service.handle(report(plan_id, sha, result), DIAGNOSE)
    assert answer == Recorded(plan_id=plan_id, state=state)
    status = store.status(plan_id)
    assert status.state is state
    assert status.verification is not None and status.verification.by == "opsbot-diagnose"
    assert status.verification.evidence[0].startswith("nginx.service is active")
    assert not (store.verify / plan_id).exists()
    assert [e["event"] for e in logs if e["event"].startswith("plan.")] == [f"plan.{result}"]
    pending = service.handle(PendingVerification(), DIAGNOSE)
    assert isinstance(pending, Pending) and pending.plans == []
    # Reported once: a second report (a replay, a forgery) cannot change it.
    again = service.handle(report(plan_id, sha, "verified"), DIAGNOSE)
    assert isinstance(again, Reject) and f"is {state}" in again.reason


def test_a_report_for_a_plan_not_applied_or_with_another_fingerprint_is_refused(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """A report on a plan still PROPOSED, or on an applied plan with another sha256, is
    refused and the plan's state does not change."""
    proposed = submitted(store, plan_of(step("restart_unit", "app.service")), clock())
    refused = service.handle(report(proposed.plan_id, proposed.sha256), DIAGNOSE)
    assert isinstance(refused, Reject) and "is PROPOSED" in refused.reason
    assert store.status(proposed.plan_id).state is S.PROPOSED
    plan_id, _ = applied(store, approvals_dir, clock)
    other = service.handle(report(plan_id, "f" * 64), DIAGNOSE)
    assert isinstance(other, Reject) and "another fingerprint" in other.reason
    assert store.status(plan_id).state is S.APPLIED


def test_only_the_diagnose_user_and_root_may_ask_what_waits_for_verification(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """The diagnose user and root are told which plans wait for verification; an operator
    may neither ask that nor report on one, and the plan stays APPLIED."""
    plan_id, sha = applied(store, approvals_dir, clock)
    for peer in (DIAGNOSE, ROOT):
        pending = service.handle(PendingVerification(), peer)
        assert isinstance(pending, Pending), (peer.user, pending)
        assert [p.plan_id for p in pending.plans] == [plan_id]
    for request in (PendingVerification(), report(plan_id, sha)):
        answer = service.handle(request, OPERATOR)
        assert isinstance(answer, Reject) and "may not" in answer.reason
    assert store.status(plan_id).state is S.APPLIED


def test_a_plan_applied_long_ago_is_not_offered_for_verification(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """A plan applied two hours ago is no longer offered for verification."""
    applied(store, approvals_dir, clock)
    clock.advance(2 * 3600)
    pending = service.handle(PendingVerification(), DIAGNOSE)
    assert isinstance(pending, Pending) and pending.plans == []


def _submit(service: ExecutorService, *steps: dict[str, str]) -> Accept | Revise | Reject:
    plan = plan_of(*steps).model_dump(mode="json", exclude_none=True)
    answer = service.handle(SubmitPlan(plan=plan, run_id="run-9"), DIAGNOSE)
    assert isinstance(answer, Accept | Revise | Reject)
    return answer


def test_the_restart_budget_refuses_a_fourth_restart_within_30_minutes(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """Three plans restarted app.service within 30 min: a fourth restart (or start) of it
    is refused naming the budget; another unit, or later, is fine."""
    for minute in range(3):
        applied(
            store, approvals_dir, clock, step("restart_unit", "app.service", reason=f"{minute}")
        )
        clock.advance(5 * 60)
    refused = _submit(service, step("start_unit", "app.service"))
    assert isinstance(refused, Revise)
    [error] = refused.errors
    assert error.path == "steps.0"
    assert error.message.startswith("restart budget spent: opsbot's plans started or restarted")
    assert "app.service 3 times in the last 30 min" in error.message
    assert isinstance(_submit(service, step("restart_unit", "nginx.service")), Accept)
    assert isinstance(_submit(service, step("reload_unit", "app.service")), Accept)
    clock.advance(20 * 60)  # the oldest restart is now more than 30 min old
    assert isinstance(_submit(service, step("restart_unit", "app.service")), Accept)


def test_the_budget_is_configurable(store: PlanStore, approvals_dir: Path, clock: Clock) -> None:
    """With the budget set to 1 restart in 60 min, a second restart of app.service is sent
    back; left unset, the budget is 3 restarts in 30 min."""
    strict = POLICY.model_copy(update={"restart_budget": 1, "restart_budget_minutes": 60})
    service = ExecutorService(store, strict, clock, approvals_dir)
    applied(store, approvals_dir, clock, step("restart_unit", "app.service"))
    assert isinstance(_submit(service, step("restart_unit", "app.service")), Revise)
    assert ExecutorPolicy().restart_budget == 3 and ExecutorPolicy().restart_budget_minutes == 30


def test_a_failed_plan_is_not_tried_before_but_spends_the_restart_budget(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """A restart of app.service that failed (FAILED): the same restart once more is
    accepted (a failed job may pass the next time), and the budget bounds the retries:
    with two more failed restarts the fourth is sent back as the budget spent."""
    for _ in range(3):
        record = submitted(store, plan_of(step("restart_unit", "app.service")), clock())
        approved(store, approvals_dir, record, clock())
        _apply(store, approvals_dir, clock, **{"app.service": 1})
        assert store.status(record.plan_id).state is S.FAILED
        clock.advance(60)
    again = _submit(service, step("restart_unit", "app.service", reason="once more"))
    assert isinstance(again, Revise)
    assert [e.message[:20] for e in again.errors] == ["restart budget spent"]


def test_the_steps_of_an_unresolved_plan_are_not_accepted_again(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """A plan that started app.service ended UNRESOLVED: the very same steps are sent back
    naming that plan; other steps (reset, then start) are accepted."""
    plan_id, sha = applied(store, approvals_dir, clock, step("start_unit", "app.service"))
    service.handle(report(plan_id, sha, "unresolved"), DIAGNOSE)
    again = _submit(service, step("start_unit", "app.service", reason="once more"))
    assert isinstance(again, Revise)
    assert again.errors[0].message.startswith(f"tried before: plan {plan_id} ran these very steps")
    other = _submit(
        service, step("reset_failed_unit", "app.service"), step("start_unit", "app.service")
    )
    assert isinstance(other, Accept)


def test_a_verified_plan_does_not_forbid_its_steps(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """A plan that started app.service ended VERIFIED: starting it again is accepted."""
    plan_id, sha = applied(store, approvals_dir, clock, step("start_unit", "app.service"))
    service.handle(report(plan_id, sha, "verified"), DIAGNOSE)
    assert isinstance(_submit(service, step("start_unit", "app.service")), Accept)


def _apply(store: PlanStore, approvals_dir: Path, clock: Clock, **exit_status: int) -> None:
    Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=Systemctl(exit_status=dict(exit_status)),
    ).apply_all()


def test_a_restart_that_exited_with_an_error_still_spends_the_budget(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A crash loop: `systemctl restart app.service` exits 1 ("Job for app.service
    failed"), but it did restart the unit. With a budget of 1 that FAILED plan spends it:
    neither a restart nor a start of app.service is accepted within the window."""
    strict = POLICY.model_copy(update={"restart_budget": 1})
    service = ExecutorService(store, strict, clock, approvals_dir)
    record = submitted(store, plan_of(step("restart_unit", "app.service")), clock())
    approved(store, approvals_dir, record, clock())
    _apply(store, approvals_dir, clock, **{"app.service": 1})
    assert store.status(record.plan_id).state is S.FAILED
    clock.advance(60)
    again = _submit(service, step("restart_unit", "app.service", reason="once more"))
    assert isinstance(again, Revise)
    assert again.errors[0].message.startswith("restart budget spent")
    start = _submit(service, step("start_unit", "app.service"))
    assert isinstance(start, Revise)
    assert start.errors[0].message.startswith("restart budget spent")
    assert "app.service 1 times in the last 30 min" in start.errors[0].message


def test_plans_approved_together_cannot_overspend_the_budget_at_apply(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Four restarts of app.service, each accepted while the budget (3) was unspent and
    approved together: the apply runs three, and the fourth ends STALE naming the budget."""
    records = []
    for n in range(4):
        record = submitted(
            store, plan_of(step("restart_unit", "app.service", reason=f"plan {n}")), clock()
        )
        approved(store, approvals_dir, record, clock())
        records.append(record)
    _apply(store, approvals_dir, clock)
    statuses = [store.status(r.plan_id) for r in records]
    assert sorted(s.state for s in statuses) == [S.APPLIED, S.APPLIED, S.APPLIED, S.STALE]
    [stale] = [s for s in statuses if s.state is S.STALE]
    assert stale.reason.startswith("restart budget spent")


def test_a_marker_no_verification_will_take_is_removed(
    store: PlanStore, approvals_dir: Path, clock: Clock, service: ExecutorService
) -> None:
    """opsbot-verify.path starts the service while verify/ holds a marker: one whose plan
    was applied before the horizon is removed when the plans are asked for (else the
    path unit would start the service again and again)."""
    plan_id, _ = applied(store, approvals_dir, clock)
    clock.advance(2 * 3600)
    pending = service.handle(PendingVerification(), DIAGNOSE)
    assert isinstance(pending, Pending) and pending.plans == []
    assert not (store.verify / plan_id).exists()


def test_a_plan_applied_without_its_marker_is_marked_at_the_next_run(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """The apply killed between APPLIED and the marker: the plan would never be verified.
    The next run's sweep marks it again (and only it: a plan already marked, or applied
    longer ago than the horizon, is left as it is)."""
    plan_id, _ = applied(store, approvals_dir, clock, step("restart_unit", "app.service"))
    marker = store.verify / plan_id
    assert marker.exists()
    marker.unlink()  # as if killed before it was written
    since = clock() - timedelta(days=1)
    assert sweep_unmarked(store, clock(), since) == [plan_id]
    assert marker.exists()
    assert sweep_unmarked(store, clock(), since) == []
    marker.unlink()
    clock.advance(2 * 3600)  # past VERIFY_HORIZON: no verification would take it
    assert sweep_unmarked(store, clock(), since) == []
