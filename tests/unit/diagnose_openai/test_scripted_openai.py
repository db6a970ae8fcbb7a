"""The scripted OpenAI-compatible server itself: wire format, models list, recording,
token approximation, clean shutdown, and use as a script."""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from diagnose_svc.actions import CallTool, FinalNote, Transcript
from diagnose_svc.model_settings import ModelEndpoint
from diagnose_svc.policies import ModelUnavailable, OpenAICompatPolicy
from testbed.scripted_openai import (
    ScriptedOpenAI,
    Text,
    ToolCall,
    approx_tokens,
    load_script,
)

REPO = Path(__file__).resolve().parents[3]


def test_reply_is_in_the_chat_completion_wire_format() -> None:
    """A scripted tool call comes back as an OpenAI chat.completion: id, object, created,
    model, one choice with role/content/tool_calls (arguments a JSON string),
    finish_reason tool_calls, and usage whose total is the sum."""
    with ScriptedOpenAI([ToolCall("journal", {"unit": "a.service"})]) as server:
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        ).json()

    assert reply["object"] == "chat.completion"
    assert reply["id"] and isinstance(reply["created"], int) and reply["model"] == "m"
    (choice,) = reply["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "journal"
    assert json.loads(call["function"]["arguments"]) == {"unit": "a.service"}
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] == approx_tokens(
        {"messages": [{"role": "user", "content": "hi"}], "tools": []}
    )


def test_text_reply_finishes_with_stop() -> None:
    """A scripted text turn is an assistant message with content and finish_reason stop."""
    with ScriptedOpenAI([Text("done")]) as server:
        reply = httpx.post(f"{server.base_url}/chat/completions", json={"messages": []}).json()

    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "done"}


def test_models_endpoint_lists_the_model() -> None:
    """GET /v1/models lists the one model the server plays, as an OpenAI list object."""
    with ScriptedOpenAI(model="qwen-scripted") as server:
        reply = httpx.get(f"{server.base_url}/models")

    assert reply.status_code == 200
    assert reply.json()["object"] == "list"
    assert [m["id"] for m in reply.json()["data"]] == ["qwen-scripted"]
    assert server.received[0].method == "GET"


def test_exhausted_script_answers_400_which_the_policy_reports() -> None:
    """Past the last turn the server answers HTTP 400 "script exhausted", which reaches
    the caller in ModelUnavailable's message instead of a hang or a retry loop."""
    with (
        ScriptedOpenAI([ToolCall("journal", {})]) as server,
        OpenAICompatPolicy(ModelEndpoint(api_url=server.base_url, model="m")) as policy,
    ):
        assert isinstance(policy.propose(Transcript(unit="a.service"), []).action, CallTool)
        with pytest.raises(ModelUnavailable, match="script exhausted after 1 turns"):
            policy.propose(Transcript(unit="a.service"), [])

    assert server.served == 1 and len(server.chat_requests) == 2


def test_longer_prompts_count_more_tokens_deterministically() -> None:
    """The token approximation is the same for the same request, and grows with the
    prompt: loops can be compared by it."""
    short = {"messages": [{"role": "user", "content": "x"}]}
    long = {"messages": [{"role": "user", "content": "x" * 400}]}
    with ScriptedOpenAI([Text("a"), Text("a"), Text("a")]) as server:
        counts = [
            httpx.post(f"{server.base_url}/chat/completions", json=body).json()["usage"][
                "prompt_tokens"
            ]
            for body in (short, short, long)
        ]

    assert counts[0] == counts[1]
    assert counts[2] == counts[0] + 100


def test_close_cuts_a_pending_delay_short_and_frees_the_port() -> None:
    """Closing the server while a reply is delayed returns promptly, and the port no
    longer accepts connections afterwards."""
    server = ScriptedOpenAI([ToolCall("journal", {}, delay=30.0)]).start()
    port = server.port
    with httpx.Client(timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
        client.post(f"{server.base_url}/chat/completions", json={"messages": []})

    started = time.monotonic()
    server.close()

    assert time.monotonic() - started < 2.0
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


def test_script_file_turns_parse(tmp_path: Path) -> None:
    """A script file ({"model", "turns"}) yields the model name and typed turns."""
    script = tmp_path / "turns.json"
    script.write_text(
        json.dumps(
            {
                "model": "m1",
                "turns": [
                    {"tool": "journal", "arguments": {"unit": "a.service"}, "delay": 0.5},
                    {"text": "done"},
                    {"reasoning": "hm", "field": "reasoning"},
                    {"status": 429, "retry_after": "1"},
                    {"raw": "<html>", "content_type": "text/html"},
                ],
            }
        )
    )

    model, turns = load_script(script)

    assert model == "m1"
    assert [type(t).__name__ for t in turns] == [
        "ToolCall",
        "Text",
        "Reasoning",
        "HttpError",
        "Raw",
    ]
    assert turns[0] == ToolCall("journal", {"unit": "a.service"}, delay=0.5)


def test_runs_as_a_script_until_sigterm(tmp_path: Path) -> None:
    """`python -m testbed.scripted_openai --script F --port 0 --record R` prints its
    base URL, serves the script to a real policy, records the request, and exits 0 on
    SIGTERM."""
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"tool": "final_note", "arguments": {"text": "ok"}}]))
    record = tmp_path / "requests.jsonl"
    argv = [
        sys.executable,
        "-m",
        "testbed.scripted_openai",
        "--script",
        str(script),
        "--port",
        "0",
        "--record",
        str(record),
    ]
    with subprocess.Popen(
        argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("listening http://127.0.0.1:")
            base_url = line.removeprefix("listening ")
            settings = ModelEndpoint(api_url=base_url, model="m")
            with OpenAICompatPolicy(settings) as policy:
                action = policy.propose(Transcript(unit="a.service"), []).action
        finally:
            process.send_signal(signal.SIGTERM)
            returncode = process.wait(timeout=10)

    assert action == FinalNote(text="ok")
    assert returncode == 0
    (recorded,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert recorded["path"] == "/v1/chat/completions"
    assert recorded["body"]["model"] == "m"
