"""What real OpenAI-compatible servers send, through a real HTTP server, and what the
policy makes of it: an action, or a clear error; never a crash of the loop, never
anything that reaches the executor unvalidated. Each quirk is named with the server that
sends it (docs/diagnosis.md, "Hosted models", lists the servers checked this way)."""

from __future__ import annotations

from typing import Any

import pytest

from diagnose_svc.actions import CallTool, CallTools, FinalNote, Transcript
from diagnose_svc.policies.http_retry import ModelUnavailable
from diagnose_svc.policies.openai_wire import messages_for
from diagnose_svc.runtime import run_diagnosis
from shared_schema import DiagnoseSettings
from testbed.scripted_openai import (
    Cut,
    ErrorObject,
    HttpError,
    Message,
    ScriptedOpenAI,
    Text,
    ToolCall,
    ToolCalls,
)
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost
from tests.unit.diagnose_openai.conftest import JOURNAL, MakePolicy, Sleeps

STATUS = {"unit": "killed.service"}


def propose(server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript) -> Any:
    return make_policy(server.base_url).propose(transcript, [JOURNAL]).action


@pytest.mark.parametrize("objects", [False, True], ids=["string (OpenAI)", "object (llama.cpp)"])
def test_arguments_as_a_json_string_or_as_an_object(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, objects: bool
) -> None:
    """OpenAI sends ``arguments`` as a JSON string; llama.cpp server (ggml-org/llama.cpp
    #20198) and Ollama may send the object itself: the same call either way."""
    server.add(ToolCalls([ToolCall("journal", {"unit": "a.service"})], objects=objects))
    assert propose(server, make_policy, transcript) == CallTool("journal", {"unit": "a.service"})


def test_calls_without_an_id_get_ids_of_ours_when_replayed(
    server: ScriptedOpenAI, make_policy: MakePolicy
) -> None:
    """Ollama leaves out each call's ``id`` (BerriAI/litellm #24095): the call is taken,
    and the next request replays it under an id of ours that its answer refers to."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    server.add(
        ToolCalls([ToolCall("read_unit_status", STATUS)], ids=False),
        ToolCall("final_note", {"text": "done"}),
    )
    verdict = run_diagnosis(
        "killed.service",
        "down",
        make_policy(server.base_url),
        host.tools(),
        FakeSubmitter(),
        DiagnoseSettings(),
    )
    assert [e.tool for e in verdict.evidence] == ["read_unit_status"]
    replay = server.chat_requests[-1].body["messages"]
    [call] = replay[2]["tool_calls"]
    assert call["id"] and replay[3] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": replay[3]["content"],
    }


def test_several_calls_in_one_message_are_one_step(
    server: ScriptedOpenAI, make_policy: MakePolicy
) -> None:
    """Parallel tool calls, with finish_reason "stop" as vLLM sends for them
    (vllm-project/vllm #25054): one batch, run as one step of the real loop, replayed as
    one assistant message with both calls and one tool message each."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    server.add(
        ToolCalls(
            [
                ToolCall("read_unit_status", STATUS),
                ToolCall("tail_journal", {"unit": "killed.service", "lines": 5}),
            ],
            finish="stop",
        ),
        ToolCall("final_note", {"text": "killed by SIGKILL"}),
    )
    verdict = run_diagnosis(
        "killed.service",
        "down",
        make_policy(server.base_url),
        host.tools(),
        FakeSubmitter(),
        DiagnoseSettings(),
    )
    assert verdict.steps_used == 2
    assert [(e.step, e.tool) for e in verdict.evidence] == [
        (1, "read_unit_status"),
        (1, "tail_journal"),
    ]
    replay = server.chat_requests[-1].body["messages"]
    assistant = [m for m in replay if m["role"] == "assistant"]
    assert len(assistant) == 1 and len(assistant[0]["tool_calls"]) == 2
    answered = [m["tool_call_id"] for m in replay if m["role"] == "tool"]
    assert answered == [call["id"] for call in assistant[0]["tool_calls"]]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_with_empty_content_is_the_note(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, field: str
) -> None:
    """DeepSeek and vLLM's reasoning parsers put the text in ``reasoning_content``,
    Ollama and OpenRouter in ``reasoning``; ``content`` is empty: the reasoning is the note."""
    server.add(Message({"role": "assistant", "content": "", field: "the unit is fine"}))
    assert propose(server, make_policy, transcript) == FinalNote(text="the unit is fine")


