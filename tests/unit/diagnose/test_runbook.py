"""The runbook policy's decisions, from recorded evidence.

Each test replays what the read tools returned on a real systemd 252 (tests/unit/
diagnose/recorded.py), through the real loop, so the runbook sees observations in
exactly the format the tools produce, and the plan it proposes passes the same
validation and readiness rule as any other.
"""

from __future__ import annotations

from typing import Any

from diagnose_svc.actions import CallTool, Transcript, Turn
from diagnose_svc.observation import output_text
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.redact import Redactor
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings, HealthTarget
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept, health


def settings(**targets: tuple[str, str]) -> DiagnoseSettings:
    """DiagnoseSettings with health targets name=(url, unit)."""
    return DiagnoseSettings(
        health={
            name: HealthTarget.model_validate({"url": url, "unit": unit})
            for name, (url, unit) in targets.items()
        }
    )


def diagnose(
    host: RecordedHost, unit: str, config: DiagnoseSettings | None = None, symptom: str = ""
) -> tuple[PlanVerdict | NoteVerdict, FakeSubmitter]:
    config = config or DiagnoseSettings()
    submitter = FakeSubmitter([accept()])
    verdict = run_diagnosis(unit, symptom, RunbookPolicy(config), host.tools(), submitter, config)
    return verdict, submitter


def steps_of(verdict: PlanVerdict | NoteVerdict) -> list[tuple[str, str, dict[str, Any]]]:
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    return [
        (s.tool, s.args.unit, s.expect.model_dump(exclude_none=True) if s.expect else {})
        for s in verdict.plan.steps
    ]


def note_of(verdict: PlanVerdict | NoteVerdict) -> str:
    assert isinstance(verdict, NoteVerdict), verdict
    assert verdict.ended_by == "final_note", verdict.text
    return verdict.text


def test_killed_service_is_restarted_with_expect_failed() -> None:
    """A service killed by a signal, with a clean journal, gets restart_unit expecting
    its current state (failed), the reason citing the evidence."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    verdict, submitter = diagnose(host, "killed.service")
    assert steps_of(verdict) == [("restart_unit", "killed.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    reason = verdict.plan.steps[0].reason or ""
    assert "Result=signal" in reason and "SIGKILL" in reason
    assert verdict.plan.goal == "Restart failed killed.service"
    assert [c[0] for c in host.calls] == ["read_unit_status", "tail_journal"]
    assert len(submitter.submitted) == 1


def test_decisions_follow_evidence_not_unit_names() -> None:
    """The same evidence under another unit name gives the same decision."""
    show = recorded.KILLED_SHOW.replace("killed.service", "nginx.service")
    journal = [(t, p, s, m.replace("killed", "nginx")) for t, p, s, m in recorded.KILLED_JOURNAL]
    verdict, _ = diagnose(RecordedHost().add(show, journal), "nginx.service")
    assert steps_of(verdict) == [("restart_unit", "nginx.service", {"active_state": ["failed"]})]


def test_config_error_gives_a_note_quoting_the_journal_line() -> None:
    """A unit that fails on an nginx "[emerg]" configuration error (and hit its start
    limit through automatic restarts) gets a note quoting that line and saying what a
    human must do: no plan, since a restart would fail the same way."""
    host = RecordedHost().add(recorded.BADCONF_SHOW, recorded.BADCONF_JOURNAL)
    verdict, submitter = diagnose(host, "badconf.service")
    text = note_of(verdict)
    assert 'unknown directive "foo" in /etc/nginx/nginx.conf:12' in text
    assert "nginx -t" in text and "fix" in text
    assert "no plan is proposed" in text
    assert submitter.submitted == []


def test_missing_executable_gives_a_note() -> None:
    """ExecStart= naming a missing program: a note quoting "No such file or directory"."""
    host = RecordedHost().add(recorded.NOEXEC_SHOW, recorded.NOEXEC_JOURNAL)
    text = note_of(diagnose(host, "noexec.service")[0])
    assert "Failed at step EXEC spawning /nonexistent/bin/app: No such file or directory" in text
    assert "restore it or fix the path" in text


def test_start_limit_hit_with_cause_gone_resets_then_starts() -> None:
    """Result=start-limit-hit and a journal without an unfixable cause: reset_failed_unit,
    then start_unit, in that order."""
    show = recorded.KILLED_SHOW.replace("Result=signal", "Result=start-limit-hit")
    journal = recorded.KILLED_JOURNAL + [
        (
            "2026-11-29T21:45:00Z",
            "warning",
            "systemd",
            "killed.service: Start request repeated too quickly.",
        ),
    ]
    verdict, _ = diagnose(RecordedHost().add(show, journal), "killed.service")
    assert steps_of(verdict) == [
        ("reset_failed_unit", "killed.service", {"active_state": ["failed"]}),
        ("start_unit", "killed.service", {"active_state": ["inactive", "failed"]}),
    ]


def test_start_limit_seen_only_in_the_journal_also_resets() -> None:
    """Automatic restarts that hit the limit leave Result=exit-code; the journal's "Start
    request repeated too quickly" is enough to clear the limit first."""
    journal = [row for row in recorded.BADCONF_JOURNAL if "[emerg]" not in row[3]]
    verdict, _ = diagnose(RecordedHost().add(recorded.BADCONF_SHOW, journal), "badconf.service")
    assert [step[0] for step in steps_of(verdict)] == ["reset_failed_unit", "start_unit"]


