"""opsbot-verify's judgement, on recorded systemd states that change as the clock moves:
a plan is VERIFIED only when its units stay up and the health targets of its symptom
and of its units answered well through the last settle window; a unit that fails
again, keeps being restarted by systemd, or never becomes active, or a symptom still
there, makes it UNRESOLVED, with what was seen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from diagnose_svc.tools import (
    HealthArgs,
    HealthResult,
    ToolContext,
    UnitArgs,
    UnitStatus,
    make_tool,
)
from diagnose_svc.verify import Verifier, expected_states, tried_plan
from shared_schema import AwaitingPlan, AwaitingStep, DiagnoseSettings, HealthTarget, Symptom
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import RecordedHost, health

APPLIED_AT = datetime(2026, 11, 29, 21, 50, tzinfo=UTC)
SETTLE = 10.0
RUNNING = recorded.APP_SHOW.replace("db.service ", "")
FAILED = recorded.KILLED_SHOW.replace("killed.service", "app.service")


class Timeline:
    """The clock, moved by the verifier's sleeps; what app.service is at each second."""

    def __init__(self, states: list[str], health_ok_from: float = 0.0) -> None:
        self.at = APPLIED_AT + timedelta(seconds=0.5)
        self.states = states
        self.health_ok_from = health_ok_from
        self.sleeps = 0

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.at += timedelta(seconds=seconds)

    def second(self) -> int:
        return int((self.at - APPLIED_AT).total_seconds())

    def tools(self) -> dict[str, object]:
        def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
            """Recorded read_unit_status, by the second."""
            show = self.states[min(self.second(), len(self.states) - 1)]
            return RecordedHost().add(show).status(args.unit)

        def http_get_health(args: HealthArgs, context: ToolContext) -> HealthResult:
            """Recorded http_get_health, by the second."""
            elapsed = (self.at - APPLIED_AT).total_seconds()
            if elapsed >= self.health_ok_from:
                return health(args.target, "app.service", "ok", 200)
            return health(args.target, "app.service", "connection_refused")

        return {
            "read_unit_status": make_tool(UnitArgs, read_unit_status),
            "http_get_health": make_tool(HealthArgs, http_get_health),
        }


SETTINGS = DiagnoseSettings(
    health={
        "app": HealthTarget.model_validate(
            {"url": "http://127.0.0.1:8080/health", "unit": "app.service"}
        )
    }
)


def plan(*steps: tuple[str, str]) -> AwaitingPlan:
    return AwaitingPlan(
        plan_id="20261129-215000-0a1b2c3d",
        sha256="0" * 64,
        steps=[AwaitingStep(tool=t, unit=u) for t, u in steps or [("restart_unit", "app.service")]],
        applied_at=APPLIED_AT,
    )


def verify(timeline: Timeline, awaiting: AwaitingPlan | None = None) -> object:
    verifier = Verifier(SETTINGS, timeline.tools(), now=timeline.now, sleep=timeline.sleep)  # type: ignore[arg-type]
    [watch] = verifier.watch([awaiting or plan()], SETTLE)
    return watch


def test_a_unit_that_stays_up_and_answers_is_verified_after_a_whole_window_of_good_answers() -> (
    None
):
    """Running all along, its health target refusing for 3 s and then answering 200:
    VERIFIED once 10 s of good answers followed the last bad one (not at the end of the
    first window, which held bad answers), with its state and the answers as evidence."""
    timeline = Timeline([RUNNING], health_ok_from=3.0)  # health takes 3 s to come back
    watch = verify(timeline)
    report = watch.report()  # type: ignore[attr-defined]
    assert report.result == "verified"
    assert 12.0 <= report.seconds <= 13.0
    assert report.evidence[0].startswith("app.service is active/running (NRestarts=0")
    assert report.evidence[-1] == "health target app answered connection_refused x3, then 200 x10"


