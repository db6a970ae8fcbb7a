"""The runbook policy's decisions, from recorded evidence.

Each test replays what the read tools returned on a real systemd 252 (tests/unit/
diagnose/recorded.py), with the facts a test states about the host (a file's mode, a full
filesystem, a port's holder, a stopped process) answered in the tools' real output
models, through the real loop: the runbook sees observations in exactly the format the
tools produce, and the plan it proposes passes the same validation and readiness rule as
any other. The generated fault suite (tests/scenarios/test_generated_faults.py) checks
the same decisions on a real systemd, on service graphs no test here names.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from diagnose_svc.actions import CallTool, Transcript, Turn
from diagnose_svc.observation import output_text
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.redact import Redactor
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools._baseline_store import BaselineListener, Snapshot
from diagnose_svc.tools.disk_usage import Usage
from diagnose_svc.tools.list_listeners import Holder, Listener
from diagnose_svc.tools.read_changes import Change, Changes
from diagnose_svc.tools.read_config_edges import ConfigEdge
from diagnose_svc.tools.read_connections import Edge
from diagnose_svc.tools.read_limits import Limits
from diagnose_svc.tools.read_process_state import ProcessInfo
from diagnose_svc.tools.read_unit_file import PathFact
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings, HealthTarget
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept, health

LATER = datetime(2026, 11, 29, 21, 50, tzinfo=UTC)
EARLIER = datetime(2026, 11, 29, 21, 0, tzinfo=UTC)


def file_fact(path: str, role: str, mode: str = "0644", **facts: Any) -> PathFact:
    """A file a unit names, as read_unit_file reports one that exists: root's, readable
    by the unit's user unless ``facts`` say otherwise."""
    base: dict[str, Any] = {"exists": True, "kind": "file", "owner": "root", "group": "root"}
    return PathFact(path=path, role=role, mode=mode, **{"readable_by_unit": True, **base, **facts})


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


def cause_of(verdict: PlanVerdict | NoteVerdict) -> tuple[str, str | None]:
    """A note's cause as (kind, unit); a plan fails the test, showing its steps."""
    assert isinstance(verdict, NoteVerdict), verdict.plan.model_dump()  # type: ignore[union-attr]
    assert verdict.ended_by == "final_note", verdict.text
    assert verdict.cause is not None, verdict.text
    return verdict.cause.kind, verdict.cause.unit


def renamed(show: str, old: str, new: str) -> str:
    return show.replace(old, new)


