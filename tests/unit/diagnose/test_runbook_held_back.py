"""The runbook's harm checks: what no plan may touch (a unit masked, with a broken or
changed unit file, on opsbot's denylist, or being started or stopped by systemd right
now), what is decided without a unit's state, and how the note for a human reads when
the cause is not in the unit asked about.

Like test_runbook.py, each test replays recorded systemd output through the real loop
(RecordedHost). Names are any names: the runbook decides from facts, never from them.
"""

from __future__ import annotations

import pytest

from diagnose_svc.actions import CallTool, FinalNote, Transcript, Turn
from diagnose_svc.errors import ToolError
from diagnose_svc.observation import output_text
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.redact import Redactor
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools import Tool, ToolContext, UnitArgs, UnitStatus, make_tool
from diagnose_svc.tools.read_process_state import ProcessInfo
from diagnose_svc.tools.read_unit_file import PathFact
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept, health
from tests.unit.diagnose.test_runbook import (
    APP_ALONE,
    DB_RAN,
    PINNED,
    cause_of,
    diagnose,
    renamed,
    settings,
    steps_of,
    stopped,
)


def text_of(verdict: PlanVerdict | NoteVerdict) -> str:
    """A note's text; a plan fails the test."""
    assert isinstance(verdict, NoteVerdict), verdict
    return verdict.text


def fact_of(verdict: PlanVerdict | NoteVerdict) -> str:
    """A note's cause's fact; a plan fails the test."""
    assert isinstance(verdict, NoteVerdict) and verdict.cause is not None, verdict
    return verdict.cause.fact


def run(tools: dict[str, Tool], unit: str, config: DiagnoseSettings) -> PlanVerdict | NoteVerdict:
    """A diagnosis of ``unit`` with ``tools``, as diagnose() runs one with a host's own."""
    submitter = FakeSubmitter([accept()])
    return run_diagnosis(unit, "", RunbookPolicy(config), tools, submitter, config)


# -- a unit systemd is starting or stopping --------------------------------------------------


def test_a_unit_systemd_is_stopping_is_in_transition_and_never_started() -> None:
    """db is deactivating (stop-sigterm): systemd is stopping it right now. A note that
    it is in transition, to diagnose again once it settles; no start is proposed."""
    show = (
        recorded.DB_SHOW.replace("ActiveState=failed", "ActiveState=deactivating")
        .replace("SubState=failed", "SubState=stop-sigterm")
        .replace("Result=exit-code", "Result=success")
    )
    verdict, submitter = diagnose(RecordedHost().add(show), "db.service")
    assert cause_of(verdict) == ("in_transition", "db.service")
    assert "db.service is deactivating/stop-sigterm" in text_of(verdict)
    assert submitter.submitted == []


# -- units opsbot never acts on --------------------------------------------------------------


def test_a_failed_unit_on_the_denylist_gets_a_note_never_a_plan() -> None:
    """dbus-broker.service (opsbot never acts on the message bus) failed: a note that a
    human must look, naming the denylist entry and how it fails; no plan."""
    show = renamed(DB_RAN, "db.service", "dbus-broker.service")
    verdict, submitter = diagnose(RecordedHost().add(show), "dbus-broker.service")
    assert cause_of(verdict) == ("denylisted", "dbus-broker.service")
    assert "built-in denylist 'dbus*'" in text_of(verdict)
    assert "dbus-broker.service is failing (failed (Result=exit-code" in text_of(verdict)
    assert submitter.submitted == []


# -- a unit file systemd cannot use as it is ----------------------------------------------------


