"""The bounded loop: limits, cycles, dispatch, readiness, submission, redaction, events."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from diagnose_svc.actions import CallTool, FinalNote, Proposal, SubmitPlan, TriedPlan
from diagnose_svc.errors import ExecutorUnavailable, PolicyError, UsageError
from diagnose_svc.events import Event, FinishedEvent, StartedEvent, StepEvent
from diagnose_svc.executor_client import ExecutorClient
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools import (
    JournalArgs,
    JournalLine,
    JournalTail,
    ToolContext,
    UnitArgs,
    UnitStatus,
    make_tool,
)
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings, FieldError, Reject, Revise, canonical_json, sha256_hex
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import (
    FakeSubmitter,
    RecordedHost,
    RepeatingPolicy,
    ScriptedPolicy,
    accept,
    health,
)

SETTINGS = DiagnoseSettings()


def host() -> RecordedHost:
    return (
        RecordedHost()
        .add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
        .add(recorded.DB_SHOW, recorded.DB_JOURNAL)
        .add(recorded.APP_SHOW, recorded.APP_JOURNAL)
    )


def status_call(unit: str = "killed.service") -> CallTool:
    return CallTool(tool="read_unit_status", args={"unit": unit})


def restart_plan(unit: str = "killed.service") -> SubmitPlan:
    return SubmitPlan(
        plan={
            "goal": f"Restart {unit}",
            "steps": [
                {
                    "tool": "restart_unit",
                    "args": {"unit": unit},
                    "expect": {"active_state": ["failed"]},
                }
            ],
        }
    )


def run(policy: Any, submitter: FakeSubmitter | None = None, **kw: Any) -> Any:
    settings = kw.pop("settings", SETTINGS)
    tools = kw.pop("tools", None) or host().tools()
    return run_diagnosis(
        kw.pop("unit", "killed.service"),
        kw.pop("symptom", "killed is down"),
        policy,
        tools,
        submitter or FakeSubmitter(),
        settings,
        **kw,
    )


def test_step_limit_ends_with_a_note_of_evidence_and_unknowns() -> None:
    """A policy that never finishes stops at max_steps with a note, not an error: the note
    lists each tool called with a one-line summary and what is still unknown."""
    units = ["killed.service", "db.service", "app.service", "killed.service"]
    policy = RepeatingPolicy(lambda n: status_call(units[(n - 1) % 3]))
    verdict = run(policy, settings=DiagnoseSettings(max_steps=3))
    assert isinstance(verdict, NoteVerdict)
    assert verdict.ended_by == "step_limit"
    assert verdict.steps_used == 3
    assert "step limit (3)" in verdict.text
    assert "Evidence gathered:" in verdict.text
    assert "step 1 read_unit_status(unit=killed.service): killed.service is failed/failed" in (
        verdict.text
    )
    assert "main process was killed by SIGKILL" in verdict.text
    assert "step 2 read_unit_status(unit=db.service)" in verdict.text
    assert "Unknown:" in verdict.text
    assert "the journal of killed.service (tail_journal was not called for it)" in verdict.text
    assert [e.tool for e in verdict.evidence] == ["read_unit_status", "read_unit_status"]


def test_last_step_shows_no_tools() -> None:
    """On the last step the policy is shown no tools, so that it concludes."""
    policy = RepeatingPolicy(lambda n: status_call(["killed.service", "db.service"][n % 2]))
    run(policy, settings=DiagnoseSettings(max_steps=3))
    assert policy.shown_tools[0] and policy.shown_tools[1]
    assert policy.shown_tools[2] == []


def test_cycle_stages_nudge_then_withdraw_then_stop() -> None:
    """The 2nd identical call is answered with a nudge (not run), the 3rd withdraws the
    tools, and a call after that stops the run; the tool ran only once."""
    h = host()
    policy = RepeatingPolicy(lambda n: status_call())
    verdict = run(policy, tools=h.tools())
    assert len(h.calls) == 1
    assert verdict.ended_by == "cycle"
    assert verdict.steps_used == 4
    assert policy.shown_tools[2] != [] and policy.shown_tools[3] == []
    assert "Evidence gathered:" in verdict.text


def test_cycle_observations_and_who_decided() -> None:
    """The nudge and the withdrawal are runtime answers the policy sees; after the
    withdrawal a note still finishes the run normally."""
    policy = ScriptedPolicy(
        [status_call(), status_call(), status_call(), FinalNote(text="giving up")]
    )
    events: list[Event] = []
    verdict = run(policy, on_event=events.append)
    assert isinstance(verdict, NoteVerdict) and verdict.ended_by == "final_note"
    assert verdict.text == "giving up"
    observations = policy.observations[-1]
    assert observations[1].startswith("Not run: read_unit_status was already called")
    assert "at step 1" in observations[1]
    assert "Tools are withdrawn" in observations[2]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.decided_by for e in steps] == ["policy", "runtime", "runtime", "policy"]
    assert policy.shown_tools[3] == []


def test_identical_means_same_canonical_arguments() -> None:
    """Arguments that validate to the same values (a default spelled out) are identical."""
    h = host()
    policy = ScriptedPolicy(
        [
            CallTool(tool="tail_journal", args={"unit": "db.service"}),
            CallTool(tool="tail_journal", args={"unit": "db.service", "lines": 50}),
            FinalNote(text="done"),
        ]
    )
    run(policy, tools=h.tools())
    assert len(h.calls) == 1
    assert policy.observations[-1][1].startswith("Not run:")


def test_write_tool_is_refused_and_counts_as_a_step() -> None:
    """Calling a write tool is refused by the runtime, never run, and uses a step."""
    events: list[Event] = []
    policy = ScriptedPolicy(
        [CallTool(tool="restart_unit", args={"unit": "killed.service"}), FinalNote(text="ok")]
    )
    verdict = run(policy, on_event=events.append)
    assert verdict.steps_used == 2
    refusal = policy.observations[1][0]
    assert "restart_unit is a write tool" in refusal
    assert "submit a plan" in refusal
    [first, _] = [e for e in events if isinstance(e, StepEvent)]
    assert first.decided_by == "runtime" and first.tool == "restart_unit"
    assert verdict.evidence == []


@pytest.mark.parametrize("write_tool", ["restart_unit", "stop_unit", "reset_failed_unit"])
def test_a_write_tool_is_refused_even_when_the_table_offers_it(write_tool: str) -> None:
    """The refusal is by name, not by absence: a tool table that (by mistake or malice)
    holds a write tool under its name still never runs it. The call is refused, the
    function is never called, and the policy is told to submit a plan instead."""
    ran: list[str] = []

    def restart(args: UnitArgs, context: ToolContext) -> UnitStatus:
        """Looks like a read tool, changes the host."""
        ran.append(args.unit)
        raise AssertionError("a write tool ran inside diagnosis")

    tools = {**host().tools(), write_tool: make_tool(UnitArgs, restart, name=write_tool)}
    policy = ScriptedPolicy(
        [CallTool(tool=write_tool, args={"unit": "killed.service"}), FinalNote(text="ok")]
    )
    verdict = run(policy, tools=tools)
    assert ran == []
    assert f"Refused: {write_tool} is a write tool" in policy.observations[1][0]
    assert verdict.evidence == [] and verdict.steps_used == 2


def test_unknown_tool_is_refused_with_the_list_of_tools() -> None:
    """An unknown tool name is answered with the available tools, and uses a step."""
    policy = ScriptedPolicy([CallTool(tool="rm_rf", args={}), FinalNote(text="ok")])
    verdict = run(policy)
    assert verdict.steps_used == 2
    answer = policy.observations[1][0]
    assert "no tool named 'rm_rf'" in answer
    assert "Available tools: " + ", ".join(sorted(host().tools())) + "." in answer


def test_bad_arguments_come_back_as_an_error_observation() -> None:
    """Arguments that fail the tool's model are an error observation naming the field."""
    policy = ScriptedPolicy(
        [
            CallTool(tool="read_unit_status", args={"unit": "../../etc/passwd"}),
            CallTool(tool="tail_journal", args={"unit": "db.service", "lines": 5000}),
            FinalNote(text="ok"),
        ]
    )
    verdict = run(policy)
    bad_unit, bad_lines = policy.observations[2]
    assert bad_unit.startswith('{"error":"bad arguments for read_unit_status: unit:')
    assert "lines:" in bad_lines and "200" in bad_lines
    assert [e.error for e in verdict.evidence] == [True, True]