def test_crash_loop_whose_attempts_all_die_the_same_way_gives_a_note() -> None:
    """The start limit was hit and every attempt's own last words were the same error (a
    bad environment): another start would only repeat it, so a note quotes that line and
    no plan is proposed (seen on systemd 252 with a broken APP_MODE drop-in)."""
    error = "badconf: invalid APP_MODE='broken': expected one of prod, dev"
    journal = [row for row in recorded.BADCONF_JOURNAL if "[emerg]" not in row[3]]
    journal[-3:-3] = [(f"2026-11-29T21:44:38.9{i:05d}Z", "err", "badconf", error) for i in range(3)]
    verdict, _ = diagnose(RecordedHost().add(recorded.BADCONF_SHOW, journal), "badconf.service")
    text = note_of(verdict)
    assert "invalid APP_MODE='broken'" in text
    assert "Restarting cannot help" in text


def test_masked_unit_gives_a_note() -> None:
    """A masked unit: a note saying a human must unmask it; no plan."""
    text = note_of(diagnose(RecordedHost().add(recorded.MASKED_SHOW), "cron.service")[0])
    assert "masked" in text and "systemctl unmask cron.service" in text


def test_failed_dependency_is_started_first_then_the_running_dependent_restarted() -> None:
    """app.service runs while db.service, which it Requires=, failed: start db first
    (start, not restart, so app is not restarted behind the plan's back), then restart
    app pinned to its invocation."""
    host = (
        RecordedHost()
        .add(recorded.APP_SHOW, recorded.APP_JOURNAL)
        .add(recorded.DB_SHOW, recorded.DB_JOURNAL)
    )
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", {"active_state": ["failed"]}),
        (
            "restart_unit",
            "app.service",
            {"active_state": ["active"], "invocation_id": "3b6ba3c857944116b4936dffb75ea52f"},
        ),
    ]


def test_failed_dependency_of_a_failed_unit_comes_first() -> None:
    """Both down: the dependency is started first, then the dependent restarted."""
    app_failed = recorded.DB_SHOW.replace("db.service", "app.service").replace(
        "Requires=sysinit.target system.slice", "Requires=sysinit.target db.service system.slice"
    )
    host = (
        RecordedHost()
        .add(
            app_failed,
            [("2026-11-29T21:44:39Z", "notice", "systemd", "Dependency failed for app.service.")],
        )
        .add(recorded.DB_SHOW, recorded.DB_JOURNAL)
    )
    verdict, _ = diagnose(host, "app.service")
    assert [(tool, unit) for tool, unit, _ in steps_of(verdict)] == [
        ("start_unit", "db.service"),
        ("restart_unit", "app.service"),
    ]
    assert isinstance(verdict, PlanVerdict)
    assert verdict.plan.goal == "Start db.service, which app.service requires, then app.service"