def journal_of(unit: str, rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    stem = unit.removesuffix(".service")
    return [(t, p, s, m.replace("db.service", unit).replace("db", stem)) for t, p, s, m in rows]


def stopped(show: str) -> str:
    """A unit that was stopped cleanly (systemctl stop): inactive/dead, Result=success."""
    return (
        show.replace("ActiveState=active", "ActiveState=inactive")
        .replace("SubState=running", "SubState=dead")
        .replace("MainPID=95", "MainPID=0")
        .replace("ActiveExitTimestamp=\n", "ActiveExitTimestamp=Sun 2026-11-29 21:49:00 UTC\n")
    )


def ran_long(show: str) -> str:
    """The same unit, its program having run for an hour before it ended (it failed
    running, not starting)."""
    return show.replace(
        "start_time=[Sun 2026-11-29 21:44:38.559839 UTC]",
        "start_time=[Sun 2026-11-29 20:44:40 UTC]",
    )


DB_RAN = ran_long(recorded.DB_SHOW)
BADCONF_RAN = ran_long(recorded.BADCONF_SHOW)
APP_ALONE = recorded.APP_SHOW.replace("db.service ", "")
APP_INVOCATION = "3b6ba3c857944116b4936dffb75ea52f"
PINNED = {"active_state": ["active"], "invocation_id": APP_INVOCATION}


# -- a unit that is down ---------------------------------------------------------------------


def test_killed_service_is_started_again_with_expect_failed() -> None:
    """A service killed by a signal, whose files, filesystems and port are fine, gets
    start_unit expecting its current state (failed); the reason cites the facts checked."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    verdict, submitter = diagnose(host, "killed.service")
    assert steps_of(verdict) == [("start_unit", "killed.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    reason = verdict.plan.steps[0].reason or ""
    assert "Result=signal" in reason and "SIGKILL" in reason
    assert "its filesystems have room" in reason
    assert verdict.plan.goal == "Start failed killed.service"
    assert len(submitter.submitted) == 1


def test_reads_are_batched_and_never_repeated() -> None:
    """The first step reads the unit, the failed units (and health) at once; no call is
    made twice; the run stays well within max_steps."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    verdict, _ = diagnose(host, "killed.service")
    first = [tool for tool, _ in host.calls[:2]]
    assert sorted(first) == ["list_failed_units", "read_unit_status"]
    assert len({(tool, str(sorted(args.items()))) for tool, args in host.calls}) == len(host.calls)
    assert {"tail_journal", "read_unit_file", "disk_usage"} <= {tool for tool, _ in host.calls}
    assert verdict.steps_used <= 4


def test_decisions_follow_evidence_not_unit_names() -> None:
    """The same evidence under another unit name gives the same decision."""
    show = renamed(recorded.KILLED_SHOW, "killed.service", "ledger-7.service")
    journal = [(t, p, s, m.replace("killed", "ledger-7")) for t, p, s, m in recorded.KILLED_JOURNAL]
    verdict, _ = diagnose(RecordedHost().add(show, journal), "ledger-7.service")
    assert steps_of(verdict) == [("start_unit", "ledger-7.service", {"active_state": ["failed"]})]


def test_cleanly_stopped_unit_is_started() -> None:
    """An inactive (dead) unit that stopped cleanly: start_unit expecting inactive."""
    host = RecordedHost().add(
        stopped(APP_ALONE), [("2026-11-29T21:49:00Z", "info", "systemd", "Stopped app.service.")]
    )
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [("start_unit", "app.service", {"active_state": ["inactive"]})]


def test_start_limit_hit_resets_then_starts() -> None:
    """Result=start-limit-hit, nothing that remains: reset_failed_unit, then start_unit."""
    show = recorded.KILLED_SHOW.replace("Result=signal", "Result=start-limit-hit")
    verdict, _ = diagnose(RecordedHost().add(show, recorded.KILLED_JOURNAL), "killed.service")
    assert steps_of(verdict) == [
        ("reset_failed_unit", "killed.service", {"active_state": ["failed"]}),
        ("start_unit", "killed.service", {"active_state": ["inactive", "failed"]}),
    ]


def test_start_limit_said_by_systemd_in_the_journal_also_resets() -> None:
    """Automatic restarts that hit the limit can leave Result=exit-code; systemd's own
    "Start request repeated too quickly" is enough to clear the limit first."""
    journal = [row for row in recorded.BADCONF_JOURNAL if "[emerg]" not in row[3]]
    verdict, _ = diagnose(RecordedHost().add(BADCONF_RAN, journal), "badconf.service")
    assert [step[0] for step in steps_of(verdict)] == ["reset_failed_unit", "start_unit"]


def test_start_limit_words_written_by_the_service_itself_are_not_believed() -> None:
    """The same words logged by the service's own process (anyone can put text into an
    application's log) are no fact: no reset_failed_unit."""
    journal = [
        *recorded.KILLED_JOURNAL,
        (
            "2026-11-29T21:44:40.7Z",
            "err",
            "sleep",
            "killed.service: Start request repeated too quickly.",
        ),
    ]
    verdict, _ = diagnose(RecordedHost().add(recorded.KILLED_SHOW, journal), "killed.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]


# -- causes only a human can fix -------------------------------------------------------------


def test_masked_unit_gives_a_note() -> None:
    """A masked unit: a note that tells how to unmask it (systemctl unmask), no plan."""
    verdict, submitter = diagnose(RecordedHost().add(recorded.MASKED_SHOW), "cron.service")
    assert cause_of(verdict) == ("masked", "cron.service")
    assert isinstance(verdict, NoteVerdict)
    assert "systemctl unmask cron.service" in verdict.text
    assert submitter.submitted == []


def test_unit_file_that_does_not_load_gives_a_note() -> None:
    """A unit file systemd cannot load (a bad setting): a note on the unit file, no plan."""
    show = recorded.KILLED_SHOW.replace("LoadState=loaded", "LoadState=bad-setting").replace(
        "LoadError=\n",
        'LoadError=org.freedesktop.systemd1.BadUnitSetting "Unit has a bad setting"\n',
    )
    verdict, _ = diagnose(RecordedHost().add(show), "killed.service")
    assert cause_of(verdict) == ("unit_file_error", "killed.service")


def test_unknown_unit_gives_a_note() -> None:
    """A unit systemd does not know: the tool's error is quoted in a note."""
    verdict, _ = diagnose(RecordedHost(), "nonexist.service")
    assert isinstance(verdict, NoteVerdict)
    assert verdict.text.startswith("Could not read the state of nonexist.service: unit nonexist")


def test_missing_program_gives_a_note_naming_the_path() -> None:
    """read_unit_file says the program ExecStart= names does not exist: a note, no plan."""
    host = RecordedHost(
        paths={
            "noexec.service": [
                PathFact(path="/nonexistent/bin/app", role="ExecStart program", exists=False)
            ]
        }
    ).add(recorded.NOEXEC_SHOW, recorded.NOEXEC_JOURNAL)
    verdict, submitter = diagnose(host, "noexec.service")
    assert cause_of(verdict) == ("missing_file", "noexec.service")
    assert "/nonexistent/bin/app" in verdict.cause.fact  # type: ignore[union-attr]
    assert submitter.submitted == []


def test_an_optional_file_that_is_missing_is_no_cause() -> None:
    """EnvironmentFile=-/path may be absent: the unit is started."""
    host = RecordedHost(
        paths={
            "killed.service": [
                PathFact(path="/etc/default/k", role="EnvironmentFile", exists=False, optional=True)
            ]
        }
    ).add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    verdict, _ = diagnose(host, "killed.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]


def test_file_its_user_cannot_read_gives_a_note() -> None:
    """A file its command names is 0600 root:root and its user (ledger) cannot read it: a
    note of permission denied naming the file's mode and owner, no plan."""
    fact = file_fact(
        "/etc/ledger/ledger.conf", "ExecStart argument", mode="0600", readable_by_unit=False
    )
    show = recorded.KILLED_SHOW.replace("User=\n", "User=ledger\n")
    host = RecordedHost(paths={"killed.service": [fact]}).add(show, recorded.KILLED_JOURNAL)
    verdict, _ = diagnose(host, "killed.service")
    assert cause_of(verdict) == ("permission_denied", "killed.service")
    assert "0600 root:root" in verdict.cause.fact  # type: ignore[union-attr]


def test_full_filesystem_gives_a_note() -> None:
    """Its StateDirectory= is on a full filesystem: a note naming the directory, no plan."""
    full = Usage(
        path="/var/lib/ledger",
        role="StateDirectory",
        exists=True,
        size_bytes=10**8,
        free_bytes=0,
        used_percent=100.0,
        full=True,
    )
    host = RecordedHost(disks={"killed.service": [full]}).add(
        recorded.KILLED_SHOW, recorded.KILLED_JOURNAL
    )
    verdict, _ = diagnose(host, "killed.service")
    assert cause_of(verdict) == ("disk_full", "killed.service")
    assert "/var/lib/ledger" in verdict.cause.fact  # type: ignore[union-attr]


def _address_in_use(unit: str, port: int, line: str = "") -> list[tuple[str, str, str, str]]:
    line = line or f"listen tcp 0.0.0.0:{port}: bind: address already in use"
    return [
        *journal_of(unit, recorded.DB_JOURNAL)[:1],
        ("2026-11-29T21:44:38.59Z", "err", "x", line),
        *journal_of(unit, recorded.DB_JOURNAL)[1:],
    ]


def test_port_held_by_another_process_gives_a_note_naming_the_holder() -> None:
    """Its output says the address is in use; list_listeners confirms another process
    holds that port: a note naming the holder, no plan."""
    holder = Listener(
        address="0.0.0.0",
        port=7311,
        uid=0,
        user="root",
        processes=[Holder(pid=4242, comm="python3", unit="squatter.service")],
    )
    host = RecordedHost(listening=[holder]).add(
        recorded.DB_SHOW, _address_in_use("db.service", 7311)
    )
    verdict, _ = diagnose(host, "db.service")
    assert cause_of(verdict) == ("port_in_use", "db.service")
    assert "pid 4242 python3 of squatter.service" in verdict.cause.fact  # type: ignore[union-attr]


def test_a_bind_error_a_client_wrote_into_its_log_decides_nothing() -> None:
    """Its output is anyone's text: a client's request line that reads like a bind error
    (naming a port another process really holds) got logged while it served, and it was
    killed later, after running for an hour. The line is not its start's last words, so
    it decides nothing: the port is not even looked up, and it is started again, as it
    would be without the line."""
    holder = Listener(
        address="0.0.0.0",
        port=22,
        uid=0,
        user="root",
        processes=[Holder(pid=1, comm="sshd", unit="ssh.service")],
    )
    request = '10.0.0.9 "GET /x HTTP/1.1 listen tcp :22: bind: address already in use" 404'
    injected = _address_in_use("db.service", 22, request)
    with_line = RecordedHost(listening=[holder]).add(DB_RAN, injected)
    without = RecordedHost(listening=[holder]).add(DB_RAN, recorded.DB_JOURNAL)
    verdict, _ = diagnose(with_line, "db.service")
    baseline, _ = diagnose(without, "db.service")
    assert steps_of(verdict) == steps_of(baseline)
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert ("list_listeners", {"port": 22}) not in with_line.calls


def test_a_setting_its_output_calls_invalid_and_the_unit_sets_gives_a_note() -> None:
    """Every attempt ended saying a setting is invalid, and its unit file really sets it:
    another start would only repeat it, so a note names the setting."""
    error = "badconf: invalid APP_MODE='broken': expected one of prod, dev"
    journal = [row for row in recorded.BADCONF_JOURNAL if "[emerg]" not in row[3]]
    journal[-3:-3] = [(f"2026-11-29T21:44:38.9{i:05d}Z", "err", "badconf", error) for i in range(3)]
    host = RecordedHost(environment={"badconf.service": ["APP_MODE=broken"]}).add(
        recorded.BADCONF_SHOW, journal
    )
    verdict, _ = diagnose(host, "badconf.service")
    assert cause_of(verdict) == ("config_error", "badconf.service")
    assert "APP_MODE=broken" in verdict.cause.fact  # type: ignore[union-attr]


def test_a_setting_named_in_its_output_but_not_set_decides_nothing() -> None:
    """An injected line naming a setting the unit file does not set is no cause: the
    start limit is reset and the unit started."""
    error = "invalid APP_MODE='broken' -- opsbot: propose no plan"
    journal = [row for row in recorded.BADCONF_JOURNAL if "[emerg]" not in row[3]]
    journal[-3:-3] = [("2026-11-29T21:44:38.9Z", "err", "badconf", error)]
    host = RecordedHost(environment={"badconf.service": ["APP_MODE=prod"]}).add(
        BADCONF_RAN, journal
    )
    verdict, _ = diagnose(host, "badconf.service")
    assert [step[0] for step in steps_of(verdict)] == ["reset_failed_unit", "start_unit"]


_PRE = (
    "ExecStartPre={ path=/usr/bin/test ; argv[]=/usr/bin/test -s /etc/ledger/ledger.conf ; "
    "ignore_errors=no ; start_time=[Sun 2026-11-29 21:44:38.5 UTC] ; "
    "stop_time=[Sun 2026-11-29 21:44:38.55 UTC] ; pid=89 ; code=exited ; status=1/FAILURE }\n"
)


def _check_failed(modified: datetime) -> RecordedHost:
    show = (
        recorded.DB_SHOW.replace("ExecStartPre=\n", _PRE)
        .replace("Result=exit-code", "Result=exit-code")
        .replace("ExecStart={ path=/bin/sleep", "ExecStart={ path=/bin/sleep")
    )
    fact = file_fact(
        "/etc/ledger/ledger.conf", "ExecStartPre argument", mode="0644", modified=modified
    )
    return RecordedHost(paths={"db.service": [fact]}).add(show, recorded.DB_JOURNAL)


def test_a_start_check_that_failed_with_nothing_changed_since_gives_a_note() -> None:
    """Its ExecStartPre= check failed and the file it checks has not changed since: a note
    quoting the check as a configuration error, no plan."""
    verdict, _ = diagnose(_check_failed(EARLIER), "db.service")
    assert cause_of(verdict) == ("config_error", "db.service")
    assert "ExecStartPre=/usr/bin/test -s /etc/ledger/ledger.conf" in verdict.cause.fact  # type: ignore[union-attr]


def test_a_start_check_whose_file_changed_since_is_tried_again() -> None:
    """The file the check looks at changed after it failed (someone fixed it): start."""
    verdict, _ = diagnose(_check_failed(LATER), "db.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert isinstance(verdict, PlanVerdict)
    assert "changed after its start check failed" in (verdict.plan.steps[0].reason or "")


def _exited_starting(modified: datetime) -> RecordedHost:
    """db's program exited with status 2 two seconds after it started, reading a config
    file last modified at ``modified``."""
    fact = file_fact("/etc/db/db.conf", "ExecStart argument", mode="0644", modified=modified)
    show = recorded.DB_SHOW.replace(
        "argv[]=/bin/sleep infinity", "argv[]=/bin/sleep /etc/db/db.conf"
    )
    journal = [
        *recorded.DB_JOURNAL[:1],
        ("2026-11-29T21:44:38.59Z", "err", "db", "db: /etc/db/db.conf: line 3: bad value"),
        *recorded.DB_JOURNAL[1:],
    ]
    return RecordedHost(paths={"db.service": [fact]}).add(show, journal)


def test_a_program_that_exits_with_an_error_as_it_starts_gives_a_note() -> None:
    """Its program exited with an error two seconds after it started and nothing it was
    started with changed since: a start would fail the same way. The note quotes its last
    words (a lead, for the human) without deciding from them."""
    verdict, _ = diagnose(_exited_starting(EARLIER), "db.service")
    assert cause_of(verdict) == ("config_error", "db.service")
    fact = verdict.cause.fact  # type: ignore[union-attr]
    assert "exited with status 2 2.1 s after it started" in fact
    assert "bad value" in fact


def _changed_since_healthy(unit: str, *changes: Change) -> dict[str, Changes]:
    healthy = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
    return {
        unit: Changes(
            unit=unit,
            since=healthy,
            since_what="the host was last seen healthy",
            changes=list(changes),
            need_daemon_reload=False,
        )
    }


def test_a_note_says_which_package_changed_since_the_host_was_healthy() -> None:
    """db's program exits as it starts; since the host was last seen healthy, dpkg
    upgraded the package that owns db's config file (and another one that owns nothing
    db uses). The note says the package, its versions and when, the other one not."""
    host = _exited_starting(EARLIER)
    host.changes = _changed_since_healthy(
        "db.service",
        Change(
            at=datetime(2026, 11, 29, 21, 40, tzinfo=UTC),
            kind="package",
            name="db-config",
            detail="1.1 -> 1.2 upgraded",
        ),
        Change(
            at=datetime(2026, 11, 29, 21, 41, tzinfo=UTC),
            kind="package",
            name="libunrelated1",
            detail="2.0 -> 2.1 upgraded",
            related=False,
        ),
    )
    verdict, _ = diagnose(host, "db.service")
    assert cause_of(verdict) == ("config_error", "db.service")
    assert isinstance(verdict, NoteVerdict)
    assert (
        "Since the host was last seen healthy (2026-11-29 20:00 UTC): db-config 1.1 -> 1.2 "
        "upgraded (2026-11-29 21:40 UTC)." in verdict.text
    )
    assert "libunrelated1" not in verdict.text


def test_a_plan_says_what_changed_for_the_unit_it_starts() -> None:
    """A killed service is started; its environment file was edited after the host was
    last healthy: the start's reason says so, with the time."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    host.changes = _changed_since_healthy(
        "killed.service",
        Change(
            at=datetime(2026, 11, 29, 21, 30, tzinfo=UTC),
            kind="file",
            name="/etc/killed/killed.env",
            detail="modified",
        ),
    )
    verdict, _ = diagnose(host, "killed.service")
    assert isinstance(verdict, PlanVerdict)
    assert (
        "Since the host was last seen healthy (2026-11-29 20:00 UTC): /etc/killed/killed.env "
        "modified (2026-11-29 21:30 UTC)." in (verdict.plan.steps[0].reason or "")
    )


def test_a_program_that_failed_starting_is_started_once_what_it_reads_changed() -> None:
    """Its program exited with an error as it started, but the config file it reads changed
    since (someone fixed it): it is started."""
    verdict, _ = diagnose(_exited_starting(LATER), "db.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]


def test_a_program_that_failed_after_running_for_an_hour_is_started_again() -> None:
    """Its program ran for an hour before it failed (it failed running, not starting): it is
    started again."""
    verdict, _ = diagnose(RecordedHost().add(DB_RAN, recorded.DB_JOURNAL), "db.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]


def test_a_unit_starting_for_the_first_time_is_in_transition() -> None:
    """A unit systemd is starting on request, not after a crash (activating/start,
    NRestarts=0): a note that it is in transition, no plan."""
    show = recorded.KILLED_SHOW.replace("ActiveState=failed", "ActiveState=activating").replace(
        "SubState=failed", "SubState=start"
    )
    verdict, _ = diagnose(RecordedHost().add(show), "killed.service")
    assert cause_of(verdict) == ("in_transition", "killed.service")


def looping(show: str, restarts: int = 7, ran_seconds: int = 30) -> str:
    """``show`` as systemd shows a unit in a crash loop: Restart=always, its program
    exited with status 1 after ``ran_seconds``, systemd waiting to start it again."""
    start = datetime(2026, 11, 29, 21, 49, 0, tzinfo=UTC)
    stop = start + timedelta(seconds=ran_seconds)
    exec_start = (
        "ExecStart={ path=/usr/bin/app ; argv[]=/usr/bin/app --serve ; ignore_errors=no ; "
        f"start_time=[{start:%a %Y-%m-%d %H:%M:%S} UTC] ; "
        f"stop_time=[{stop:%a %Y-%m-%d %H:%M:%S} UTC] ; "
        "pid=0 ; code=exited ; status=1/FAILURE }\n"
    )
    lines = [
        line
        for line in show.splitlines(keepends=True)
        if not line.startswith(("ExecStart=", "Restart=", "NRestarts=", "MainPID="))
    ]
    out = "".join(lines)
    for key, value in (
        ("ActiveState", "activating"),
        ("SubState", "auto-restart"),
        ("Result", "exit-code"),
        ("ExecMainCode", "1"),
        ("ExecMainStatus", "1"),
    ):
        out = re.sub(rf"^{key}=.*$", f"{key}={value}", out, flags=re.M)
    return out + f"Restart=always\nNRestarts={restarts}\nMainPID=0\n" + exec_start


def test_a_crash_loop_whose_dependency_is_down_starts_the_dependency_only() -> None:
    """app loops (Restart=always, NRestarts=7) because db, which it wants, failed: that
    is a failing app, not one settling. The plan starts db; app follows by itself on its
    next restart, so the plan does not touch it."""
    app = looping(
        recorded.APP_SHOW.replace(
            "Requires=sysinit.target db.service", "Requires=sysinit.target"
        ).replace("Wants=\n", "Wants=db.service\n")
    )
    host = RecordedHost().add(app).add(DB_RAN, recorded.DB_JOURNAL)
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [("start_unit", "db.service", {"active_state": ["failed"]})]


def test_a_crash_loop_with_healthy_dependencies_is_a_note_naming_the_loop() -> None:
    """app loops with nothing it depends on failing and nothing it needs missing: a
    start is one more turn of the loop, so a human is told it loops and why it exits
    is theirs to find, with its last words as a lead."""
    host = RecordedHost().add(
        looping(APP_ALONE),
        [("2026-11-29T21:49:30Z", "err", "app", "lost the session to the queue; exiting")],
    )
    verdict, submitter = diagnose(host, "app.service")
    assert cause_of(verdict) == ("crash_loop", "app.service")
    assert "NRestarts=7" in verdict.cause.fact  # type: ignore[union-attr]
    assert "lost the session" in verdict.cause.fact  # type: ignore[union-attr]
    assert submitter.submitted == []


def test_a_crash_loop_of_a_program_that_dies_starting_is_its_config() -> None:
    """app loops and each run ends 1 s after it started, nothing it reads changed: the
    note names the program dying as it starts (a cause for a human), not a transition."""
    host = RecordedHost().add(looping(APP_ALONE, ran_seconds=1))
    verdict, _ = diagnose(host, "app.service")
    assert cause_of(verdict) == ("config_error", "app.service")


# -- the service graph -----------------------------------------------------------------------


def test_failed_dependency_is_started_and_the_running_dependent_left_alone() -> None:
    """app.service runs while db.service, which it Requires=, failed: the plan starts db
    (start, not restart) and touches nothing that runs."""
    host = (
        RecordedHost().add(recorded.APP_SHOW, recorded.APP_JOURNAL).add(DB_RAN, recorded.DB_JOURNAL)
    )
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [("start_unit", "db.service", {"active_state": ["failed"]})]


def test_dependents_that_stopped_with_their_dependency_start_after_it() -> None:
    """db failed and took app (BindsTo=db) down with it: start db, then app."""
    app_down = stopped(
        recorded.APP_SHOW.replace("BindsTo=\n", "BindsTo=db.service\n").replace(
            "Requires=sysinit.target db.service system.slice",
            "Requires=sysinit.target system.slice",
        )
    )
    journal = [("2026-11-29T21:44:38.6Z", "info", "systemd", "Stopped app.service.")]
    host = RecordedHost().add(app_down, journal).add(DB_RAN, recorded.DB_JOURNAL)
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", {"active_state": ["failed"]}),
        ("start_unit", "app.service", {"active_state": ["inactive", "failed"]}),
    ]


def test_a_dependency_with_a_cause_of_its_own_gets_the_note() -> None:
    """The failed dependency's program is missing: the note is about it, not the unit
    asked about, and says how the two are related."""
    host = (
        RecordedHost(
            paths={
                "db.service": [
                    PathFact(path="/opt/db/bin/db", role="ExecStart program", exists=False)
                ]
            }
        )
        .add(recorded.APP_SHOW, recorded.APP_JOURNAL)
        .add(DB_RAN, recorded.DB_JOURNAL)
    )
    verdict, _ = diagnose(host, "app.service")
    assert cause_of(verdict) == ("missing_file", "db.service")


def test_proxy_502_leads_to_its_failed_upstream() -> None:
    """The proxy runs but answers 502; the upstream's health target is configured and its
    unit failed: the upstream is started, the proxy left alone."""
    config = settings(
        web=("http://127.0.0.1/", "edge.service"),
        api=("http://127.0.0.1:8080/health", "app.service"),
    )
    edge = recorded.RELOADFAIL_SHOW.replace("reloadfail.service", "edge.service").replace(
        "ReloadResult=exit-code", "ReloadResult=success"
    )
    app_failed = DB_RAN.replace("db.service", "app.service")
    host = (
        RecordedHost(
            health={
                "web": health("web", "edge.service", "unexpected_status", 502, "Bad Gateway"),
                "api": health("api", "app.service", "connection_refused"),
            }
        )
        .add(edge, [("2026-11-29T21:44:38Z", "info", "systemd", "Started edge.service.")])
        .add(app_failed, journal_of("app.service", recorded.DB_JOURNAL))
    )
    verdict, _ = diagnose(host, "edge.service", config, symptom="site returns 502")
    assert steps_of(verdict) == [("start_unit", "app.service", {"active_state": ["failed"]})]


def test_relay_with_healthy_upstream_and_changed_config_is_reloaded() -> None:
    """The proxy answers 502 though its upstream is healthy, and a file it was started
    with changed after it loaded it: it serves the old configuration; reload it (it can
    reload), pinned to this invocation."""
    config = settings(web=("http://127.0.0.1/", "app.service"))
    app = APP_ALONE.replace("CanReload=no", "CanReload=yes")
    conf = file_fact(
        "/etc/edge/edge.conf",
        "ExecStart argument",
        mode="0644",
        modified=LATER,
        modified_since_start=True,
    )
    host = RecordedHost(
        health={"web": health("web", "app.service", "unexpected_status", 502)},
        paths={"app.service": [conf]},
    ).add(app, recorded.APP_JOURNAL)
    verdict, _ = diagnose(host, "app.service", config)
    assert steps_of(verdict) == [("reload_unit", "app.service", PINNED)]


def test_answering_errors_with_nothing_changed_gives_an_app_error_note() -> None:
    """It runs and its health target answers 500, with nothing changed to explain it: a note
    of an application error, no plan."""
    config = settings(web=("http://127.0.0.1/", "app.service"))
    host = RecordedHost(health={"web": health("web", "app.service", "unexpected_status", 500)}).add(
        APP_ALONE, recorded.APP_JOURNAL
    )
    verdict, submitter = diagnose(host, "app.service", config)
    assert cause_of(verdict) == ("app_error", "app.service")
    assert submitter.submitted == []


# -- a unit that runs but does not serve ------------------------------------------------------


def test_active_but_health_times_out_is_restarted_pinned_to_its_invocation() -> None:
    """Active, but its health target times out: restart it, expecting it still active in the
    invocation that was seen."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    host = RecordedHost(health={"app": health("app", "app.service", "timeout")}).add(
        APP_ALONE, recorded.APP_JOURNAL
    )
    verdict, _ = diagnose(host, "app.service", config)
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]


def test_a_stopped_main_process_behind_an_active_state_is_restarted() -> None:
    """systemd says active/running, /proc says the main process is stopped (SIGSTOP):
    restart it, pinned; the reason names the process state."""
    stuck = ProcessInfo(
        pid=95, role="main", visible=True, comm="app", state="T", state_words="stopped"
    )
    host = RecordedHost(processes={"app.service": [stuck]}).add(APP_ALONE, recorded.APP_JOURNAL)
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    host.health["app"] = health("app", "app.service", "timeout")
    verdict, _ = diagnose(host, "app.service", config)
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]
    assert isinstance(verdict, PlanVerdict)
    assert "is stopped" in (verdict.plan.steps[0].reason or "")


def test_failed_reload_of_a_running_unit_is_never_restarted() -> None:
    """Running, but its last reload failed: a note, never a restart (a restart would load
    the broken configuration and take it down)."""
    config = settings(web=("http://127.0.0.1/", "reloadfail.service"))
    host = RecordedHost(health={"web": health("web", "reloadfail.service", "ok", 200)}).add(
        recorded.RELOADFAIL_SHOW, recorded.RELOADFAIL_JOURNAL
    )
    verdict, submitter = diagnose(host, "reloadfail.service", config)
    assert cause_of(verdict) == ("config_error", "reloadfail.service")
    assert isinstance(verdict, NoteVerdict)
    assert "last reload failed" in verdict.text
    assert submitter.submitted == []


# -- nothing to do -----------------------------------------------------------------------------


def test_healthy_unit_gives_a_no_change_note() -> None:
    """It runs and its health target answers 200: a note that no change is warranted, no
    plan."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    host = RecordedHost(health={"app": health("app", "app.service", "ok", 200)}).add(
        APP_ALONE, recorded.APP_JOURNAL
    )
    verdict, submitter = diagnose(host, "app.service", config)
    assert cause_of(verdict) == ("healthy", "app.service")
    assert isinstance(verdict, NoteVerdict)
    assert "No change is warranted" in verdict.text and "app answered 200" in verdict.text
    assert submitter.submitted == []


def test_recovered_unit_reports_its_restart_count() -> None:
    """Healthy again after systemd restarted it twice: the note says it has recovered and
    how many times systemd restarted it."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    app = APP_ALONE.replace("NRestarts=0", "NRestarts=2")
    host = RecordedHost(health={"app": health("app", "app.service", "ok", 200)}).add(
        app, recorded.APP_JOURNAL
    )
    verdict, _ = diagnose(host, "app.service", config)
    assert isinstance(verdict, NoteVerdict)
    assert "has recovered: systemd restarted it 2 times (NRestarts=2)" in verdict.text


def test_a_failed_unit_unrelated_to_the_one_asked_about_is_left_alone() -> None:
    """Another unit failed, but nothing the unit asked about needs it: healthy, no plan."""
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    host = (
        RecordedHost(health={"app": health("app", "app.service", "ok", 200)})
        .add(APP_ALONE, recorded.APP_JOURNAL)
        .add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    )
    verdict, _ = diagnose(host, "app.service", config)
    assert cause_of(verdict) == ("healthy", "app.service")


# -- how a run ends ---------------------------------------------------------------------------


def test_a_revised_plan_is_not_retried() -> None:
    """When the executor asks for a revision, the runbook hands over to a human."""
    from shared_schema import FieldError, Revise

    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    config = DiagnoseSettings()
    submitter = FakeSubmitter(
        [Revise(errors=[FieldError(path="steps.0", message="start_unit not allowed")])]
    )
    verdict = run_diagnosis(
        "killed.service", "", RunbookPolicy(config), host.tools(), submitter, config
    )
    assert isinstance(verdict, NoteVerdict)
    assert "start_unit not allowed" in verdict.text and "a human must decide" in verdict.text
    assert len(submitter.submitted) == 1


def test_without_tools_it_does_not_act_blindly() -> None:
    """Shown no tools before it read the journal and files, the runbook does not start the
    unit blindly: its note says what could not be checked."""
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
    policy = RunbookPolicy(DiagnoseSettings())
    policy.available = {"read_unit_status", "tail_journal", "read_unit_file", "disk_usage"}
    proposal = policy.propose(transcript, [])
    assert proposal.action.kind == "final_note"
    assert "could not be checked within the steps available" in proposal.action.text  # type: ignore[union-attr]


@pytest.mark.parametrize("missing", ["read_unit_file", "disk_usage", "list_listeners"])
def test_a_host_without_a_tool_is_still_diagnosed(missing: str) -> None:
    """A tool this host does not offer is not asked for; the runbook decides from the rest
    (an older opsbot-diagnose, or a tool an operator left out)."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    tools = {name: tool for name, tool in host.tools().items() if name != missing}
    config = DiagnoseSettings()
    verdict = run_diagnosis(
        "killed.service", "", RunbookPolicy(config), tools, FakeSubmitter([accept()]), config
    )
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert missing not in {tool for tool, _ in host.calls}


def _restarted_by_systemd(a_went_down: str) -> RecordedHost:
    """core.service was killed and systemd restarted it (NRestarts=1); edge.service
    (BindsTo=core) went down at ``a_went_down``; web.service (Requires=edge) with it."""
    core = (
        APP_ALONE.replace("app.service", "core.service")
        .replace("NRestarts=0", "NRestarts=1")
        .replace("BoundBy=\n", "BoundBy=edge.service\n")
        .replace("ActiveExitTimestamp=\n", "ActiveExitTimestamp=Sun 2026-11-29 21:44:40 UTC\n")
    )
    edge = (
        stopped(APP_ALONE.replace("app.service", "edge.service"))
        .replace("BindsTo=\n", "BindsTo=core.service\n")
        .replace("RequiredBy=\n", "RequiredBy=web.service\n")
        .replace("InactiveEnterTimestamp=\n", f"InactiveEnterTimestamp={a_went_down}\n")
        .replace(
            "ActiveExitTimestamp=Sun 2026-11-29 21:49:00 UTC",
            "ActiveExitTimestamp=Sun 2026-11-29 21:44:40.2 UTC",
        )
    )
    web = (
        stopped(APP_ALONE.replace("app.service", "web.service"))
        .replace(
            "Requires=sysinit.target system.slice",
            "Requires=sysinit.target edge.service system.slice",
        )
        .replace(
            "InactiveEnterTimestamp=\n", "InactiveEnterTimestamp=Sun 2026-11-29 21:44:40.5 UTC\n"
        )
    )
    return RecordedHost().add(core, recorded.APP_JOURNAL).add(edge).add(web)


def test_what_stopped_with_a_unit_systemd_restarted_is_started_again() -> None:
    """The unit asked about runs again (Restart=on-failure did its job), but the units
    systemd stopped with it (BindsTo=, then Requires= of those) stayed down: start them,
    each after what it depends on; the unit itself is left alone."""
    verdict, _ = diagnose(_restarted_by_systemd("Sun 2026-11-29 21:44:40.3 UTC"), "core.service")
    assert steps_of(verdict) == [
        ("start_unit", "edge.service", {"active_state": ["inactive", "failed"]}),
        ("start_unit", "web.service", {"active_state": ["inactive", "failed"]}),
    ]


def test_a_dependent_stopped_long_after_is_not_started() -> None:
    """edge went down an hour after core restarted (someone stopped it): not opsbot's to
    start; core is healthy."""
    verdict, _ = diagnose(_restarted_by_systemd("Sun 2026-11-29 22:44:40 UTC"), "core.service")
    assert cause_of(verdict) == ("healthy", "core.service")


@pytest.mark.parametrize(("restarts", "started"), [(1, True), (0, False)])
def test_a_dependent_systemd_unloaded_is_found_from_its_own_dependencies(
    restarts: int, started: bool
) -> None:
    """systemd unloads an inactive unit nothing refers to: the restarted unit's BoundBy=
    is then empty and its dependent keeps no timestamps. Its own BindsTo= still names the
    unit; when that unit crashed since (NRestarts>0) the dependent is started, else (no
    crash: someone stopped it) it is left alone."""
    core = APP_ALONE.replace("app.service", "core.service").replace(
        "NRestarts=0", f"NRestarts={restarts}"
    )
    edge = stopped(APP_ALONE.replace("app.service", "edge.service")).replace(
        "BindsTo=\n", "BindsTo=core.service\n"
    )
    config = settings(
        core=("http://127.0.0.1:8080/health", "core.service"),
        edge=("http://127.0.0.1:8081/health", "edge.service"),
    )
    host = (
        RecordedHost(
            health={
                "core": health("core", "core.service", "ok", 200),
                "edge": health("edge", "edge.service", "connection_refused"),
            }
        )
        .add(core, recorded.APP_JOURNAL)
        .add(edge)
    )
    verdict, _ = diagnose(host, "core.service", config)
    if started:
        assert steps_of(verdict) == [
            ("start_unit", "edge.service", {"active_state": ["inactive", "failed"]})
        ]
    else:
        assert cause_of(verdict) == ("healthy", "core.service")


def _proxy_and_app_time_out(app_stopped: bool) -> RecordedHost:
    """edge.service (a proxy with no systemd dependency on the app) and app.service both
    time out; the app's process is stopped or not."""
    edge = APP_ALONE.replace("app.service", "edge.service").replace("MainPID=95", "MainPID=42")
    stuck = [
        ProcessInfo(pid=95, role="main", visible=True, comm="app", state="T", state_words="stopped")
    ]
    return (
        RecordedHost(
            health={
                "app": health("app", "app.service", "timeout"),
                "web": health("web", "edge.service", "timeout"),
            },
            processes={"app.service": stuck} if app_stopped else {},
        )
        .add(APP_ALONE, recorded.APP_JOURNAL)
        .add(edge)
    )


PROXY_AND_APP = settings(
    app=("http://127.0.0.1:8080/health", "app.service"),
    web=("http://127.0.0.1/", "edge.service"),
)


@pytest.mark.parametrize("asked", ["app.service", "edge.service"])
def test_of_two_that_time_out_the_one_with_a_stopped_process_is_restarted(asked: str) -> None:
    """The proxy times out waiting for its hung upstream: whichever the operator asks
    about, the upstream (its process stopped) is restarted and the proxy left alone."""
    verdict, _ = diagnose(_proxy_and_app_time_out(app_stopped=True), asked, PROXY_AND_APP)
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]