def test_a_plan_right_for_its_unit_but_not_for_the_symptom_is_unresolved() -> None:
    """The diagnosis of web's 503 started db.service; db comes up and stays up, but web
    (which the plan did not touch) keeps answering 503: the symptom the plan carries is
    still there, so UNRESOLVED, naming web's target and its answers, and the follow-up
    is about web.service."""
    timeline = Timeline([RUNNING.replace("app.service", "db.service")])
    settings = DiagnoseSettings(
        health={
            "db": HealthTarget.model_validate(
                {"url": "http://127.0.0.1:5432/", "unit": "db.service"}
            ),
            "web": HealthTarget.model_validate({"url": "http://127.0.0.1/", "unit": "web.service"}),
        }
    )

    def http_get_health(args: HealthArgs, context: ToolContext) -> HealthResult:
        """db answers, web keeps its 503."""
        if args.target == "db":
            return health("db", "db.service", "ok", 200)
        return health("web", "web.service", "unexpected_status", 503)

    tools = {**timeline.tools(), "http_get_health": make_tool(HealthArgs, http_get_health)}
    awaiting = plan(("start_unit", "db.service")).model_copy(
        update={"symptom": Symptom(unit="web.service", health=["web"])}
    )
    verifier = Verifier(settings, tools, now=timeline.now, sleep=timeline.sleep)  # type: ignore[arg-type]
    [watch] = verifier.watch([awaiting], SETTLE)
    report = watch.report()
    assert report.result == "unresolved"
    assert report.evidence[0].startswith(
        "the symptom is still there: health target web failed to answer as expected"
    )
    assert "health target web answered 503 x31" in report.evidence
    assert "health target db answered 200 x31" in report.evidence
    assert watch.failing_unit == "web.service"
    assert 29.0 <= report.seconds <= 31.0  # three windows: the most a symptom may take


def test_a_unit_that_fails_again_is_unresolved_at_once() -> None:
    """Up for two seconds after the restart, then failed: UNRESOLVED when seen, not at
    the end of the window, saying how it ended."""
    timeline = Timeline([RUNNING, RUNNING, FAILED])
    watch = verify(timeline)
    report = watch.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert report.seconds < 4.0
    assert report.evidence == [
        "app.service failed again 2.5 s after the last step (failed/failed, Result=signal, "
        "main process was killed by SIGKILL)"
    ]
    assert watch.failing_unit == "app.service"  # type: ignore[attr-defined]


def test_a_unit_systemd_keeps_restarting_is_unresolved() -> None:
    """Running whenever looked at, but systemd restarted it twice meanwhile: UNRESOLVED,
    saying how many times."""
    restarted = RUNNING.replace("NRestarts=0", "NRestarts=2")
    watch = verify(Timeline([RUNNING, RUNNING, restarted]))
    report = watch.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert "systemd restarted app.service 2 time(s)" in report.evidence[0]


def test_a_unit_still_starting_at_the_end_is_unresolved() -> None:
    """Still activating when the window ends: UNRESOLVED, saying it is not active 10.5 s
    after the last step."""
    activating = RUNNING.replace("ActiveState=active", "ActiveState=activating").replace(
        "SubState=running", "SubState=start"
    )
    watch = verify(Timeline([activating]))
    report = watch.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert report.evidence == [
        "app.service is activating/start, not active, 10.5 s after the last step"
    ]


def test_a_health_target_that_still_fails_makes_it_unresolved() -> None:
    """The unit runs but its health target still fails at the end of the window: UNRESOLVED,
    saying so."""
    watch = verify(Timeline([RUNNING], health_ok_from=60.0))
    report = watch.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert report.evidence[0].startswith("the symptom is still there: health target app failed")
    assert report.evidence[-1] == "health target app answered connection_refused x31"


