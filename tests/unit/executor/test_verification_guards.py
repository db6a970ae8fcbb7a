"""Whether a verification is believable, and what opsbot's own history forbids, at the
edges: what ``systemctl show`` says of each kind of unit (a oneshot run to its end, a
socket, a service stopped cleanly, a unit of a plan that only resets another), the
instants where a window opens and closes (the settle time, the hour after the last step,
half a second of grace for the restart's own start, the restart budget's minutes), the
facts a report and a waiting plan carry to the operator, and the markers opsbot-verify.path
watches when a plan among them cannot be verified any more."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from executor_svc.apply import Applier
from plans import PlanStore, transition
from plans.records import StatusRecord
from plans.verification import (
    VERIFY_HORIZON,
    history_errors,
    mark_applied,
    pending,
    record_report,
    sweep_unmarked,
)
from shared_io.run import RunResult
from shared_schema import (
    ExecutorPolicy,
    Plan,
    PlanState,
    Recorded,
    Reject,
    ReportVerification,
    StepRecord,
)
from tests.unit.plans.helpers import (
    DIAGNOSE,
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    edit_record,
    plan_of,
    restart_argv,
    step,
    submitted,
    unit_in,
)

S = PlanState
#: The executor's policy, with a socket unit its plans may restart too.
HOST_POLICY = ExecutorPolicy.model_validate(
    {
        **POLICY.model_dump(),
        "allow": {**POLICY.allow, "restart_unit": [*POLICY.allow["restart_unit"], "app.socket"]},
    }
)
SETTLE = HOST_POLICY.settle_seconds
VERIFIER = "opsbot-diagnose"


def stamp(at: datetime) -> str:
    """A timestamp as ``systemctl show --timestamp=us+utc`` prints it."""
    return f"{at:%a %Y-%m-%d %H:%M:%S.%f} UTC"


@dataclass
class Systemd:
    """What ``systemctl show`` prints of each unit: only the properties asked for that
    systemd knows for that kind of unit (a socket has no main process and no Type=), a
    blank line between units. Scripted at the one runner shared_io.unit_show calls."""

    units: dict[str, dict[str, str]] = field(default_factory=dict)

    def service(
        self,
        unit: str,
        state: str,
        sub: str,
        began: datetime,
        *,
        kind: str = "simple",
        result: str = "success",
    ) -> None:
        self.units[unit] = {
            "Id": unit,
            "ActiveState": state,
            "SubState": sub,
            "Result": result,
            "Type": kind,
            "ExecMainStartTimestamp": stamp(began),
        }

    def socket(self, unit: str) -> None:
        self.units[unit] = {
            "Id": unit,
            "ActiveState": "active",
            "SubState": "listening",
            "Result": "success",
        }

    def __call__(self, argv: Sequence[str], **_: Any) -> RunResult:
        [wanted] = [a.removeprefix("--property=") for a in argv if a.startswith("--property=")]
        asked = wanted.split(",")
        blocks = [
            "\n".join(f"{key}={value}" for key, value in self.units[unit].items() if key in asked)
            for unit in argv[list(argv).index("--") + 1 :]
        ]
        return RunResult(tuple(argv), 0, "\n\n".join(blocks) + "\n", "", 0.01)


@pytest.fixture
def systemd(monkeypatch: pytest.MonkeyPatch) -> Systemd:
    host = Systemd()
    monkeypatch.setattr("shared_io.unit_show.run", host)
    return host


@dataclass
class SlowSystemctl:
    """Runs each step in ``seconds`` (a restart that waits for its unit to come up)."""

    clock: Clock
    seconds: float

    def __call__(self, argv: list[str], timeout: float) -> RunResult:
        self.clock.advance(self.seconds)
        return RunResult(tuple(argv), 0, "", "", self.seconds)


def apply(
    store: PlanStore,
    clock: Clock,
    approvals_dir: Path,
    run_step: Any = None,
    read_state: Any = None,
    policy: ExecutorPolicy = HOST_POLICY,
) -> None:
    Applier(
        store,
        approvals_dir,
        policy,
        actor="opsbot-executor",
        now=clock,
        read_state=read_state or unit_in("failed"),
        run_step=run_step or Systemctl(),
    ).apply_all()


def applied(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    plan: Plan | None = None,
    run_step: Any = None,
) -> tuple[str, str]:
    """``plan`` (a restart of nginx.service) submitted, approved and applied now: its id
    and sha256."""
    record = submitted(store, plan or plan_of(), clock())
    approved(store, approvals_dir, record, clock())
    apply(store, clock, approvals_dir, run_step)
    assert store.status(record.plan_id).state is S.APPLIED
    return record.plan_id, record.sha256


def report(plan_id: str, sha: str, result: str = "verified", **extra: Any) -> ReportVerification:
    return ReportVerification.model_validate(
        {
            "plan_id": plan_id,
            "sha256": sha,
            "result": result,
            "evidence": ["nginx.service is active/running 10.0 s after the last step"],
            "seconds": 10.4,
            **extra,
        }
    )


def verify(store: PlanStore, answer: ReportVerification, now: datetime) -> Recorded | Reject:
    """The report as the executor takes it: the units read with ``systemctl show``."""
    return record_report(store, answer, VERIFIER, now, settle_seconds=SETTLE)


def refused(answer: Recorded | Reject, plan_id: str) -> str:
    assert isinstance(answer, Reject), answer
    prefix = f"VERIFIED refused for plan {plan_id}: "
    assert answer.reason.startswith(prefix), answer.reason
    return answer.reason.removeprefix(prefix)


# -- what systemctl show says of each kind of unit ---------------------------------------


def test_a_service_up_since_before_the_last_step_is_believed(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """nginx.service is active/running, its main process begun by the restart: read with
    systemctl show, a VERIFIED report 11 s later is taken."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "active", "running", clock() - timedelta(seconds=1))
    clock.advance(11)
    assert verify(store, report(plan_id, sha), clock()) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


