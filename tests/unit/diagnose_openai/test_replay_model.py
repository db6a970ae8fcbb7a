"""Qualifying a model on one's own incidents: three diagnoses the runbook made (a plan that
was VERIFIED, a plan that ended UNRESOLVED, a note), replayed with ``python -m
diagnose_svc.replay --model`` against the scripted OpenAI-compatible server; the report's
agreement, outcomes, tokens, harmful steps and model errors counted."""

import json
import socket
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.record import Recording, RecordStore
from diagnose_svc.replay import main
from diagnose_svc.runtime import run_diagnosis
from shared_schema import DiagnoseSettings
from testbed.scripted_openai import HttpError, ScriptedOpenAI, Text, ToolCall, Turn
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept

KEY = "sk-replay-4e1f0a9b7c2d"
KILLED_PLAN_ID = "20261201-100000-0000aaaa"
APP_PLAN_ID = "20261201-110000-0000bbbb"
# db.service's program ran for an hour before it ended: the runbook starts it again.
DB_RAN = recorded.DB_SHOW.replace(
    "start_time=[Sun 2026-11-29 21:44:38.559839 UTC]", "start_time=[Sun 2026-11-29 20:44:40 UTC]"
)


def _plan(*steps: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "goal": "bring the service back",
        "steps": [
            {
                "tool": tool,
                "args": {"unit": unit},
                "expect": {"active_state": [state]},
                "reason": "r",
            }
            for tool, unit, state in steps
        ],
    }