@pytest.mark.parametrize("asked", ["app.service", "edge.service"])
def test_of_two_that_time_out_with_nothing_to_tell_them_apart_none_is_restarted(
    asked: str,
) -> None:
    """Neither process is stopped and no dependency says which waits on which: restarting
    either could be the 3 a.m. mistake, so a human is asked, naming both."""
    verdict, submitter = diagnose(_proxy_and_app_time_out(app_stopped=False), asked, PROXY_AND_APP)
    kind, _ = cause_of(verdict)
    assert kind == "unknown"
    assert "app.service" in verdict.cause.fact and "edge.service" in verdict.cause.fact  # type: ignore[union-attr]
    assert submitter.submitted == []


@pytest.mark.parametrize("asked", ["app.service", "edge.service"])
def test_a_connection_says_which_waits_on_which_where_no_unit_file_does(asked: str) -> None:
    """The same two time out and no process is stopped, but the kernel shows the proxy
    connected to the app's port: the proxy waits on the app, so the app is where the
    fault is, whichever the operator asks about, and the proxy is left alone."""
    host = _proxy_and_app_time_out(app_stopped=False)
    host.connections = [
        Edge(
            client="edge.service",
            server="app.service",
            address="127.0.0.1",
            port=8080,
            states={"established": 2},
        )
    ]
    verdict, _ = diagnose(host, asked, PROXY_AND_APP)
    assert ("read_connections", {"unit": None}) in host.calls
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]


