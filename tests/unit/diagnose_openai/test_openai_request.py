"""What the policy sends: endpoint, tools offered, the system prompt, the replayed
transcript and the Authorization header, as the real local server received them."""

import json

import pytest

from diagnose_svc.actions import CallTool, FinalNote, SubmitPlan, Transcript, Turn
from diagnose_svc.policies.openai_wire import messages_for
from shared_schema import WRITE_TOOLS, Plan
from testbed.scripted_openai import ScriptedOpenAI, ToolCall
from tests.unit.diagnose_openai.conftest import API_KEY, JOURNAL, UNIT_STATUS, MakePolicy


def _names(tools: list[dict[str, object]]) -> list[str]:
    return [t["function"]["name"] for t in tools]  # type: ignore[index]


def test_request_goes_to_chat_completions_under_the_base_url(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """The request is a JSON POST to {api_url}/chat/completions naming the model, even
    when api_url was given with a trailing slash."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url + "/").propose(transcript, [])

    (request,) = server.chat_requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["content-type"] == "application/json"
    assert request.body["model"] == "test-model"
    assert request.body["stream"] is False


def test_tools_offered_are_visible_tools_plus_finishing_tools(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """tools holds each visible read tool as a function (name, docstring, schema) followed
    by submit_plan, whose parameters are the Plan JSON schema without what the runtime
    writes (the symptom, the plan followed: not the model's to choose), and final_note."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url).propose(transcript, [UNIT_STATUS, JOURNAL])

    tools = server.chat_requests[0].body["tools"]
    assert _names(tools) == ["unit_status", "journal", "submit_plan", "final_note"]
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "unit_status",
            "description": UNIT_STATUS.description,
            "parameters": dict(UNIT_STATUS.parameters),
        },
    }
    shown = tools[2]["function"]["parameters"]
    whole = Plan.model_json_schema()
    assert set(whole["properties"]) - set(shown["properties"]) == {"symptom", "follows"}
    assert {k: v for k, v in whole["properties"].items() if k in shown["properties"]} == (
        shown["properties"]
    )
    assert "Symptom" not in json.dumps(shown)
    assert tools[3]["function"]["parameters"]["required"] == ["text"]


def test_no_visible_tools_offers_only_the_finishing_tools(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """When the runtime withdraws the read tools (tools=[]), only submit_plan and
    final_note are offered."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url).propose(transcript, [])

    assert _names(server.chat_requests[0].body["tools"]) == ["submit_plan", "final_note"]


def test_system_prompt_explains_the_job_and_the_executor_tools(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """The first message is a system prompt naming both finishing tools and every write
    tool a plan may use; the second names the unit and the symptom."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url).propose(transcript, [JOURNAL])

    system, task = server.chat_requests[0].body["messages"]
    assert system["role"] == "system"
    for name in (*WRITE_TOOLS, "submit_plan", "final_note", "expect", "invocation_id"):
        assert name in system["content"]
    assert task == {
        "role": "user",
        "content": "The unit web.service is down. Symptom: exited with status 1",
    }


def test_transcript_is_replayed_as_tool_calls_with_matching_ids(
    server: ScriptedOpenAI, make_policy: MakePolicy
) -> None:
    """Every turn is replayed as an assistant message with one tool call (thought as
    content, arguments as a JSON string) answered by a tool message with the same
    tool_call_id; ids are unique, and a turn's own tool_call_id is kept."""
    plan = {"goal": "g", "steps": []}
    transcript = Transcript(
        unit="web.service",
        turns=[
            Turn(1, CallTool("unit_status", {"unit": "web.service"}, "Look first."), "failed"),
            Turn(
                2,
                CallTool("journal", {"unit": "web.service"}),
                "bind: address in use",
                tool_call_id="abcXYZ123",
            ),
            Turn(3, SubmitPlan(plan), "REVISE: steps: too short", decided_by="validator"),
            Turn(4, FinalNote("nothing to do"), "a note needs a reason", decided_by="runtime"),
        ],
    )
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url).propose(transcript, [UNIT_STATUS])

    messages = server.chat_requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * 4
    calls, answers = messages[2::2], messages[3::2]
    ids = [c["tool_calls"][0]["id"] for c in calls]
    assert ids[1] == "abcXYZ123"
    assert len(set(ids)) == 4
    assert [a["tool_call_id"] for a in answers] == ids
    assert [a["content"] for a in answers] == [t.observation for t in transcript.turns]
    assert [c["content"] for c in calls] == ["Look first.", None, None, None]
    functions = [c["tool_calls"][0]["function"] for c in calls]
    assert [f["name"] for f in functions] == ["unit_status", "journal", "submit_plan", "final_note"]
    assert [json.loads(f["arguments"]) for f in functions] == [
        {"unit": "web.service"},
        {"unit": "web.service"},
        plan,
        {"text": "nothing to do"},
    ]
    assert all(c["tool_calls"][0]["type"] == "function" for c in calls)


def test_generated_ids_are_stable_and_nine_alphanumerics() -> None:
    """Generated tool_call ids are the same on every request (prompt caches keep
    matching) and 9 alphanumeric characters (what Mistral chat templates demand)."""
    transcript = Transcript(
        unit="a.service",
        turns=[Turn(i, CallTool("journal", {"unit": "a.service"}), "x") for i in range(1, 4)],
    )

    first, second = messages_for(transcript), messages_for(transcript)

    assert first == second
    ids = [m["tool_call_id"] for m in first if m["role"] == "tool"]
    assert all(len(i) == 9 and i.isalnum() for i in ids)
    assert len(set(ids)) == 3


def test_duplicate_turn_ids_are_made_unique() -> None:
    """Two turns that carry the same tool_call_id still get distinct ids on the wire,
    since a server pairs calls and answers by id."""
    transcript = Transcript(
        unit="a.service",
        turns=[
            Turn(1, CallTool("journal", {}), "x", tool_call_id="same"),
            Turn(2, CallTool("journal", {}), "y", tool_call_id="same"),
        ],
    )

    ids = [m["tool_call_id"] for m in messages_for(transcript) if m["role"] == "tool"]

    assert ids == ["same", "call00002"]


def test_api_key_is_sent_as_bearer(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """With a key set, each request carries Authorization: Bearer <key>."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url, api_key=API_KEY).propose(transcript, [])

    assert server.chat_requests[0].headers["authorization"] == f"Bearer {API_KEY}"


def test_no_authorization_header_without_a_key(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Without a key no Authorization header is sent at all (local servers need none)."""
    server.add(ToolCall("final_note", {"text": "ok"}))

    make_policy(server.base_url).propose(transcript, [])

    assert "authorization" not in server.chat_requests[0].headers


def test_proxy_settings_in_the_environment_are_ignored(
    server: ScriptedOpenAI,
    make_policy: MakePolicy,
    transcript: Transcript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HTTP(S)_PROXY in the daemon's environment does not divert requests: the config
    alone decides where the model is."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    server.add(ToolCall("final_note", {"text": "ok"}))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text="ok")
