"""Replay (diagnose_svc/replay.py): a recorded diagnosis asked again of a policy and
answered from its record alone.

An operator who recorded a diagnosis and replays it with the same policy gets the same
verdict and nothing is read from the host; with a config key changed, the report says
which verdict differs and how; a call the record does not hold is answered "not
recorded" and counted, never read live; and the executor's replies then (a REVISE, then
an ACCEPT) are given again to the same plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diagnose_svc.actions import CallTool, FinalNote, SubmitPlan
from diagnose_svc.errors import ExecutorError
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.record import Recording, RecordStore
from diagnose_svc.replay import NOT_RECORDED, replay_record, replay_store
from diagnose_svc.runtime import run_diagnosis
from shared_schema import DiagnoseSettings, FieldError, Revise
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, Script, ScriptedPolicy, accept

SETTINGS = DiagnoseSettings()


def killed_host() -> RecordedHost:
    return RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)


def diagnosed(
    host: RecordedHost,
    policy: Any,
    submitter: FakeSubmitter,
    settings: DiagnoseSettings = SETTINGS,
) -> dict[str, Any]:
    """The record of one diagnosis of killed.service on ``host``."""
    recording = Recording(unit="killed.service", symptom="killed is down")
    verdict = run_diagnosis(
        "killed.service",
        "killed is down",
        policy,
        host.tools(),
        submitter,
        settings,
        recording=recording,
    )
    return recording.document(verdict)


def test_the_same_policy_agrees_and_reads_nothing(tmp_path: Path) -> None:
    """The runbook's diagnosis of the killed service, recorded and replayed with the same
    policy and config: the same plan, no call missing, and not one read of the host."""
    host = killed_host()
    store = RecordStore(tmp_path / "records")
    store.write(diagnosed(host, RunbookPolicy(SETTINGS), FakeSubmitter([accept()])))
    reads_then = list(host.calls)

    report = replay_store(store, RunbookPolicy(SETTINGS), SETTINGS)

    assert host.calls == reads_then
    [replayed] = report["replays"]
    assert replayed["agree"] is True
    assert (
        replayed["then"]
        == replayed["now"]
        == {
            "kind": "plan",
            "ended_by": "plan_accepted",
            "what": ["start_unit killed.service"],
        }
    )
    counts = ("replayed", "agree", "differ", "failed", "skipped", "not_recorded_calls")
    assert [report["summary"][key] for key in counts] == [1, 1, 0, 0, 0, 0]


def test_a_changed_config_key_changes_the_verdict_and_the_report_says_so(
    tmp_path: Path,
) -> None:
    """The same record replayed with `max_steps = 2`: the runbook cannot read what a plan
    needs, so it ends with a note where a plan was; the report says they differ, and
    how, then and now."""
    host = killed_host()
    store = RecordStore(tmp_path / "records")
    store.write(diagnosed(host, RunbookPolicy(SETTINGS), FakeSubmitter([accept()])))
    fewer = DiagnoseSettings(max_steps=2)

    report = replay_store(store, RunbookPolicy(fewer), fewer)

    [replayed] = report["replays"]
    assert replayed["agree"] is False
    assert replayed["then"]["kind"] == "plan" and replayed["now"]["kind"] == "note"
    assert (report["summary"]["differ"], report["summary"]["note_where_plan"]) == (1, 1)
    assert report["summary"]["agree"] == 0


def _journal_then_note() -> list[Script]:
    return [
        CallTool(tool="read_unit_status", args={"unit": "killed.service"}),
        CallTool(tool="tail_journal", args={"unit": "killed.service"}),
        FinalNote(text="killed.service was killed"),
    ]


def test_a_call_the_record_lacks_is_answered_not_recorded_and_counted() -> None:
    """The record lost its journal read: the replay answers the policy "not recorded",
    counts the call, and still reads nothing from the host."""
    host = killed_host()
    record = diagnosed(host, ScriptedPolicy(_journal_then_note()), FakeSubmitter())
    record["calls"] = [c for c in record["calls"] if c["tool"] != "tail_journal"]
    reads_then = list(host.calls)
    policy = ScriptedPolicy(_journal_then_note())

    replayed = replay_record(record, policy, SETTINGS, tools=host.tools())

    assert host.calls == reads_then
    [missing] = replayed.not_recorded
    assert missing.startswith('tail_journal {"lines": ')
    assert '"unit": "killed.service"' in missing
    answer = policy.observations[-1][1]
    assert answer.startswith(f'{{"error":"{NOT_RECORDED}: tail_journal was not called')
    assert replayed.agrees  # the same note: the policy was told, not misled


def _plans(script: Sequence[SubmitPlan]) -> list[Script]:
    return [CallTool(tool="read_unit_status", args={"unit": "killed.service"}), *script]


def _plan(tool: str) -> SubmitPlan:
    return SubmitPlan(
        plan={
            "goal": f"{tool} killed.service",
            "steps": [
                {
                    "tool": tool,
                    "args": {"unit": "killed.service"},
                    "expect": {"active_state": ["failed"]},
                }
            ],
        }
    )


def test_the_executors_replies_then_are_given_again() -> None:
    """The executor sent the restart back (REVISE: not allowed for this unit), then
    accepted the start. Replayed, the same restart meets the same REVISE, and the start
    is the verdict again; nothing is submitted."""
    revise = Revise(errors=[FieldError(path="steps.0.tool", message="not allowed for this unit")])
    host = killed_host()
    script = [_plan("restart_unit"), _plan("start_unit")]
    submitter = FakeSubmitter([revise, accept()])
    record = diagnosed(host, ScriptedPolicy(_plans(script)), submitter)
    assert [r["reply"]["verdict"] for r in record["replies"]] == ["REVISE", "ACCEPT"]
    policy = ScriptedPolicy(_plans(script))

    replayed = replay_record(record, policy, SETTINGS, tools=host.tools())

    assert replayed.then.what == ("start_unit killed.service",)
    assert replayed.agrees, replayed.now
    told = policy.observations[-1][-1]
    assert "REVISE" in told and "- steps.0.tool: not allowed for this unit" in told
    assert len(submitter.submitted) == 2  # the two of the diagnosis, none of the replay


def test_an_executor_that_could_not_be_asked_then_cannot_be_now() -> None:
    """The executor could not be reached when the plan was submitted: the diagnosis ended
    with a note saying so. Replayed, the same plan meets the same failure (not an
    accepted plan the executor never saw), and the replay agrees."""
    host = killed_host()
    script = [_plan("start_unit")]
    submitter = FakeSubmitter([ExecutorError("cannot connect to /run/opsbot/executor.sock")])
    record = diagnosed(host, ScriptedPolicy(_plans(script)), submitter)
    assert record["verdict"]["ended_by"] == "executor_error"

    replayed = replay_record(record, ScriptedPolicy(_plans(script)), SETTINGS, tools=host.tools())

    assert replayed.now is not None and replayed.now.kind == "note", replayed.now
    assert replayed.now.ended_by == "executor_error"
    assert replayed.agrees, (replayed.then, replayed.now)