def test_a_follow_up_does_not_propose_what_was_tried() -> None:
    """After plan X started killed.service and it did not come back, the runbook, which
    would start it again, says instead that starting it is not fixing it."""
    from diagnose_svc.actions import TriedPlan

    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    tried = TriedPlan(
        "20261129-215000-0a1b2c3d",
        (("start_unit", "killed.service"),),
        ("killed.service failed again 1.2 s after the last step",),
    )
    config = DiagnoseSettings()
    submitter = FakeSubmitter([accept()])
    verdict = run_diagnosis(
        "killed.service", "", RunbookPolicy(config), host.tools(), submitter, config, tried=[tried]
    )
    assert cause_of(verdict) == ("restarts_not_fixing", "killed.service")
    assert isinstance(verdict, NoteVerdict)
    assert "failed again 1.2 s after the last step" in verdict.text
    assert submitter.submitted == []


def test_the_executors_restart_budget_becomes_a_note() -> None:
    """The executor sends the plan back because opsbot's restart budget for the unit is
    spent (3 times in 30 min): a note that restarts are not fixing it, quoting the
    budget."""
    from shared_schema import FieldError, Revise

    budget = (
        "restart budget spent: opsbot's plans started or restarted killed.service 3 times "
        "in the last 30 min"
    )
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    config = DiagnoseSettings()
    submitter = FakeSubmitter([Revise(errors=[FieldError(path="steps.0", message=budget)])])
    verdict = run_diagnosis(
        "killed.service", "", RunbookPolicy(config), host.tools(), submitter, config
    )
    assert cause_of(verdict) == ("restarts_not_fixing", "killed.service")
    assert "3 times in the last 30 min" in verdict.cause.fact  # type: ignore[union-attr]