def test_dependency_with_config_error_gives_a_note_about_the_dependency() -> None:
    """A failed dependency whose journal shows a configuration error: a note about it."""
    db_journal = (
        recorded.DB_JOURNAL[:1]
        + [
            (
                "2026-11-29T21:44:38.59Z",
                "info",
                "postgres",
                'FATAL: invalid value for parameter "port"',
            ),
        ]
        + recorded.DB_JOURNAL[1:]
    )
    host = (
        RecordedHost()
        .add(recorded.APP_SHOW, recorded.APP_JOURNAL)
        .add(recorded.DB_SHOW, db_journal)
    )
    text = note_of(diagnose(host, "app.service")[0])
    assert text.startswith("app.service Requires=db.service, which is down.")
    assert "invalid value for parameter" in text


def test_active_but_health_times_out_is_restarted_as_hung() -> None:
    """Active, but its health target times out: restart_unit expecting active and the
    current invocation id."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    app = recorded.APP_SHOW.replace("db.service ", "")
    host = RecordedHost(health={"app": health("app", "app.service", "timeout")}).add(
        app, recorded.APP_JOURNAL
    )
    verdict, _ = diagnose(host, "app.service", config)
    assert steps_of(verdict) == [
        (
            "restart_unit",
            "app.service",
            {"active_state": ["active"], "invocation_id": "3b6ba3c857944116b4936dffb75ea52f"},
        )
    ]
    assert isinstance(verdict, PlanVerdict)
    assert "hung" in (verdict.plan.steps[0].reason or "")


def test_healthy_unit_gives_a_no_change_note() -> None:
    """Active and its health target answers as expected: no change is warranted."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    app = recorded.APP_SHOW.replace("db.service ", "")
    host = RecordedHost(health={"app": health("app", "app.service", "ok", 200)}).add(
        app, recorded.APP_JOURNAL
    )
    text = note_of(diagnose(host, "app.service", config)[0])
    assert "No change is warranted" in text
    assert "app answered 200" in text