def test_tool_error_is_an_observation_not_an_exception() -> None:
    """A tool raising ToolError (unit not found) gives an error observation and the loop
    goes on."""
    policy = ScriptedPolicy([status_call("nonexist.service"), FinalNote(text="ok")])
    verdict = run(policy)
    assert policy.observations[1][0] == '{"error":"unit nonexist.service not found"}'
    assert verdict.evidence[0].summary == "error: unit nonexist.service not found"


def test_plan_for_unread_unit_is_refused_by_the_readiness_rule() -> None:
    """A plan touching a unit not read with read_unit_status in this run is not submitted;
    the policy is told which units lack evidence, and it counts as a step."""
    submitter = FakeSubmitter([accept()])
    events: list[Event] = []
    policy = ScriptedPolicy(
        [status_call("db.service"), restart_plan("killed.service"), FinalNote(text="ok")]
    )
    verdict = run(policy, submitter, on_event=events.append)
    assert submitter.submitted == []
    answer = policy.observations[2][1]
    assert answer.startswith("Not submitted: no evidence for killed.service.")
    assert verdict.steps_used == 3
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert steps[1].decided_by == "runtime" and steps[1].action == "submit_plan"


def test_invalid_plan_goes_back_with_field_errors() -> None:
    """A plan that fails shared_schema.parse_plan is answered by the validator with
    field paths, and is not submitted."""
    submitter = FakeSubmitter()
    bad = SubmitPlan(plan={"goal": "x", "steps": [{"tool": "restart_unit", "args": {}}]})
    policy = ScriptedPolicy([status_call(), bad, FinalNote(text="ok")])
    events: list[Event] = []
    run(policy, submitter, on_event=events.append)
    assert submitter.submitted == []
    answer = policy.observations[2][1]
    assert answer.startswith("The plan is not valid")
    assert "- steps.0.args.unit: Field required" in answer
    assert [e.decided_by for e in events if isinstance(e, StepEvent)][1] == "validator"