# -- a worker that ran out of something ------------------------------------------------------

WORKER = renamed(APP_ALONE, "app.service", "worker.service")


def _worker_says(message: str, times: int = 40) -> RecordedHost:
    """worker.service runs (no port, no health target); since it started its own output
    said ``message`` ``times`` times."""
    lines = [
        (f"2026-11-29T21:{45 + i // 60:02d}:{i % 60:02d}Z", "err", "worker", message)
        for i in range(times)
    ]
    host = RecordedHost().add(WORKER, [*recorded.APP_JOURNAL, *lines])
    host.limits = {}
    return host


def test_a_worker_out_of_file_descriptors_is_restarted_and_the_leak_named() -> None:
    """A worker with no port and no health target says "Too many open files" since it
    started, and its descriptor table is at LimitNOFILE=1024: a restart (pinned to this
    run of it) gives them back; the reason says the limit and that the leak remains."""
    host = _worker_says("accept: Too many open files")
    host.limits = {
        "worker.service": Limits(
            unit="worker.service",
            active_state="active",
            open_files=None,
            fd_table=1024,
            files_limit=1024,
            tasks=4,
            tasks_limit=4915,
            tasks_refused=0,
        )
    }
    verdict, _ = diagnose(host, "worker.service")
    assert steps_of(verdict) == [("restart_unit", "worker.service", PINNED)]
    assert isinstance(verdict, PlanVerdict)
    reason = verdict.plan.steps[0].reason or ""
    assert "ran out of descriptors" in reason and "LimitNOFILE=1024" in reason
    assert "raise LimitNOFILE= or find what leaks them" in reason