@pytest.mark.parametrize(
    ("load_state", "load_error", "reload", "fact"),
    [
        (
            "bad-setting",
            'org.freedesktop.systemd1.BadUnitSetting "Unit has a bad setting"',
            "no",
            'LoadState=bad-setting: org.freedesktop.systemd1.BadUnitSetting "Unit has a bad '
            'setting"',
        ),
        ("error", "", "no", "LoadState=error"),
        (
            "loaded",
            "",
            "yes",
            "NeedDaemonReload=yes: its unit file changed on disk since systemd loaded it",
        ),
    ],
    ids=["bad-setting", "error-without-words", "changed-on-disk"],
)
def test_a_unit_file_note_states_what_systemd_says_of_it(
    load_state: str, load_error: str, reload: str, fact: str
) -> None:
    """killed.service's unit file does not load (LoadState= and, when systemd gives one,
    its LoadError=), or changed on disk since systemd loaded it (NeedDaemonReload=yes):
    a note on the unit file whose fact is exactly what systemd says, no plan."""
    show = (
        recorded.KILLED_SHOW.replace("LoadState=loaded", f"LoadState={load_state}")
        .replace("LoadError=\n", f"LoadError={load_error}\n")
        .replace("NeedDaemonReload=no", f"NeedDaemonReload={reload}")
    )
    verdict, submitter = diagnose(
        RecordedHost().add(show, recorded.KILLED_JOURNAL), "killed.service"
    )
    assert cause_of(verdict) == ("unit_file_error", "killed.service")
    assert fact_of(verdict) == fact
    assert submitter.submitted == []


# -- no state, no plan -------------------------------------------------------------------------


def test_a_unit_systemd_does_not_know_is_a_unit_file_error_about_it() -> None:
    """systemd knows no unit by the name asked (read_unit_status: not found): a note
    whose cause is a unit file error of that unit."""
    verdict, _ = diagnose(RecordedHost(), "nonexist.service")
    assert cause_of(verdict) == ("unit_file_error", "nonexist.service")


def test_a_unit_whose_state_cannot_be_read_is_an_unknown_cause() -> None:
    """Reading the state of the unit asked about timed out (the bus did not answer): a
    note quoting the error, whose cause is unknown, not a unit file error."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)

    def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
        """read_unit_status, the bus timing out."""
        raise ToolError("Failed to get properties: Connection timed out")

    tools = {**host.tools(), "read_unit_status": make_tool(UnitArgs, read_unit_status)}
    verdict = run(tools, "killed.service", DiagnoseSettings())
    assert cause_of(verdict) == ("unknown", "killed.service")
    assert "Connection timed out" in text_of(verdict)


def test_a_root_not_read_enough_is_an_unknown_cause_about_it() -> None:
    """Shown no tools before the journal and files of killed.service were read: the
    note's cause is unknown, about killed.service, saying what could not be checked."""
    status = RecordedHost().add(recorded.KILLED_SHOW).status("killed.service")
    text, _ = output_text(status, Redactor())
    read = CallTool(tool="read_unit_status", args={"unit": "killed.service"})
    transcript = Transcript(
        unit="killed.service", turns=[Turn(step=1, action=read, observation=text)]
    )
    policy = RunbookPolicy(DiagnoseSettings())
    policy.available = {"read_unit_status", "tail_journal", "read_unit_file", "disk_usage"}
    note = policy.propose(transcript, []).action
    assert isinstance(note, FinalNote)
    cause = note.cause
    assert cause is not None
    assert (cause["kind"], cause["unit"]) == ("unknown", "killed.service")
    assert cause["fact"].startswith("killed.service is failing (failed (Result=signal")
    assert cause["fact"].endswith(
        "but disk_usage, read_unit_file, tail_journal could not be checked within the steps "
        "available"
    )


def _two_time_out(stuck: tuple[str, ...] = ()) -> RecordedHost:
    """app and edge both run and their health targets time out; nothing links them.
    ``stuck``: the units whose main process /proc shows stopped."""
    edge = APP_ALONE.replace("app.service", "edge.service").replace("MainPID=95", "MainPID=42")
    processes = {
        unit: [
            ProcessInfo(
                pid=pid, role="main", visible=True, comm="x", state="T", state_words="stopped"
            )
        ]
        for unit, pid in (("app.service", 95), ("edge.service", 42))
        if unit in stuck
    }
    host = RecordedHost(
        health={
            "app": health("app", "app.service", "timeout"),
            "web": health("web", "edge.service", "timeout"),
        },
        processes=processes,
    )
    return host.add(APP_ALONE, recorded.APP_JOURNAL).add(edge)


TWO_TARGETS = settings(
    app=("http://127.0.0.1:8080/health", "app.service"),
    web=("http://127.0.0.1/", "edge.service"),
)