def test_think_blocks_in_content_are_neither_answer_nor_thought(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Qwen3 and DeepSeek-R1 served raw put ``<think>...</think>`` into content: what is
    said outside it is the answer; a call's thought never carries the thinking."""
    server.add(
        Message({"role": "assistant", "content": "<think>restart it?</think>It runs."}),
        ToolCalls([ToolCall("journal", {})], content="<think>look first</think>"),
    )
    assert propose(server, make_policy, transcript) == FinalNote(text="It runs.")
    assert propose(server, make_policy, transcript) == CallTool("journal", {}, thought="")


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>\n{"name": "journal", "arguments": {"unit": "a.service"}}\n</tool_call>',
        '{"name": "journal", "parameters": {"unit": "a.service"}}',
        '```json\n{"name": "journal", "arguments": {"unit": "a.service"}}\n```',
    ],
    ids=["<tool_call> tags (Hermes, Qwen)", "bare JSON (Llama)", "fenced JSON"],
)
def test_calls_written_into_content_by_models_without_tool_calling(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, content: str
) -> None:
    """Served without a tool parser, Hermes and Qwen models write ``<tool_call>`` blocks
    into content (ollama/ollama #6390), Llama models a bare JSON object: each is the call
    it spells."""
    server.add(Message({"role": "assistant", "content": content}))
    assert propose(server, make_policy, transcript) == CallTool("journal", {"unit": "a.service"})


def test_two_tool_call_blocks_are_one_batch(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Two ``<tool_call>`` blocks in one content are two calls of one step."""
    server.add(
        Message(
            {
                "role": "assistant",
                "content": '<tool_call>{"name": "journal", "arguments": {}}</tool_call>\n'
                '<tool_call>{"name": "unit_status", "arguments": {"unit": "a"}}</tool_call>',
            }
        )
    )
    assert propose(server, make_policy, transcript) == CallTools(
        calls=(CallTool("journal", {}), CallTool("unit_status", {"unit": "a"}))
    )


@pytest.mark.parametrize("top_level", [False, True], ids=["error object", "object: error"])
def test_an_error_sent_with_status_200_is_a_clear_error(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, top_level: bool
) -> None:
    """llama.cpp server answers some failures with 200 and an error (ggml-org/llama.cpp
    #14566); a vLLM behind a gateway with {"object": "error"} (runpod-workers/worker-vllm
    #57). That is ModelUnavailable quoting the server, and in a run a note (policy_error)
    after one step."""
    server.add(ErrorObject("context length exceeded", top_level=top_level))
    with pytest.raises(ModelUnavailable, match="answered 200 with an error: context length"):
        propose(server, make_policy, transcript)
    server.add(ErrorObject("context length exceeded", top_level=top_level))
    verdict = run_diagnosis(
        "killed.service",
        "down",
        make_policy(server.base_url),
        {},
        FakeSubmitter(),
        DiagnoseSettings(),
    )
    assert verdict.kind == "note" and verdict.ended_by == "policy_error"
    assert verdict.steps_used == 1 and "context length exceeded" in verdict.text


def test_a_reply_cut_off_mid_body_is_retried(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """A server (or a proxy in front of it) that closes in the middle of a reply is
    retried like a 503; cut off every time, it is ModelUnavailable saying so."""
    server.add(Cut(), Text("fine"))
    assert propose(server, make_policy, transcript) == FinalNote(text="fine")
    assert len(sleeps) == 1
    server.add(Cut(), Cut(), Cut(), Cut())
    with pytest.raises(ModelUnavailable, match="cut its reply off 4 times"):
        propose(server, make_policy, transcript)


def test_429_with_retry_after_waits_what_the_server_asks(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """OpenAI's rate limit answers 429 with Retry-After (seconds): the policy waits that
    long, then asks again."""
    server.add(HttpError(429, retry_after="2"), Text("fine"))
    assert propose(server, make_policy, transcript) == FinalNote(text="fine")
    assert sleeps == [2.0]


def test_a_replayed_batch_keeps_each_answer_with_its_call() -> None:
    """messages_for: the calls of one step are one assistant message; each observation
    follows as the tool message with that call's id."""
    from diagnose_svc.actions import Turn

    transcript = Transcript(
        unit="a.service",
        turns=[
            Turn(1, CallTool("x", {}), "one", tool_call_id="call_1"),
            Turn(1, CallTool("y", {}), "two", tool_call_id="call_1b"),
            Turn(2, CallTool("z", {}), "three", tool_call_id="call_2"),
        ],
    )
    messages = messages_for(transcript)[2:]
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "assistant", "tool"]
    assert [c["function"]["name"] for c in messages[0]["tool_calls"]] == ["x", "y"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[1:3]] == [
        ("call_1", "one"),
        ("call_1b", "two"),
    ]