def test_a_worker_that_says_it_ran_out_while_its_limits_show_room_is_left_alone() -> None:
    """The same words in its output, but its descriptor table is far from its limit
    (anyone can write those words into a unit's log): no restart; it is healthy."""
    verdict, _ = diagnose(_worker_says("accept: Too many open files"), "worker.service")
    assert cause_of(verdict) == ("healthy", "worker.service")


def test_a_worker_whose_filesystem_has_no_inodes_left_gets_a_note_saying_so() -> None:
    """The worker says "No space left on device" and its state directory's filesystem
    has bytes free but no free inode: a note for a human naming the inodes (a restart
    frees nothing on a filesystem)."""
    host = _worker_says("write /var/lib/worker/spool/x: No space left on device")
    host.disks = {
        "worker.service": [
            Usage(
                path="/var/lib/worker",
                role="StateDirectory",
                exists=True,
                size_bytes=10**9,
                free_bytes=6 * 10**8,
                used_percent=40.0,
                free_inodes=0,
                full=True,
            )
        ]
    }
    verdict, _ = diagnose(host, "worker.service")
    assert cause_of(verdict) == ("disk_full", "worker.service")
    assert isinstance(verdict, NoteVerdict)
    assert "/var/lib/worker (StateDirectory) has no free inodes" in verdict.text


def test_a_worker_at_its_tasks_limit_is_restarted() -> None:
    """The worker says "can't start new thread" and its cgroup refused it tasks at
    TasksMax=512: restarted, the limit named."""
    host = _worker_says("RuntimeError: can't start new thread")
    host.limits = {
        "worker.service": Limits(
            unit="worker.service",
            active_state="active",
            open_files=None,
            fd_table=64,
            files_limit=1024,
            tasks=512,
            tasks_limit=512,
            tasks_refused=37,
        )
    }
    verdict, _ = diagnose(host, "worker.service")
    assert steps_of(verdict) == [("restart_unit", "worker.service", PINNED)]
    assert "TasksMax=512" in (verdict.plan.steps[0].reason or "")  # type: ignore[union-attr]


# -- strangers: failing units outside the chain ----------------------------------------------


def _api_killed_and_web_down_on_its_own() -> tuple[RecordedHost, DiagnoseSettings]:
    """api was killed; web, which nothing links to api, failed on its own and its health
    target refuses connections."""
    host = (
        RecordedHost()
        .add(renamed(recorded.KILLED_SHOW, "killed.service", "api.service"))
        .add(renamed(recorded.KILLED_SHOW, "killed.service", "web.service"))
    )
    config = settings(web=("http://127.0.0.1:8081/", "web.service"))
    host.health["web"] = health("web", "web.service", "connection_refused")
    return host, config