# What the scripted model answers, turn by turn, for each recorded diagnosis (oldest first).
READ = "read_unit_status"
KILLED_AGAIN: list[Turn] = [
    ToolCall(READ, {"unit": "killed.service"}),
    ToolCall("submit_plan", _plan(("start_unit", "killed.service", "failed"))),
]
APP_SAME: list[Turn] = [
    ToolCall(READ, {"unit": "app.service"}),
    ToolCall(READ, {"unit": "db.service"}),
    ToolCall("submit_plan", _plan(("start_unit", "db.service", "failed"))),
]
APP_AND_A_RESTART: list[Turn] = [
    ToolCall(READ, {"unit": "app.service"}, delay=0.3),
    ToolCall(READ, {"unit": "db.service"}),
    ToolCall(
        "submit_plan",
        _plan(("start_unit", "db.service", "failed"), ("restart_unit", "app.service", "active")),
    ),
]
BADCONF_NOTE: list[Turn] = [
    ToolCall(READ, {"unit": "badconf.service"}),
    ToolCall(
        "final_note",
        {
            "text": "badconf.service's config has an unknown directive; fix nginx.conf.",
            "cause": {"kind": "config_error", "unit": "badconf.service", "fact": "[emerg]"},
        },
    ),
]


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """The record of three runbook diagnoses, ten, twenty and thirty minutes old."""
    directory = tmp_path / "records"
    config = DiagnoseSettings()
    store = RecordStore(directory, config.record)
    hosts = [
        ("killed.service", RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)),
        (
            "app.service",
            RecordedHost().add(recorded.APP_SHOW, recorded.APP_JOURNAL).add(DB_RAN),
        ),
        ("badconf.service", RecordedHost().add(recorded.BADCONF_SHOW, recorded.BADCONF_JOURNAL)),
    ]
    plan_ids = [KILLED_PLAN_ID, APP_PLAN_ID, APP_PLAN_ID]
    now = datetime.now(UTC)
    for age, ((unit, host), plan_id) in enumerate(zip(hosts, plan_ids, strict=True)):
        run_id = (now - timedelta(minutes=30 - 10 * age)).strftime("%Y%m%d-%H%M%S-") + "0000000a"
        recording = Recording(unit=unit, symptom="")
        verdict = run_diagnosis(
            unit,
            "",
            RunbookPolicy(config),
            host.tools(),
            FakeSubmitter([accept(plan_id=plan_id)]),
            config,
            run_id=run_id,
            recording=recording,
        )
        store.write(recording.document(verdict))
    store.file_outcome(KILLED_PLAN_ID, "VERIFIED")
    store.file_outcome(APP_PLAN_ID, "UNRESOLVED")
    return directory


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """opsbot.toml with the embedded runbook as policy, and a model named in
    ``[diagnose.model]`` that --model asks (once asked, it is not retried)."""
    for name in ("LLM_API_URL", "LLM_MODEL", "LLM_API_KEY", "CREDENTIALS_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "etc" / "opsbot.toml"
    path.parent.mkdir()
    path.write_text(
        '[diagnose.model]\napi_url = "http://127.0.0.1:9/v1"\nmodel = "config-model"\n'
        "max_retries = 0\n"
    )
    return path


def _replay(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    report: dict[str, Any] = json.loads(out)
    assert KEY not in out
    return report


def _tokens_served(server: ScriptedOpenAI, turns: Sequence[Sequence[Turn]]) -> list[int]:
    """What the server's usage said each diagnosis cost: its turns' total_tokens."""
    bodies = iter(request.body for request in server.chat_requests)
    served, index = [], 0
    for diagnosis in turns:
        total = 0
        for turn in diagnosis:
            body = next(bodies)
            if isinstance(turn, ToolCall | Text):
                total += server.completion(index, turn, body)["usage"]["total_tokens"]
            index += 1
        served.append(total)
    return served


def test_a_model_that_agrees_on_two_and_restarts_a_unit_outside_the_plan_on_one(
    records: Path, config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model proposes the killed service's start again (the plan then, VERIFIED: right),
    adds a restart of app.service to db's start (app is outside the plan then: one harmful
    step, a plan that differs and is not judged), and names badconf's config error as the
    note then did: agree 2, differ 1, harmful 1. Its tokens are the server's usage, per
    diagnosis and in all; the key came from LLM_API_KEY and is in no line of the report."""
    turns = [KILLED_AGAIN, APP_AND_A_RESTART, BADCONF_NOTE]
    monkeypatch.setenv("LLM_API_KEY", KEY)
    with ScriptedOpenAI([turn for diagnosis in turns for turn in diagnosis]) as server:
        report = _replay(
            capsys,
            "--model-url", server.base_url,
            "--model-name", "qualified-model",
            "--config", str(config),
            "--records", str(records),
        )  # fmt: skip
        served = _tokens_served(server, turns)

    assert report["model"] == {
        "url": server.base_url,
        "name": "qualified-model",
        "sources": {
            "api_url": "the command line",
            "model": "the command line",
            "api_key": "env LLM_API_KEY",
        },
    }
    assert {r.headers["authorization"] for r in server.chat_requests} == {f"Bearer {KEY}"}
    killed, app, badconf = report["replays"]
    assert [killed["unit"], app["unit"], badconf["unit"]] == [
        "killed.service",
        "app.service",
        "badconf.service",
    ]
    assert (killed["agree"], killed["against_outcome"], killed["harmful"]) == (True, "right", [])
    assert app["then"]["what"] == ["start_unit db.service"] and app["outcome"] == "UNRESOLVED"
    assert app["now"]["what"] == ["start_unit db.service", "restart_unit app.service"]
    assert (app["agree"], app["against_outcome"]) == (False, None)
    assert app["harmful"] == ["restart_unit app.service"]
    assert badconf["then"]["kind"] == "note" and badconf["now"]["kind"] == "note"
    assert (badconf["agree"], badconf["against_outcome"], badconf["harmful"]) == (True, None, [])

    assert [r["tokens"] for r in report["replays"]] == served
    assert app["seconds"] >= 0.3  # the model took 0.3 s over its first answer there
    summary = report["summary"]
    assert {k: summary[k] for k in COUNTS} == {
        "replayed": 3,
        "agree": 2,
        "differ": 1,
        "model_errors": 0,
        "outcome_right": 1,
        "outcome_wrong": 0,
        "outcome_miss": 0,
        "harmful_steps": 1,
        "harmful_diagnoses": 1,
        "not_recorded_calls": 0,
    }
    assert summary["tokens"] == sum(served)
    assert summary["tokens_median"] == statistics.median(served)
    seconds = [r["seconds"] for r in report["replays"]]
    assert summary["seconds_total"] == pytest.approx(sum(seconds), abs=0.002)
    assert summary["seconds_median"] == pytest.approx(statistics.median(seconds), abs=0.001)


COUNTS = (
    "replayed",
    "agree",
    "differ",
    "model_errors",
    "outcome_right",
    "outcome_wrong",
    "outcome_miss",
    "harmful_steps",
    "harmful_diagnoses",
    "not_recorded_calls",
)


def test_a_note_where_a_fix_worked_is_a_miss_and_an_endpoint_error_is_counted_not_fatal(
    records: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model leaves the killed service with a note (its start was VERIFIED: a miss),
    proposes db's start again (which ended UNRESOLVED: wrong, though it agrees), and then
    the endpoint fails (HTTP 500, no retry): that diagnosis is a model error, counted in
    neither agree nor differ, and the replay ends normally. The key comes from the
    llm_api_key file next to the config, the URL and model name from the config."""
    key_file = config.parent / "llm_api_key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    turns: list[list[Turn]] = [[Text("killed.service was killed; leave it.")], APP_SAME]
    with ScriptedOpenAI([*turns[0], *turns[1], HttpError(500)]) as server:
        config.write_text(config.read_text().replace("http://127.0.0.1:9/v1", server.base_url))
        report = _replay(capsys, "--model", "--config", str(config), "--records", str(records))
        served = _tokens_served(server, turns)

    assert report["model"]["name"] == "config-model"
    assert report["model"]["sources"]["api_key"] == "credential llm_api_key"
    assert {r.headers["authorization"] for r in server.chat_requests} == {f"Bearer {KEY}"}
    killed, app, badconf = report["replays"]
    assert (killed["agree"], killed["against_outcome"]) == (False, "miss")
    assert (app["agree"], app["against_outcome"]) == (True, "wrong")
    assert badconf["model_error"].startswith("The policy (openai) failed: model config-model")
    assert "HTTP 500" in badconf["model_error"]
    assert badconf["now"]["ended_by"] == "policy_error" and badconf["against_outcome"] is None
    assert [r["model_error"] for r in (killed, app)] == [None, None]
    assert [r["tokens"] for r in (killed, app)] == served
    assert {k: report["summary"][k] for k in COUNTS} == {
        "replayed": 3,
        "agree": 1,
        "differ": 1,
        "model_errors": 1,
        "outcome_right": 0,
        "outcome_wrong": 1,
        "outcome_miss": 1,
        "harmful_steps": 0,
        "harmful_diagnoses": 0,
        "not_recorded_calls": 0,
    }
    assert report["summary"]["note_where_plan"] == 1


def test_any_step_where_then_was_a_note_is_harmful(
    records: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """badconf's diagnosis alone (by its run id): where the runbook left a note (its config
    is broken), the model restarts it: a plan where a note was, and its step harmful."""
    badconf = sorted(path.name.removesuffix(".json.gz") for path in records.glob("*.json.gz"))[-1]
    turns = [
        ToolCall(READ, {"unit": "badconf.service"}),
        ToolCall("submit_plan", _plan(("restart_unit", "badconf.service", "failed"))),
    ]
    with ScriptedOpenAI(turns) as server:
        report = _replay(
            capsys,
            "--model-url", server.base_url,
            "--config", str(config),
            "--records", str(records),
            badconf,
        )  # fmt: skip

    [replayed] = report["replays"]
    assert replayed["unit"] == "badconf.service" and replayed["then"]["kind"] == "note"
    assert replayed["harmful"] == ["restart_unit badconf.service"]
    summary = report["summary"]
    assert (summary["harmful_steps"], summary["plan_where_note"], summary["differ"]) == (1, 1, 1)


def test_an_unreachable_endpoint_makes_every_diagnosis_a_model_error(
    records: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens at the model's URL: each diagnosis ends with the policy's error
    note, naming the endpoint; all three are counted as model errors and the replay
    still exits 0 with its report."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    report = _replay(capsys, "--model-url", url, "--config", str(config), "--records", str(records))

    assert [r["model_error"] is not None for r in report["replays"]] == [True, True, True]
    assert all(url in r["model_error"] for r in report["replays"])
    summary = report["summary"]
    assert (summary["model_errors"], summary["agree"], summary["differ"]) == (3, 0, 0)
    assert summary["failed"] == 0 and summary["tokens"] == 0


def test_opsbot_replay_model_says_the_model_s_figures(
    records: Path, config: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``opsbot replay --model-url URL``: the console runs the engine with the flags (the
    key read from the llm_api_key file next to the config, never passed) and prints, under
    each diagnosis, the model's tokens, seconds, its plan against the outcome and a harmful
    step; then the model's figures in all. Exit 4: a diagnosis differs."""
    from opsbot_cli.main import main as opsbot

    (config.parent / "llm_api_key").write_text(KEY + "\n")
    (config.parent / "llm_api_key").chmod(0o600)
    monkeypatch.setenv("OPSBOT_DIAGNOSE_RECORDS", str(records))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    turns = [KILLED_AGAIN, APP_AND_A_RESTART, BADCONF_NOTE]
    capfd.readouterr()  # what recording the diagnoses logged
    with ScriptedOpenAI([turn for diagnosis in turns for turn in diagnosis]) as server:
        status = opsbot(
            ["replay", "--since", "1h", "--config", str(config), "--model-url", server.base_url]
        )
        served = _tokens_served(server, turns)
    assert {r.headers["authorization"] for r in server.chat_requests} == {f"Bearer {KEY}"}

    printed = capfd.readouterr().out
    lines = printed.splitlines()
    assert status == 4 and KEY not in printed
    assert all(len(line) <= 100 for line in lines)
    model = [line for line in lines if line.startswith("  model: ")]
    assert model[0] == f"  model: {served[0]} tokens, " + model[0].split(", ")[1]
    assert model[0].endswith("; against the outcome: right")
    assert model[1].endswith("; HARMFUL: restart_unit app.service")
    assert f"model config-model at {server.base_url}: 2 of 3 answered agree" in printed
    assert "1 right, 0 wrong, 0 missed" in " ".join(printed.split())
    assert f"median {statistics.median(served):g}, total {sum(served)};" in printed
    assert "     1  HARMFUL steps (outside the plan then, or where a note was)" in lines
    assert "     0  model errors (no answer: counted in neither agree nor differ)" in lines


def test_the_flags_come_before_the_environment_and_the_key_never_from_them(
    tmp_path: Path,
) -> None:
    """``--model-url`` and ``--model-name`` win over LLM_API_URL and LLM_MODEL (and the
    config); the key is still LLM_API_KEY's, and the report's model object holds none."""
    from diagnose_svc.replay import model_endpoint, model_json
    from shared_schema import ModelSettings

    env = {
        "LLM_API_URL": "http://10.0.0.1:8080/v1",
        "LLM_MODEL": "env-model",
        "LLM_API_KEY": KEY,
    }
    settings = ModelSettings(api_url="http://10.0.0.2:8080/v1", model="config-model")
    endpoint = model_endpoint(
        settings,
        tmp_path / "opsbot.toml",
        url="http://127.0.0.1:8080/v1",
        name="flag-model",
        environ=env,
    )

    assert (endpoint.api_url, endpoint.model) == ("http://127.0.0.1:8080/v1", "flag-model")
    assert endpoint.api_key is not None and endpoint.api_key.get_secret_value() == KEY
    assert KEY not in json.dumps(model_json(endpoint))