def test_silent_units_not_read_enough_get_a_note_on_what_was_not_checked() -> None:
    """app and edge both time out, and the steps ran out before edge's processes were
    read: the note says what could not be checked about edge, rather than that nothing
    tells which of the two waits on the other."""
    config = DiagnoseSettings(health=TWO_TARGETS.health, max_steps=3)
    verdict, _ = diagnose(_two_time_out(), "app.service", config)
    assert cause_of(verdict) == ("unknown", "edge.service")
    assert "read_process_state could not be checked" in text_of(verdict)


def test_two_dependencies_each_with_a_stopped_process_are_both_restarted() -> None:
    """front Wants= app and edge; both time out and /proc shows each one's main process
    stopped: each has a fault of its own, so each is restarted, pinned to its
    invocation, in one plan."""
    front = APP_ALONE.replace("app.service", "front.service").replace(
        "Wants=\n", "Wants=app.service edge.service\n"
    )
    host = _two_time_out(stuck=("app.service", "edge.service")).add(front)
    verdict, _ = diagnose(host, "front.service", TWO_TARGETS)
    assert steps_of(verdict) == [
        ("restart_unit", "app.service", PINNED),
        ("restart_unit", "edge.service", PINNED),
    ]


def test_a_cause_in_a_dependency_says_how_the_unit_asked_about_fails_because_of_it() -> None:
    """app stopped; db, which it Requires=, failed and its program is missing. The note
    is about db and begins with how app fails because of it."""
    missing = PathFact(path="/opt/db/bin/db", role="ExecStart program", exists=False)
    app = stopped(
        APP_ALONE.replace("Requires=sysinit.target", "Requires=sysinit.target db.service")
    )
    host = RecordedHost(paths={"db.service": [missing]}).add(app).add(DB_RAN, recorded.DB_JOURNAL)
    verdict, _ = diagnose(host, "app.service")
    assert cause_of(verdict) == ("missing_file", "db.service")
    assert text_of(verdict).startswith(
        "app.service is failing (inactive (Result=success)) because of db.service, which it "
        "needs. db.service: /opt/db/bin/db, which its ExecStart program names, does not exist."
    )


def test_a_relay_whose_two_upstreams_do_not_answer_says_it_fails_because_of_them() -> None:
    """front answers 502; a and b, behind other targets, both time out and nothing tells
    which waits on which. The note names both for a human and begins with how front
    fails because of them."""
    config = settings(
        web=("http://127.0.0.1/", "front.service"),
        a=("http://127.0.0.1:8081/", "a.service"),
        b=("http://127.0.0.1:8082/", "b.service"),
    )
    host = RecordedHost(
        health={
            "web": health("web", "front.service", "unexpected_status", 502),
            "a": health("a", "a.service", "timeout"),
            "b": health("b", "b.service", "timeout"),
        }
    )
    for name in ("front", "a", "b"):
        host.add(APP_ALONE.replace("app.service", f"{name}.service"))
    verdict, submitter = diagnose(host, "front.service", config)
    assert cause_of(verdict) == ("unknown", "a.service")
    text = text_of(verdict)
    assert text.startswith(
        "front.service is failing (health target web answers 502 (expected 200)) because of "
        "a.service"
    )
    assert "a.service: a.service, b.service run but do not answer" in text
    assert submitter.submitted == []


def test_a_long_reason_is_cut_so_that_the_strangers_named_still_fit() -> None:
    """A unit whose name is 200 characters long was killed; web failed on its own. The
    start's reason is cut so that, with web named after it, it stays within the 500
    characters a reason may have: the plan is valid, submitted, and names web."""
    name = "x" * 192 + ".service"
    host = RecordedHost().add(renamed(recorded.KILLED_SHOW, "killed.service", name))
    host.add(renamed(DB_RAN, "db.service", "web.service"))
    verdict, submitter = diagnose(host, name)
    assert steps_of(verdict) == [("start_unit", name, {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    reason = verdict.plan.steps[0].reason or ""
    assert len(reason) <= 500
    assert reason.endswith("web.service; diagnose it on its own.")
    assert len(submitter.submitted) == 1