def test_a_stopped_unit_is_expected_inactive() -> None:
    """After a stop_unit step the unit is expected inactive: found inactive (dead), the plan
    is VERIFIED."""
    stopped = RUNNING.replace("ActiveState=active", "ActiveState=inactive").replace(
        "SubState=running", "SubState=dead"
    )
    assert expected_states(plan(("stop_unit", "app.service"))) == {"app.service": "inactive"}
    settings = DiagnoseSettings()
    timeline = Timeline([stopped])
    verifier = Verifier(settings, timeline.tools(), now=timeline.now, sleep=timeline.sleep)  # type: ignore[arg-type]
    [watch] = verifier.watch([plan(("stop_unit", "app.service"))], SETTLE)
    assert watch.report().result == "verified"


def test_a_window_already_over_is_judged_from_one_look() -> None:
    """The verify timer caught a plan late: its window is over, one sample decides."""
    timeline = Timeline([RUNNING])
    timeline.at = APPLIED_AT + timedelta(minutes=5)
    watch = verify(timeline)
    assert watch.report().result == "verified"  # type: ignore[attr-defined]
    assert timeline.sleeps == 0


def test_what_was_tried_is_handed_to_the_follow_up() -> None:
    """A plan that ran and did not fix it is handed to the follow-up as its steps and one
    line: the plan, what it ran, and that the unit failed again."""
    watch = verify(Timeline([RUNNING, FAILED]))
    tried = tried_plan(watch)  # type: ignore[arg-type]
    assert tried.steps == (("restart_unit", "app.service"),)
    assert tried.line().startswith(
        "plan 20261129-215000-0a1b2c3d (restart_unit app.service) ran and did not fix it: "
        "app.service failed again"
    )


def test_a_restart_systemd_made_before_the_first_look_still_counts() -> None:
    """opsbot-verify may first look after systemd already restarted the unit (a restart
    of a unit in auto-restart does not reset NRestarts, so its count says nothing): a
    main process that began after the last step is systemd's restart after a failure.
    One begun by the plan's own step, before that, is fine."""
    begun = (APPLIED_AT + timedelta(seconds=2)).strftime("%a %Y-%m-%d %H:%M:%S.000000 UTC")
    by_plan = (APPLIED_AT - timedelta(seconds=1)).strftime("%a %Y-%m-%d %H:%M:%S.000000 UTC")
    old = "ExecMainStartTimestamp=Sun 2026-11-29 21:44:38.590102 UTC"
    assert old in RUNNING
    again = verify(Timeline([RUNNING.replace(old, f"ExecMainStartTimestamp={begun}")]))
    report = again.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert report.evidence == [
        "app.service was started again 2.0 s after the last step (NRestarts=0): it failed meanwhile"
    ]
    fine = verify(Timeline([RUNNING.replace(old, f"ExecMainStartTimestamp={by_plan}")]))
    assert fine.report().result == "verified"  # type: ignore[attr-defined]


def test_a_oneshot_job_a_start_ran_to_a_clean_end_is_verified() -> None:
    """A start of a Type=oneshot job runs it and returns when it has ended: inactive,
    Result=success, with nothing left to stay up for, is what the start was for. The same
    state of a service that should keep running is UNRESOLVED."""
    ended = (
        RUNNING.replace("ActiveState=active", "ActiveState=inactive")
        .replace("SubState=running", "SubState=dead")
        .replace("MainPID=95", "MainPID=0")
    )
    job = verify(
        Timeline([ended.replace("Type=simple", "Type=oneshot")]),
        plan(("start_unit", "app.service")),
    )
    assert job.report().result == "verified"  # type: ignore[attr-defined]
    service = verify(Timeline([ended]), plan(("start_unit", "app.service")))
    report = service.report()  # type: ignore[attr-defined]
    assert report.result == "unresolved"
    assert report.evidence[0].startswith("app.service is inactive/dead, not active")
    failed_job = ended.replace("Type=simple", "Type=oneshot").replace(
        "Result=success", "Result=exit-code"
    )
    assert verify(Timeline([failed_job]), plan(("start_unit", "app.service"))).report().result == (  # type: ignore[attr-defined]
        "unresolved"
    )