def test_revise_loop_then_accept() -> None:
    """REVISE errors go back to the policy as an observation; a corrected plan that is
    accepted ends the run with the plan id, fingerprint and plan."""
    revise = Revise(errors=[FieldError(path="steps.0.tool", message="not allowed for this unit")])
    plan = restart_plan()
    submitter = FakeSubmitter([revise, accept(plan_sha="ab" * 32)])
    policy = ScriptedPolicy([status_call(), plan, plan])
    verdict = run(policy, submitter, symptom="killed is down", run_id="run-1")
    assert isinstance(verdict, PlanVerdict)
    assert verdict.kind == "plan" and verdict.ended_by == "plan_accepted"
    assert verdict.plan_id == "20261129-214500-0a1b2c3d"
    assert verdict.sha256 == "ab" * 32
    assert verdict.plan.steps[0].args.unit == "killed.service"
    assert verdict.steps_used == 3
    answer = policy.observations[2][1]
    assert "REVISE" in answer and "- steps.0.tool: not allowed for this unit" in answer
    [(sent, run_id, symptom), _] = submitter.submitted
    assert sent == {
        "goal": "Restart killed.service",
        "steps": [
            {
                "tool": "restart_unit",
                "args": {"unit": "killed.service"},
                "expect": {"active_state": ["failed"]},
            }
        ],
        "stop_on_error": True,
        # Written by the runtime, not the policy: the unit asked about and the health
        # targets that failed in this run (none was probed here).
        "symptom": {"unit": "killed.service", "health": [], "result": "signal"},
    }
    assert (run_id, symptom) == ("run-1", "killed is down")


def test_reject_ends_the_run_with_a_note() -> None:
    """REJECT ends the run at once with a note giving the executor's reason."""
    submitter = FakeSubmitter([Reject(reason="killed.service is not in [executor] allow")])
    verdict = run(ScriptedPolicy([status_call(), restart_plan()]), submitter)
    assert isinstance(verdict, NoteVerdict) and verdict.ended_by == "plan_rejected"
    assert verdict.text == (
        "The executor rejected the plan: killed.service is not in [executor] allow"
    )