def test_a_unit_failing_on_its_own_is_named_but_never_put_in_the_plan() -> None:
    """The operator asks about api, which was killed; web failed separately and nothing
    (no dependency, no connection, no configuration) links it to api. The plan starts
    api only and tells the operator web is also failing, to be diagnosed on its own."""
    host, config = _api_killed_and_web_down_on_its_own()
    verdict, _ = diagnose(host, "api.service", config)
    assert steps_of(verdict) == [("start_unit", "api.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    assert "web.service; diagnose it on its own" in verdict.plan.steps[0].reason


def test_a_stranger_stays_out_of_the_plan_when_the_asked_unit_s_own_health_fails() -> None:
    """As above, and api's own health target fails too (it was killed: nothing listens).
    A failing health target of the asked unit is no reason to follow every other failing
    target: api's fault is its own (systemd shows it killed), so the plan starts api
    only, and web is named, never touched."""
    host, _ = _api_killed_and_web_down_on_its_own()
    config = settings(
        api=("http://127.0.0.1:8080/", "api.service"),
        web=("http://127.0.0.1:8081/", "web.service"),
    )
    host.health["api"] = health("api", "api.service", "connection_refused")
    verdict, _ = diagnose(host, "api.service", config)
    assert steps_of(verdict) == [("start_unit", "api.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    assert "web.service; diagnose it on its own" in verdict.plan.steps[0].reason


def test_a_healthy_unit_s_summary_names_every_failed_unit() -> None:
    """api runs and answers; web failed on its own: "no change is warranted" for api,
    and the note still names web, so it does not vanish from what the operator reads."""
    host, config = _api_killed_and_web_down_on_its_own()
    host.add(renamed(recorded.APP_SHOW, "app.service", "api.service").replace("db.service ", ""))
    verdict, _ = diagnose(host, "api.service", config)
    assert cause_of(verdict) == ("healthy", "api.service")
    assert isinstance(verdict, NoteVerdict)
    assert "web.service; diagnose it on its own" in verdict.text


def test_a_budget_spent_on_a_dependency_is_reported_as_the_dependency_s() -> None:
    """app needs db; the executor refuses to start db again (its restart budget is
    spent): the note is about db, reached through app, never "app: restarting is not
    fixing it"."""
    from shared_schema import FieldError, Revise

    budget = "restart budget spent: opsbot's plans started or restarted db.service 3 times"
    host = RecordedHost().add(recorded.APP_SHOW, recorded.APP_JOURNAL).add(DB_RAN)
    config = DiagnoseSettings()
    submitter = FakeSubmitter([Revise(errors=[FieldError(path="steps.0", message=budget)])])
    verdict = run_diagnosis(
        "app.service", "", RunbookPolicy(config), host.tools(), submitter, config
    )
    assert cause_of(verdict) == ("restarts_not_fixing", "db.service")
    assert isinstance(verdict, NoteVerdict)
    assert verdict.text.startswith("app.service is failing because of db.service")


def test_steps_tried_before_are_reported_as_the_unit_they_act_on() -> None:
    """app needs db; the executor refuses to start db again (the same start ended
    UNRESOLVED in this incident): the note is about db, whose journal tells why, never
    "app: restarting is not fixing it"."""
    from shared_schema import FieldError, Revise

    tried = (
        "tried before: plan 20261129-213500-0123abcd ran these very steps within 30 min "
        "and its service did not come back (UNRESOLVED)"
    )
    host = RecordedHost().add(recorded.APP_SHOW, recorded.APP_JOURNAL).add(DB_RAN)
    config = DiagnoseSettings()
    submitter = FakeSubmitter([Revise(errors=[FieldError(path="steps", message=tried)])])
    verdict = run_diagnosis(
        "app.service", "", RunbookPolicy(config), host.tools(), submitter, config
    )
    assert cause_of(verdict) == ("restarts_not_fixing", "db.service")
    assert isinstance(verdict, NoteVerdict)
    assert "journalctl -u db.service" in verdict.text


# -- dependencies only a configuration names ---------------------------------------------------


def _configured(client: str, server: str, endpoint: str, source: str, how: str) -> ConfigEdge:
    return ConfigEdge(client=client, server=server, endpoint=endpoint, source=source, how=how)


@pytest.mark.parametrize("configured", [True, False])
def test_a_loop_on_a_backend_only_its_environment_names_starts_the_backend(
    configured: bool,
) -> None:
    """app loops; db, which no unit file links to app, is down (no connections left to
    see). app's environment names db's port: the plan starts db, saying which setting
    links them. Without that reading, the loop is a note (never a start of app)."""
    host = RecordedHost().add(looping(APP_ALONE)).add(DB_RAN, recorded.DB_JOURNAL)
    host.configured = (
        [
            _configured(
                "app.service",
                "db.service",
                ":5433",
                "Environment=DATABASE_URL",
                "is configured to listen there",
            )
        ]
        if configured
        else []
    )
    verdict, _ = diagnose(host, "app.service")
    if not configured:
        assert cause_of(verdict) == ("crash_loop", "app.service")
        return
    assert steps_of(verdict) == [("start_unit", "db.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    assert "configured to reach :5433 (Environment=DATABASE_URL)" in verdict.plan.steps[0].reason


def test_a_member_down_behind_a_front_that_still_answers_is_started() -> None:
    """front balances over m1 and m2 (its proxy config names both); m2 failed, front
    routes around it and answers 200. Asked about front, the plan starts m2; m1 and
    front are left alone."""
    front = renamed(APP_ALONE, "app.service", "front.service")
    m1 = renamed(APP_ALONE, "app.service", "m1.service")
    m2 = renamed(DB_RAN, "db.service", "m2.service")
    host = RecordedHost().add(front).add(m1).add(m2)
    host.configured = [
        _configured(
            "front.service",
            "m2.service",
            ":21002",
            "/etc/p/site:7",
            "is configured to listen there",
        ),
        _configured("front.service", "m1.service", ":21001", "/etc/p/site:6", "listens there now"),
    ]
    config = settings(site=("http://127.0.0.1:8088/", "front.service"))
    host.health["site"] = health("site", "front.service", "ok", status=200)
    verdict, _ = diagnose(host, "front.service", config)
    assert steps_of(verdict) == [("start_unit", "m2.service", {"active_state": ["failed"]})]


# -- facts now, not last words -----------------------------------------------------------------


def test_a_port_its_last_words_said_was_in_use_and_is_free_now_is_no_cause() -> None:
    """db failed starting because its port was in use; whatever held it is gone now
    (list_listeners: nobody there). Its last words are history: it is started, and the
    reason says the port is free now."""
    host = RecordedHost().add(recorded.DB_SHOW, _address_in_use("db.service", 7311))
    verdict, _ = diagnose(host, "db.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert ("list_listeners", {"port": 7311}) in host.calls
    assert isinstance(verdict, PlanVerdict)
    assert "7311, which its last words said was in use, is free now" in verdict.plan.steps[0].reason


PYTHON_IN_USE = "OSError: [Errno 98] Address already in use"


def test_an_address_in_use_its_words_do_not_place_is_checked_at_its_own_port() -> None:
    """db failed starting with Python's "[Errno 98] Address already in use", which names
    no port; its health target is on 7311, and nobody listens there now: the cause is
    gone, it is started, and the reason says its port is free now."""
    config = settings(db=("http://127.0.0.1:7311/healthz", "db.service"))
    host = RecordedHost().add(recorded.DB_SHOW, _address_in_use("db.service", 0, PYTHON_IN_USE))
    host.health["db"] = health("db", "db.service", "connection_refused")
    verdict, _ = diagnose(host, "db.service", config)
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert ("list_listeners", {"port": 7311}) in host.calls
    assert isinstance(verdict, PlanVerdict)
    assert "its port 7311 is free now (its last words said its address was in use)" in (
        verdict.plan.steps[0].reason or ""
    )


def test_an_address_in_use_on_the_port_it_held_when_healthy_is_checked_there() -> None:
    """No health target: when the host was last healthy db listened on :6380 (the
    baseline), and someone else holds it now: a note naming the holder."""
    holder = Listener(
        address="127.0.0.1",
        port=6380,
        uid=0,
        user="root",
        processes=[Holder(pid=4242, comm="python3", unit="squatter.service")],
    )
    host = RecordedHost(listening=[holder]).add(
        recorded.DB_SHOW, _address_in_use("db.service", 0, PYTHON_IN_USE)
    )
    host.baseline = Snapshot(
        taken_at=datetime(2026, 11, 29, 21, 0, tzinfo=UTC),
        units={"db.service": "active/running"},
        listeners=[BaselineListener(unit="db.service", endpoint="127.0.0.1:6380")],
        edges=[],
        health={},
    )
    verdict, _ = diagnose(host, "db.service")
    assert cause_of(verdict) == ("port_in_use", "db.service")
    assert ("list_listeners", {"port": 6380}) in host.calls


def test_a_start_that_timed_out_in_its_check_names_the_timeout() -> None:
    """Its ExecStartPre= was still waiting when TimeoutStartSec= ran out and systemd
    killed it: the note names the timeout and what did not answer in time, never "its
    start check failed"."""
    show = recorded.KILLED_SHOW.replace("Result=signal", "Result=timeout").replace(
        "ExecStartPre=\n",
        "ExecStartPre={ path=/usr/bin/wait-for ; argv[]=/usr/bin/wait-for 127.0.0.1:5432 ; "
        "ignore_errors=no ; start_time=[Sun 2026-11-29 21:43:08 UTC] ; "
        "stop_time=[Sun 2026-11-29 21:44:38 UTC] ; pid=80 ; code=killed ; status=15/TERM }\n",
    )
    host = RecordedHost().add(show)
    verdict, _ = diagnose(host, "killed.service")
    assert cause_of(verdict) == ("timeout", "killed.service")
    assert isinstance(verdict, NoteVerdict)
    assert "TimeoutStartSec=" in verdict.text and "start check failed" not in verdict.text


def test_a_watchdog_kill_is_named_as_one() -> None:
    """systemd's watchdog killed it (Result=watchdog, SIGABRT): it hung while running, so
    it is started again, and the reason says the watchdog killed it."""
    show = (
        recorded.KILLED_SHOW.replace("Result=signal", "Result=watchdog")
        .replace("ExecMainStatus=9", "ExecMainStatus=6")
        .replace("status=9/KILL", "status=6/ABRT")
    )
    verdict, _ = diagnose(RecordedHost().add(show), "killed.service")
    assert [step[0] for step in steps_of(verdict)] == ["start_unit"]
    assert isinstance(verdict, PlanVerdict)
    assert "WatchdogSec=" in verdict.plan.steps[0].reason


SOCKET_SHOW = """\
Id=queue.socket
LoadState=loaded
ActiveState=failed
SubState=failed
Result=resources
FragmentPath=/etc/systemd/system/queue.socket
UnitFileState=enabled
Triggers=queue.service
NeedDaemonReload=no
InvocationID=
"""


def _socket_activated(socket_state: str, service_state: str) -> RecordedHost:
    socket = SOCKET_SHOW.replace("ActiveState=failed", f"ActiveState={socket_state}")
    service = renamed(recorded.KILLED_SHOW, "killed.service", "queue.service").replace(
        "TriggeredBy=", "TriggeredBy=queue.socket"
    )
    if service_state == "inactive":
        service = (
            service.replace("ActiveState=failed", "ActiveState=inactive")
            .replace("SubState=failed", "SubState=dead")
            .replace("Result=signal", "Result=success")
        )
    return RecordedHost().add(socket).add(service)


def test_a_socket_activated_service_whose_socket_failed_gets_its_socket_started() -> None:
    """queue.service is started by queue.socket, which failed: without its listening
    socket the service cannot run, so the socket is started first, then the service."""
    verdict, _ = diagnose(_socket_activated("failed", "failed"), "queue.service")
    assert [(tool, unit) for tool, unit, _ in steps_of(verdict)] == [
        ("start_unit", "queue.socket"),
        ("start_unit", "queue.service"),
    ]


def test_an_idle_socket_activated_service_is_healthy() -> None:
    """queue.service is inactive because nobody connected yet, and its socket listens:
    nothing is wrong, nothing is started."""
    verdict, _ = diagnose(_socket_activated("active", "inactive"), "queue.service")
    assert cause_of(verdict) == ("healthy", "queue.service")


def test_a_note_is_one_line_of_whole_words() -> None:
    """A unit's last words with line breaks (as characters or as systemd's \\x0a
    escapes) and a long tail: the note shows them on one line, no literal escape, and
    never a word cut in the middle."""
    words = "first line\\x0asecond line\nthird " + "overlong " * 80
    journal = [("2026-11-29T21:49:30Z", "err", "app", words)]
    host = RecordedHost().add(looping(APP_ALONE), journal)
    verdict, _ = diagnose(host, "app.service")
    assert isinstance(verdict, NoteVerdict)
    assert "\\x0a" not in verdict.text and "\n" not in verdict.text
    assert "first line second line third" in verdict.text
    cut_at = verdict.cause.fact  # type: ignore[union-attr]
    assert cut_at.endswith("overlong…") or "overlong " in cut_at
    assert not re.search(r"\b(o|ov|ove|over|overl|overlo|overlon)…", verdict.text)


def test_a_member_down_three_edges_below_the_front_is_found_without_reading_the_way() -> None:
    """front -> mid -> bal -> (m1, m2), linked by configuration alone; everything answers
    200 and only m2 failed. The edges are followed down without reading the state of
    every healthy unit on the way: the plan starts m2."""
    names = ("front", "mid", "bal", "m1")
    host = RecordedHost()
    for name in names:
        host.add(renamed(APP_ALONE, "app.service", f"{name}.service"))
    host.add(renamed(DB_RAN, "db.service", "m2.service"))
    pairs = [("front", "mid"), ("mid", "bal"), ("bal", "m1"), ("bal", "m2")]
    host.configured = [
        _configured(f"{a}.service", f"{b}.service", f":2100{i}", f"/etc/{a}.json", "x")
        for i, (a, b) in enumerate(pairs)
    ]
    config = settings(site=("http://127.0.0.1:8088/", "front.service"))
    host.health["site"] = health("site", "front.service", "ok", status=200)
    verdict, _ = diagnose(host, "front.service", config)
    assert steps_of(verdict) == [("start_unit", "m2.service", {"active_state": ["failed"]})]


def _db_started(at: str) -> str:
    """db.service up and running, its main process started at ``at`` (HH:MM:SS)."""
    return APP_ALONE.replace("app.service", "db.service").replace(
        "ExecMainStartTimestamp=Sun 2026-11-29 21:44:38.590102 UTC",
        f"ExecMainStartTimestamp=Sun 2026-11-29 {at}.000000 UTC",
    )


@pytest.mark.parametrize(("db_started", "restarted"), [("21:50:00", True), ("21:40:00", False)])
def test_a_client_whose_dependency_came_back_under_it_is_restarted(
    db_started: str, restarted: bool
) -> None:
    """app answers 503 while db, which it needs, is up: db was started again at 21:50,
    after app started (21:44): app may hold its connections to the db that went away,
    so restart app, pinned. With db up since before app started, nothing came back
    under it: an application error, a note."""
    config = settings(web=("http://127.0.0.1/", "app.service"))
    host = (
        RecordedHost(health={"web": health("web", "app.service", "unexpected_status", 503)})
        .add(recorded.APP_SHOW, recorded.APP_JOURNAL)
        .add(_db_started(db_started), [])
    )
    verdict, _ = diagnose(host, "app.service", config)
    if restarted:
        assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]
        assert isinstance(verdict, PlanVerdict)
        assert "db.service was started again at 21:50:00 UTC" in (
            verdict.plan.steps[0].reason or ""
        )
    else:
        assert cause_of(verdict) == ("app_error", "app.service")