def test_a_service_stopped_cleanly_after_its_restart_is_not_up(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """A restart of nginx.service, which is inactive/dead (Result=success: it exited
    cleanly) when the report comes: it is not up, and the refusal says its state and
    sub-state as systemd printed them."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "inactive", "dead", clock() - timedelta(seconds=1))
    clock.advance(11)
    assert refused(verify(store, report(plan_id, sha), clock()), plan_id) == (
        "nginx.service is inactive/dead, not active"
    )


def test_a_oneshot_service_run_to_a_clean_end_counts_as_up(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """A Type=oneshot service without RemainAfterExit=, restarted, ran and exited 0: it is
    inactive/dead with Result=success, which is what its restart leaves it in."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service(
        "nginx.service", "inactive", "dead", clock() - timedelta(seconds=1), kind="oneshot"
    )
    clock.advance(11)
    assert verify(store, report(plan_id, sha), clock()) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


def test_a_restarted_socket_unit_without_a_main_process_is_believed(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """app.socket restarted and listening: systemd prints neither Type= nor a main
    process's start for a socket; the report is taken all the same."""
    plan = plan_of(step("restart_unit", "app.socket"))
    plan_id, sha = applied(store, approvals_dir, clock, plan)
    systemd.socket("app.socket")
    clock.advance(11)
    assert verify(store, report(plan_id, sha), clock()) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


def test_every_unit_the_plan_brings_up_is_checked_after_one_it_only_resets(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """Reset app.service, start nginx.service: app.service need only be not failed, and
    nginx.service, checked after it, is still dead: refused, naming nginx.service."""
    plan = plan_of(step("reset_failed_unit", "app.service"), step("start_unit", "nginx.service"))
    plan_id, sha = applied(store, approvals_dir, clock, plan)
    began = clock() - timedelta(hours=1)
    systemd.service("app.service", "inactive", "dead", began)
    systemd.service("nginx.service", "inactive", "dead", began)
    clock.advance(11)
    assert refused(verify(store, report(plan_id, sha), clock()), plan_id) == (
        "nginx.service is inactive/dead, not active"
    )


@pytest.mark.parametrize(
    ("after", "refusal"),
    [
        (-0.2, ""),
        (0.5, ""),
        (0.6, "nginx.service was started again 0.6 s after the last step"),
    ],
)
def test_a_main_process_begun_within_half_a_second_of_the_last_step_is_the_plans(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    systemd: Systemd,
    after: float,
    refusal: str,
) -> None:
    """The restart's own process begins around the end of the step: 0.2 s before it or
    up to 0.5 s after it, it is the plan's and the report is taken; begun 0.6 s after,
    systemd started it again (a crash loop) and the report is refused."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "active", "running", clock() + timedelta(seconds=after))
    clock.advance(11)
    answer = verify(store, report(plan_id, sha), clock())
    if refusal:
        assert refused(answer, plan_id) == refusal
    else:
        assert answer == Recorded(plan_id=plan_id, state=S.VERIFIED)


def test_a_report_that_judged_every_target_of_the_symptom_is_believed(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """The plan cures a symptom whose health targets web and api failed: a report that
    judged both (in any order) is taken; one that judged web only is refused."""
    plan = Plan.model_validate(
        {
            **plan_of().model_dump(exclude_none=True),
            "symptom": {"unit": "nginx.service", "health": ["web", "api"]},
        }
    )
    plan_id, sha = applied(store, approvals_dir, clock, plan)
    systemd.service("nginx.service", "active", "running", clock() - timedelta(seconds=1))
    clock.advance(11)
    partial = verify(store, report(plan_id, sha, targets=["web"]), clock())
    assert refused(partial, plan_id) == (
        "the report judged targets web; the plan's symptom is api, web"
    )
    whole = verify(store, report(plan_id, sha, targets=["web", "api"]), clock())
    assert whole == Recorded(plan_id=plan_id, state=S.VERIFIED)


# -- the instants where the windows open and close ------------------------------------


def test_a_report_at_the_very_end_of_the_settle_window_is_believed(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """settle_seconds (10 s) after the last step, the window has ended: the report is
    taken."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "active", "running", clock() - timedelta(seconds=1))
    clock.advance(SETTLE)
    assert verify(store, report(plan_id, sha), clock()) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


def test_a_report_at_the_last_instant_of_the_hour_is_believed(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """An hour to the microsecond after the last step, the plan may still be verified."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "active", "running", clock() - timedelta(seconds=1))
    assert verify(store, report(plan_id, sha), NOW + VERIFY_HORIZON) == Recorded(
        plan_id=plan_id, state=S.VERIFIED
    )


def test_a_report_after_the_hour_is_refused_saying_the_plan_is_no_longer_verified(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemd: Systemd
) -> None:
    """A second past the hour, what the service does says nothing about that fix: the
    report is refused, and the operator is told why."""
    plan_id, sha = applied(store, approvals_dir, clock)
    systemd.service("nginx.service", "active", "running", clock() - timedelta(seconds=1))
    late = NOW + VERIFY_HORIZON + timedelta(seconds=1)
    assert refused(verify(store, report(plan_id, sha), late), plan_id) == (
        "a verification after the horizon: the plan is no longer verified"
    )


def test_a_plan_applied_exactly_an_hour_ago_is_still_offered(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """At the last instant of the hour after its last step, the plan is still offered
    for verification, and its marker kept."""
    plan_id, _ = applied(store, approvals_dir, clock)
    assert [p.plan_id for p in pending(store, NOW + VERIFY_HORIZON)] == [plan_id]
    assert (store.verify / plan_id).exists()


def test_a_plan_applied_exactly_an_hour_ago_is_marked_again(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """An apply killed before the marker: at the last instant of the hour the next run's
    sweep still marks the plan, which may still be verified."""
    plan_id, _ = applied(store, approvals_dir, clock)
    (store.verify / plan_id).unlink()
    since = NOW - timedelta(days=1)
    assert sweep_unmarked(store, NOW + VERIFY_HORIZON, since) == [plan_id]
    assert (store.verify / plan_id).exists()


def test_the_hour_counts_from_the_end_of_the_last_step(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A restart that took 20 s to come up: the plan is offered as applied when that step
    ended, not when the apply began."""
    plan_id, _ = applied(store, approvals_dir, clock, run_step=SlowSystemctl(clock, 20))
    [waiting] = pending(store, clock())
    assert waiting.plan_id == plan_id
    assert waiting.applied_at == NOW + timedelta(seconds=20)


# -- what a waiting plan and a report carry -------------------------------------------


def test_a_waiting_plan_carries_its_symptom_and_its_incident(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """opsbot-verify is told what the plan cures (the symptom it samples) and the
    incident the plan belongs to (its own id, for a first plan)."""
    plan = Plan.model_validate(
        {
            **plan_of().model_dump(exclude_none=True),
            "symptom": {"unit": "nginx.service", "health": ["web"], "result": "signal"},
        }
    )
    plan_id, _ = applied(store, approvals_dir, clock, plan)
    [waiting] = pending(store, clock())
    assert waiting.symptom == plan.symptom
    assert waiting.incident == plan_id


def test_a_report_for_a_plan_that_does_not_exist_is_refused_naming_it(
    store: PlanStore,
) -> None:
    """A report names a plan id the store does not hold: refused, saying so."""
    missing = "20261129-213500-0badf00d"
    answer = verify(store, report(missing, "a" * 64, "unresolved"), NOW)
    assert answer == Reject(reason=f"no plan {missing}")


def test_the_recorded_verification_keeps_how_long_after_the_last_step_it_came(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """The report's seconds (from the last step to the verdict) are kept with the
    verification, for `opsbot show`."""
    plan_id, sha = applied(store, approvals_dir, clock)
    clock.advance(11)
    verify(store, report(plan_id, sha, "unresolved", seconds=10.4), clock())
    verification = store.status(plan_id).verification
    assert verification is not None and verification.seconds == 10.4


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        (
            ["nginx.service is failed", "web answers 502"],
            "nginx.service is failed; web answers 502",
        ),
        ([], "unresolved"),
    ],
)
def test_the_plans_reason_is_what_was_seen_or_else_the_result(
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    evidence: list[str],
    reason: str,
) -> None:
    """The plan's new state says why: each line of evidence, joined with "; "; a report
    without evidence, its result."""
    plan_id, sha = applied(store, approvals_dir, clock)
    clock.advance(11)
    verify(store, report(plan_id, sha, "unresolved", evidence=evidence), clock())
    status = store.status(plan_id)
    assert (status.state, status.reason) == (S.UNRESOLVED, reason)


def test_the_plans_reason_is_cut_at_500_characters(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Two lines of 300 characters: the reason holds the first 500 characters of them."""
    plan_id, sha = applied(store, approvals_dir, clock)
    lines = ["a" * 300, "b" * 300]
    clock.advance(11)
    verify(store, report(plan_id, sha, "unresolved", evidence=lines), clock())
    assert store.status(plan_id).reason == "; ".join(lines)[:500]


def test_a_report_that_comes_after_its_marker_was_removed_is_recorded(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """opsbot-verify judged the plan UNRESOLVED as the hour ended, and another run has
    already removed its marker: the report is still recorded."""
    plan_id, sha = applied(store, approvals_dir, clock)
    clock.advance(VERIFY_HORIZON.total_seconds() + 5)
    assert pending(store, clock()) == []
    assert not (store.verify / plan_id).exists()
    answer = verify(store, report(plan_id, sha, "unresolved"), clock())
    assert answer == Recorded(plan_id=plan_id, state=S.UNRESOLVED)


# -- the markers opsbot-verify.path watches -------------------------------------------


def test_a_marker_whose_plan_was_already_judged_is_removed_and_the_next_still_offered(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """The verifier died between recording a verdict and removing the marker: that
    marker is removed when the plans are asked for, and a plan applied later is still
    offered."""
    judged, sha = applied(store, approvals_dir, clock)
    clock.advance(11)
    assert verify(store, report(judged, sha, "unresolved"), clock()) == Recorded(
        plan_id=judged, state=S.UNRESOLVED
    )
    mark_applied(store, judged)  # as if the verifier died before removing it
    clock.advance(60)
    later, _ = applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    assert [p.plan_id for p in pending(store, clock())] == [later]
    assert not (store.verify / judged).exists()


def test_a_marker_whose_plan_was_edited_is_removed_and_the_next_still_offered(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan whose stored bytes were edited after it ran cannot be verified: its marker
    is removed, and a plan applied later is still offered."""
    edited, _ = applied(store, approvals_dir, clock)
    edit_record(store, edited, plan=store.load(edited).plan.replace("bring", "break"))
    clock.advance(60)
    later, _ = applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    assert [p.plan_id for p in pending(store, clock())] == [later]
    assert not (store.verify / edited).exists()


def test_a_marker_from_before_the_hour_is_removed_and_the_next_still_offered(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan applied two hours ago and one applied now: the old marker is removed, the
    new plan offered."""
    old, _ = applied(store, approvals_dir, clock)
    clock.advance(2 * 3600)
    new, _ = applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    assert [p.plan_id for p in pending(store, clock())] == [new]
    assert not (store.verify / old).exists()


def test_the_sweep_marks_an_unmarked_plan_after_a_record_it_cannot_read(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan record that is not a record at all, stored before an applied plan whose
    marker is missing: the sweep passes it and marks the applied plan."""
    plan_id, _ = applied(store, approvals_dir, clock)
    garbage = f"{NOW - timedelta(minutes=10):%Y%m%d-%H%M%S}-0badf00d"
    (store.plans / f"{garbage}.json").write_text("not a record")
    (store.verify / plan_id).unlink()
    assert sweep_unmarked(store, clock(), NOW - timedelta(days=1)) == [plan_id]


@pytest.fixture
def east_of_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The host's zone nine hours east of UTC (Japan), as TZ= sets it."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


def test_the_sweep_reads_plan_ids_in_utc_on_a_host_east_of_utc(
    store: PlanStore, approvals_dir: Path, clock: Clock, east_of_utc: None
) -> None:
    """On a host whose local time is nine hours ahead: a plan submitted 20 h ago and
    applied a minute ago is within the sweep's reach (a day and an hour back, as the
    apply asks) and is marked again."""
    record = submitted(store, plan_of(), NOW - timedelta(hours=20))
    approved(store, approvals_dir, record, NOW - timedelta(minutes=2))
    clock.at = NOW - timedelta(minutes=1)
    apply(store, clock, approvals_dir)
    (store.verify / record.plan_id).unlink()
    since = NOW - timedelta(seconds=HOST_POLICY.plan_ttl_seconds) - VERIFY_HORIZON
    assert sweep_unmarked(store, NOW, since) == [record.plan_id]


# -- what opsbot's recent plans forbid ------------------------------------------------


def restarts_of_app(policy: ExecutorPolicy, store: PlanStore, now: datetime) -> list[str]:
    """What history forbids a new restart of app.service, in words."""
    plan = plan_of(step("restart_unit", "app.service", reason="once more"))
    return [error.message for error in history_errors(plan, store, policy, now)]


def test_a_plan_applied_late_in_its_life_still_spends_the_restart_budget(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Plans live an hour: one submitted 80 min ago, approved and run 25 min ago,
    restarted app.service. With a budget of one restart in 30 min, the next is refused."""
    policy = HOST_POLICY.model_copy(update={"plan_ttl_seconds": 3600, "restart_budget": 1})
    record = submitted(
        store, plan_of(step("restart_unit", "app.service")), NOW - timedelta(minutes=80)
    )
    approved(store, approvals_dir, record, NOW - timedelta(minutes=26))
    clock.at = NOW - timedelta(minutes=25)
    apply(store, clock, approvals_dir, policy=policy)
    assert store.status(record.plan_id).state is S.APPLIED
    [refusal] = restarts_of_app(policy, store, NOW)
    assert refusal.startswith("restart budget spent")


def test_a_plan_that_went_stale_does_not_hide_a_later_restart(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan whose approval was used but whose unit had changed (STALE: nothing ran),
    then a restart of app.service a minute later: with a budget of one, the restart
    spends it."""
    policy = HOST_POLICY.model_copy(update={"restart_budget": 1})
    down = {"active_state": ["failed"]}
    stale = submitted(store, plan_of(step("restart_unit", "nginx.service", expect=down)), clock())
    approved(store, approvals_dir, stale, clock())
    apply(store, clock, approvals_dir, read_state=unit_in("active"), policy=policy)
    assert store.status(stale.plan_id).state is S.STALE
    assert store.is_consumed(stale.plan_id)
    clock.advance(60)
    applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    [refusal] = restarts_of_app(policy, store, clock())
    assert refusal.startswith("restart budget spent")


def test_a_plan_whose_record_was_edited_does_not_hide_a_later_restart(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A plan that ran and whose stored bytes were edited since, then a restart of
    app.service a minute later: with a budget of one, the restart spends it."""
    policy = HOST_POLICY.model_copy(update={"restart_budget": 1})
    edited, _ = applied(store, approvals_dir, clock)
    edit_record(store, edited, plan=store.load(edited).plan.replace("bring", "break"))
    clock.advance(60)
    applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    [refusal] = restarts_of_app(policy, store, clock())
    assert refusal.startswith("restart budget spent")


def test_a_restart_the_apply_died_in_still_spends_the_budget(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """The apply was killed while `systemctl restart app.service` ran: the step began and
    never finished, the plan is INTERRUPTED, and that restart spends a budget of one."""
    policy = HOST_POLICY.model_copy(update={"restart_budget": 1})
    record = submitted(store, plan_of(step("restart_unit", "app.service")), clock())
    approved(store, approvals_dir, record, clock())
    assert store.consume(record.plan_id, "0" * 64, "opsbot-executor", clock())
    running = StepRecord(
        index=1,
        tool="restart_unit",
        argv=restart_argv("app.service"),
        outcome="running",
        started_at=clock(),
    )
    status = store.status(record.plan_id)
    store.save_status(
        transition(status, S.APPLYING, by="opsbot-executor", at=clock(), steps=[running])
    )
    clock.advance(60)
    apply(store, clock, approvals_dir, policy=policy)  # the next apply finds it dead
    assert store.status(record.plan_id).state is S.INTERRUPTED
    [refusal] = restarts_of_app(policy, store, clock())
    assert refusal.startswith("restart budget spent")


def test_a_restart_exactly_the_budgets_minutes_ago_still_counts(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A restart of app.service exactly 30 min ago is within the last 30 min: with a
    budget of one, the next is refused."""
    policy = HOST_POLICY.model_copy(update={"restart_budget": 1})
    applied(store, approvals_dir, clock, plan_of(step("restart_unit", "app.service")))
    later = NOW + timedelta(minutes=policy.restart_budget_minutes)
    [refusal] = restarts_of_app(policy, store, later)
    assert refusal.startswith("restart budget spent")


def test_a_plan_unresolved_exactly_the_budgets_minutes_ago_is_still_tried(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A restart of app.service ended UNRESOLVED exactly 30 min ago: the very same steps
    are still refused as tried before."""
    plan_id, sha = applied(
        store, approvals_dir, clock, plan_of(step("restart_unit", "app.service"))
    )
    clock.advance(11)
    verify(store, report(plan_id, sha, "unresolved"), clock())
    later = clock() + timedelta(minutes=HOST_POLICY.restart_budget_minutes)
    plan = plan_of(step("restart_unit", "app.service"))
    [tried] = [e.message for e in history_errors(plan, store, HOST_POLICY, later)]
    assert tried.startswith(f"tried before: plan {plan_id} ran these very steps")


def test_statuses_edited_by_hand_do_not_break_the_judgement_of_a_new_plan(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Two plans that ran, their statuses rewritten by hand: one UNRESOLVED without any
    history, one APPLIED without its step records. Neither is read as more than it says
    (no end, no restart), and a new restart of app.service is judged: nothing forbids
    it."""
    for state in (S.UNRESOLVED, S.APPLIED):
        plan_id, _ = applied(
            store, approvals_dir, clock, plan_of(step("restart_unit", "app.service"))
        )
        store.save_status(StatusRecord(plan_id=plan_id, state=state))
        clock.advance(60)
    policy = HOST_POLICY.model_copy(update={"restart_budget": 1})
    assert restarts_of_app(policy, store, clock()) == []


def test_a_file_in_the_store_that_is_no_record_keeps_no_submit_out(
    store: PlanStore, clock: Clock
) -> None:
    """A file in plans/ that is no plan record (damaged, or written by someone else),
    found when a fresh executor first looks for duplicates: the next plan is stored all
    the same, and so is the same plan again (as its duplicate)."""
    garbage = f"{NOW - timedelta(minutes=10):%Y%m%d-%H%M%S}-0badf00d"
    (store.plans / f"{garbage}.json").write_text("not a record")
    fresh = PlanStore(store.root)
    first = fresh.add(plan_of(step("restart_unit", "app.service")), DIAGNOSE, clock())
    again = fresh.add(plan_of(step("restart_unit", "app.service")), DIAGNOSE, clock())
    assert not first[2] and again == (first[0], first[1], True)