def test_recovered_unit_reports_its_restart_count() -> None:
    """Active, healthy, but NRestarts>0: a note that it recovered after N restarts."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    app = recorded.APP_SHOW.replace("db.service ", "").replace("NRestarts=0", "NRestarts=2")
    host = RecordedHost(health={"app": health("app", "app.service", "ok", 200)}).add(
        app, recorded.APP_JOURNAL
    )
    text = note_of(diagnose(host, "app.service", config)[0])
    assert "has recovered: systemd restarted it 2 times (NRestarts=2)" in text


def test_failed_reload_of_a_running_unit_is_never_restarted() -> None:
    """Running, but its last reload failed on a configuration error: a note quoting the
    error and the failed reload; never a restart."""
    config = settings(web=("http://127.0.0.1/", "reloadfail.service"))
    host = RecordedHost(health={"web": health("web", "reloadfail.service", "ok", 200)}).add(
        recorded.RELOADFAIL_SHOW, recorded.RELOADFAIL_JOURNAL
    )
    verdict, submitter = diagnose(host, "reloadfail.service", config)
    text = note_of(verdict)
    assert "last reload failed" in text
    assert '"Reload failed for reloadfail.service."' in text
    assert 'invalid number of arguments in \\"listen\\" directive' in text or (
        'invalid number of arguments in "listen" directive' in text
    )
    assert "no restart is proposed" in text
    assert submitter.submitted == []


def test_proxy_502_leads_to_its_failed_upstream() -> None:
    """nginx runs but answers 502; the configuration says which unit serves the upstream
    target; that unit is failed with a clean journal: restart it, within max_steps."""
    config = settings(
        web=("http://127.0.0.1/", "nginx.service"),
        api=("http://127.0.0.1:8080/health", "app.service"),
    )
    nginx = recorded.RELOADFAIL_SHOW.replace("reloadfail.service", "nginx.service")
    app_failed = recorded.DB_SHOW.replace("db.service", "app.service")
    host = (
        RecordedHost(
            health={
                "web": health("web", "nginx.service", "unexpected_status", 502, "Bad Gateway"),
                "api": health("api", "app.service", "connection_refused"),
            }
        )
        .add(nginx, [("2026-11-29T21:44:38Z", "info", "systemd", "Started nginx.service.")])
        .add(app_failed, [(t, p, s, m.replace("db", "app")) for t, p, s, m in recorded.DB_JOURNAL])
    )
    verdict, _ = diagnose(host, "nginx.service", config, symptom="site returns 502")
    assert steps_of(verdict) == [("restart_unit", "app.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    assert verdict.plan.goal == "Restart failed app.service, the upstream of nginx.service"
    assert [c[0] for c in host.calls] == [
        "read_unit_status",
        "http_get_health",
        "http_get_health",
        "read_unit_status",
        "tail_journal",
    ]
    assert verdict.steps_used <= DiagnoseSettings().max_steps


def test_proxy_502_without_an_upstream_target_gives_a_note() -> None:
    """A 502 with no health target configured for anything else: a note asking for one,
    not a restart of the proxy."""
    config = settings(web=("http://127.0.0.1/", "nginx.service"))
    nginx = recorded.RELOADFAIL_SHOW.replace("reloadfail.service", "nginx.service")
    host = RecordedHost(
        health={"web": health("web", "nginx.service", "unexpected_status", 502)}
    ).add(nginx, [("2026-11-29T21:44:38Z", "info", "systemd", "Started nginx.service.")])
    text = note_of(diagnose(host, "nginx.service", config)[0])
    assert "answers 502" in text and "no health target is configured" in text


def test_address_in_use_gives_a_note() -> None:
    """A port conflict in the journal: a note naming it, no plan."""
    journal = (
        recorded.DB_JOURNAL[:1]
        + [
            (
                "2026-11-29T21:44:38.59Z",
                "info",
                "nginx",
                "nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)",
            )
        ]
        + recorded.DB_JOURNAL[1:]
    )
    text = note_of(diagnose(RecordedHost().add(recorded.DB_SHOW, journal), "db.service")[0])
    assert "Address already in use" in text and "ss -ltnp" in text


def test_cleanly_stopped_unit_is_started() -> None:
    """An inactive (dead) unit that stopped cleanly: start_unit expecting inactive, with a
    reason that asks the approver whether it was stopped on purpose."""
    stopped = (
        recorded.APP_SHOW.replace("db.service ", "")
        .replace("ActiveState=active", "ActiveState=inactive")
        .replace("SubState=running", "SubState=dead")
    )
    verdict, _ = diagnose(
        RecordedHost().add(
            stopped, [("2026-11-29T21:50:00Z", "info", "systemd", "Stopped app.service.")]
        ),
        "app.service",
    )
    assert steps_of(verdict) == [("start_unit", "app.service", {"active_state": ["inactive"]})]
    assert isinstance(verdict, PlanVerdict)
    assert "stopped on purpose" in (verdict.plan.steps[0].reason or "")


def test_unknown_unit_gives_a_note() -> None:
    """A unit systemd does not know: the tool's error is quoted in a note."""
    text = note_of(diagnose(RecordedHost(), "nonexist.service")[0])
    assert text.startswith("Could not read the state of nonexist.service: unit nonexist.service")


def test_a_revised_plan_is_not_retried() -> None:
    """When the executor asks for a revision, the runbook hands over to a human."""
    from shared_schema import FieldError, Revise

    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    config = DiagnoseSettings()
    submitter = FakeSubmitter(
        [Revise(errors=[FieldError(path="steps.0", message="restart_unit not allowed")])]
    )
    verdict = run_diagnosis(
        "killed.service", "", RunbookPolicy(config), host.tools(), submitter, config
    )
    text = note_of(verdict)
    assert "restart_unit not allowed" in text and "a human must decide" in text
    assert len(submitter.submitted) == 1


def test_without_tools_it_concludes_from_what_it_has() -> None:
    """Shown no tools before it read the journal, the runbook does not restart blindly:
    it says the journal could not be read."""
    status = RecordedHost().add(recorded.KILLED_SHOW).status("killed.service")
    text, _ = output_text(status, Redactor())
    transcript = Transcript(
        unit="killed.service",
        turns=[
            Turn(
                step=1,
                action=CallTool(tool="read_unit_status", args={"unit": "killed.service"}),
                observation=text,
            )
        ],
    )
    proposal = RunbookPolicy(DiagnoseSettings()).propose(transcript, [])
    assert proposal.action.kind == "final_note"
    assert "journal could not be read within the steps available" in proposal.action.text  # type: ignore[union-attr]