def test_executor_unavailable_ends_with_a_note_naming_the_socket(tmp_path: Any) -> None:
    """A missing executor socket ends the run with a note naming the socket path, the
    plan that could not be submitted and the evidence; never a traceback."""
    client = ExecutorClient(socket_path=tmp_path / "executor.sock", timeout_seconds=1)
    verdict = run_diagnosis(
        "killed.service",
        "",
        ScriptedPolicy([status_call(), restart_plan()]),
        host().tools(),
        client,
        SETTINGS,
    )
    assert isinstance(verdict, NoteVerdict) and verdict.ended_by == "executor_error"
    assert f"executor socket {tmp_path / 'executor.sock'}: does not exist" in verdict.text
    assert '"tool":"restart_unit"' in verdict.text
    assert "step 1 read_unit_status(unit=killed.service)" in verdict.text


def test_policy_error_ends_with_a_note_of_evidence() -> None:
    """A policy that fails (its model endpoint is down) ends the run with a note."""

    def fail(*_: Any) -> Proposal:
        raise PolicyError("model endpoint http://127.0.0.1:9/v1 refused the connection")

    verdict = run(ScriptedPolicy([status_call(), fail]))
    assert verdict.ended_by == "policy_error"
    assert "refused the connection" in verdict.text
    assert "step 1 read_unit_status" in verdict.text


def _big_journal(message: str, count: int = 40) -> Any:
    def tail_journal(args: JournalArgs, context: ToolContext) -> JournalTail:
        """A journal whose lines are long."""
        line = JournalLine(
            time="2026-11-29T21:44:38Z", priority="info", source="x", message=message
        )
        return JournalTail(unit=args.unit, lines=[line] * count)

    return make_tool(JournalArgs, tail_journal)


def test_observations_are_cut_at_2000_characters() -> None:
    """An observation longer than 2000 characters is cut to exactly 2000, with a marker."""
    tools = {**host().tools(), "tail_journal": _big_journal("x" * 400)}
    policy = ScriptedPolicy(
        [CallTool(tool="tail_journal", args={"unit": "db.service"}), FinalNote(text="ok")]
    )
    run(policy, tools=tools)
    [observation] = policy.observations[1]
    assert len(observation) == 2000
    assert observation.endswith("more characters cut]")


def test_secrets_are_redacted_before_the_policy_sees_them() -> None:
    """Secrets in a tool's output are replaced before the policy, the event and the
    evidence see them; the step event counts the redactions; configured patterns apply."""
    message = (
        "login failed password=hunter2 with header Authorization: Bearer abcdef0123456789 "
        "customer CUST-123456"
    )
    tools = {**host().tools(), "tail_journal": _big_journal(message, count=1)}
    settings = DiagnoseSettings(redact_patterns=[r"CUST-\d{6}"])
    events: list[Event] = []
    policy = ScriptedPolicy(
        [CallTool(tool="tail_journal", args={"unit": "db.service"}), FinalNote(text="ok")]
    )
    with structlog.testing.capture_logs() as logs:
        verdict = run(policy, tools=tools, settings=settings, on_event=events.append)
    [observation] = policy.observations[1]
    for secret in ("hunter2", "abcdef0123456789", "CUST-123456"):
        assert secret not in observation
        assert secret not in verdict.evidence[0].summary
        assert all(secret not in str(entry) for entry in logs)
    assert "password=[REDACTED]" in observation
    assert "Authorization: [REDACTED]" in observation
    step = next(e for e in events if isinstance(e, StepEvent))
    assert step.redactions == 3
    logged = next(entry for entry in logs if entry["event"] == "diagnose.step")
    assert logged["redactions"] == 3


def test_token_budget_stops_the_run() -> None:
    """When the policy's reported tokens exceed token_budget, its next tool call is not
    run and the run ends with a note saying so."""
    h = host()
    policy = ScriptedPolicy(
        [status_call(), status_call("db.service"), status_call("app.service")],
        tokens=(500, 100),
    )
    verdict = run(policy, tools=h.tools(), settings=DiagnoseSettings(token_budget=1000))
    assert verdict.ended_by == "token_budget"
    assert verdict.tokens == 1200
    assert len(h.calls) == 1
    assert "token budget of 1000 is used up (1200 tokens)" in verdict.text


def test_events_carry_run_id_step_and_digest() -> None:
    """Every step emits a diagnose.step event (run id, step, decided_by, action, tool,
    sha256 of the canonical arguments, excerpt, tokens, redactions), framed by
    diagnose.started and diagnose.finished, to on_event and to structlog."""
    events: list[Event] = []
    policy = ScriptedPolicy([status_call(), FinalNote(text="fine")], tokens=(10, 5))
    with structlog.testing.capture_logs() as logs:
        run(policy, on_event=events.append, run_id="run-42")
    assert [type(e) for e in events] == [StartedEvent, StepEvent, StepEvent, FinishedEvent]
    step = events[1]
    assert isinstance(step, StepEvent)
    assert step.run_id == "run-42" and step.step == 1 and step.decided_by == "policy"
    assert step.action == "call_tool" and step.tool == "read_unit_status"
    assert step.args_sha256 == sha256_hex(canonical_json({"unit": "killed.service"}))
    assert step.result_excerpt.startswith('{"unit":"killed.service"')
    assert len(step.result_excerpt) == 200
    assert step.tokens == 15
    finished = events[-1]
    assert isinstance(finished, FinishedEvent)
    assert (finished.kind, finished.ended_by, finished.steps_used, finished.tokens) == (
        "note",
        "final_note",
        2,
        30,
    )
    names = [entry["event"] for entry in logs if entry["event"].startswith("diagnose.")]
    assert names == ["diagnose.started", "diagnose.step", "diagnose.step", "diagnose.finished"]
    assert all(e.get("run_id") == "run-42" for e in logs if e["event"].startswith("diagnose."))


def test_final_note_is_made_safe_for_a_terminal() -> None:
    """Control characters in a policy's note are shown escaped; newlines are kept."""
    verdict = run(ScriptedPolicy([FinalNote(text="line one\nred \x1b[31mtext")]))
    assert verdict.text == "line one\nred \\x1b[31mtext"


def test_invalid_unit_name_is_a_usage_error() -> None:
    """A run cannot be started for something that is not a unit name."""
    with pytest.raises(UsageError, match="not a valid unit name"):
        run(ScriptedPolicy([]), unit="nginx; reboot")


def test_executor_unavailable_is_a_diagnose_error() -> None:
    """ExecutorUnavailable carries a message and a hint (the error tree's contract)."""
    error = ExecutorUnavailable("executor socket /run/x.sock: does not exist", hint="start it")
    assert error.message.endswith("does not exist") and error.hint == "start it"
    assert str(error) == "executor socket /run/x.sock: does not exist (start it)"


def test_the_plan_carries_the_symptom_the_runtime_saw_not_one_the_policy_wrote() -> None:
    """The health target web (killed's) failed in this run: the submitted plan's symptom
    is the unit asked about and that target, whatever symptom the policy wrote into its
    plan; the failing target of a unit the plan does not touch (db's, failing on its
    own) is not this symptom. It carries systemd's Result= of killed as the run read it
    (signal), whatever the policy wrote."""
    recorded_host = host()
    recorded_host.health["web"] = health("web", "killed.service", "connection_refused")
    recorded_host.health["reports"] = health("reports", "db.service", "connection_refused")
    forged = restart_plan()
    forged.plan["symptom"] = {"unit": "other.service", "health": [], "result": "exit-code"}
    forged.plan["follows"] = "20261129-213500-0000beef"
    submitter = FakeSubmitter([accept()])
    policy = ScriptedPolicy(
        [
            CallTool(tool="http_get_health", args={"target": "web"}),
            CallTool(tool="http_get_health", args={"target": "reports"}),
            status_call(),
            forged,
        ]
    )
    verdict = run(policy, submitter, tools=recorded_host.tools())
    assert isinstance(verdict, PlanVerdict)
    [(sent, _, _)] = submitter.submitted
    assert sent["symptom"] == {"unit": "killed.service", "health": ["web"], "result": "signal"}
    assert "follows" not in sent


def test_a_follow_up_plan_carries_the_symptom_of_the_plan_it_follows() -> None:
    """A follow-up diagnosis (of the unit that did not come back) submits its plan with
    ``follows`` the plan that was tried and that plan's symptom, unchanged."""
    tried = TriedPlan(
        plan_id="20261129-214000-0a1b2c3d",
        steps=(("start_unit", "db.service"),),
        symptom={"unit": "web.service", "health": ["web"]},
    )
    submitter = FakeSubmitter([accept()])
    verdict = run(ScriptedPolicy([status_call(), restart_plan()]), submitter, tried=[tried])
    assert isinstance(verdict, PlanVerdict)
    [(sent, _, _)] = submitter.submitted
    assert sent["follows"] == "20261129-214000-0a1b2c3d"
    assert sent["symptom"] == {"unit": "web.service", "health": ["web"]}
