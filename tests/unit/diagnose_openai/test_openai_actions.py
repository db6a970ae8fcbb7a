"""How a chat completion becomes an action, over a real local server (and, for reply
shapes the scripted server does not produce, httpx.MockTransport as the parsing seam)."""

from typing import Any

import httpx
import pytest

from diagnose_svc.actions import CallTool, CallTools, FinalNote, SubmitPlan, Transcript
from diagnose_svc.policies.prompt import RAW_ARGUMENTS_KEY
from shared_schema import Plan, parse_plan
from testbed.scripted_openai import (
    Reasoning,
    ScriptedOpenAI,
    Text,
    ToolCall,
    approx_tokens,
)
from tests.unit.diagnose_openai.conftest import JOURNAL, UNIT_STATUS, MakePolicy

PLAN = {
    "goal": "Restart web.service after a transient crash",
    "steps": [
        {
            "tool": "restart_unit",
            "args": {"unit": "web.service"},
            "expect": {"active_state": ["failed"]},
            "reason": "one-off segfault, config is valid",
        }
    ],
}


def test_tool_call_becomes_call_tool_with_parsed_args(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A tool call in the reply is a CallTool with the JSON arguments decoded into a dict,
    and the assistant's text alongside it is kept as the thought."""
    server.add(ToolCall("journal", {"unit": "web.service", "lines": 50}, "Check the log."))
    policy = make_policy(server.base_url)

    proposal = policy.propose(transcript, [UNIT_STATUS, JOURNAL])

    assert proposal.action == CallTool(
        tool="journal", args={"unit": "web.service", "lines": 50}, thought="Check the log."
    )


def test_submit_plan_becomes_submit_plan(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A submit_plan call is a SubmitPlan whose plan is the arguments object, and that
    object is a plan shared_schema accepts."""
    server.add(ToolCall("submit_plan", PLAN))
    policy = make_policy(server.base_url)

    action = policy.propose(transcript, [UNIT_STATUS]).action

    assert isinstance(action, SubmitPlan)
    assert action.plan == PLAN
    assert isinstance(parse_plan(action.plan), Plan)


def test_submit_plan_wrapped_in_plan_key_is_unwrapped(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Arguments of exactly {"plan": {...}} (a common slip of small models) yield the inner
    plan, not a plan with a "plan" key."""
    server.add(ToolCall("submit_plan", {"plan": PLAN}))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == SubmitPlan(plan=PLAN)


def test_final_note_call_becomes_final_note(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A final_note call is a FinalNote with the text argument."""
    server.add(ToolCall("final_note", {"text": "Config syntax error on line 3; fix by hand."}))

    action = make_policy(server.base_url).propose(transcript, [JOURNAL]).action

    assert action == FinalNote(text="Config syntax error on line 3; fix by hand.")


def test_plain_text_reply_is_final_note(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A reply without tool calls is taken as a final note with the assistant's text."""
    server.add(Text("The unit is running again; nothing to do."))

    action = make_policy(server.base_url).propose(transcript, [JOURNAL]).action

    assert action == FinalNote(text="The unit is running again; nothing to do.")


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("content", ["", None])
def test_empty_content_falls_back_to_reasoning(
    server: ScriptedOpenAI,
    make_policy: MakePolicy,
    transcript: Transcript,
    field: str,
    content: str | None,
) -> None:
    """When content is empty or null and a reasoning model put its text in
    reasoning_content (or reasoning), that text is the final note."""
    server.add(Reasoning("Disk is full; an operator must free space.", field, content))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text="Disk is full; an operator must free space.")


@pytest.mark.parametrize(
    ("content", "note"),
    [
        (
            "<think>check the port</think>\nPort 80 is taken by another daemon.",
            "Port 80 is taken by another daemon.",
        ),
        ("<think>only thoughts, the answer never came", "only thoughts, the answer never came"),
        ("thoughts opened by the template</think>The answer.", "The answer."),
    ],
)
def test_think_blocks_are_not_the_answer(
    server: ScriptedOpenAI,
    make_policy: MakePolicy,
    transcript: Transcript,
    content: str,
    note: str,
) -> None:
    """<think> blocks in content are dropped when text follows them, and used only when
    nothing else was said."""
    server.add(Text(content))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text=note)


def test_empty_reply_is_a_note_that_says_so(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A reply with neither tool call nor any text becomes a note saying the model
    returned nothing, never an empty note."""
    server.add(Text(""))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert isinstance(action, FinalNote)
    assert "empty reply" in action.text and "'stop'" in action.text


def test_usage_tokens_are_reported(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """The Proposal carries usage.prompt_tokens and usage.completion_tokens as the
    server reported them."""
    server.add(ToolCall("unit_status", {"unit": "web.service"}))

    proposal = make_policy(server.base_url).propose(transcript, [UNIT_STATUS])

    body = server.chat_requests[0].body
    assert proposal.prompt_tokens == approx_tokens(
        {"messages": body["messages"], "tools": body["tools"]}
    )
    assert proposal.prompt_tokens > 500  # the system prompt and the plan schema
    assert proposal.completion_tokens > 0


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"a string"'])
def test_arguments_that_are_not_an_object_go_back_as_raw(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, arguments: str
) -> None:
    """Arguments that are not a JSON object give a CallTool carrying them under "_raw",
    so the runtime answers with an argument error the model can correct."""
    server.add(ToolCall("journal", arguments))

    action = make_policy(server.base_url).propose(transcript, [JOURNAL]).action

    assert action == CallTool(tool="journal", args={RAW_ARGUMENTS_KEY: arguments})


def test_broken_plan_arguments_go_to_the_validator(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Unparseable submit_plan arguments still make a SubmitPlan (holding "_raw"), so the
    validator answers REVISE instead of the run ending."""
    server.add(ToolCall("submit_plan", '{"goal": "restart", "steps": ['))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == SubmitPlan(plan={RAW_ARGUMENTS_KEY: '{"goal": "restart", "steps": ['})
    assert not isinstance(parse_plan(action.plan), Plan)


def test_broken_final_note_arguments_become_the_note(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Unparseable final_note arguments are kept as the note's text: the words reach the
    operator even when the JSON around them is broken."""
    server.add(ToolCall("final_note", '{"text": "disk full'))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text='{"text": "disk full')


def test_empty_arguments_string_is_an_empty_object(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """An empty arguments string (servers send it for tools without parameters) is {}."""
    server.add(ToolCall("failed_units", ""))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == CallTool(tool="failed_units", args={})


def _reply(message: dict[str, Any], finish: str = "tool_calls") -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            },
        )

    return httpx.MockTransport(handler)


def test_a_finishing_call_among_several_ends_the_run(
    make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A reply that calls a read tool and final_note at once finishes: the note wins, the
    read is not made (the model has decided)."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "journal", "arguments": "{}"}},
            {
                "id": "b",
                "type": "function",
                "function": {"name": "final_note", "arguments": '{"text": "done"}'},
            },
        ],
    }
    policy = make_policy("http://model.invalid/v1", transport=_reply(message))

    proposal = policy.propose(transcript, [JOURNAL])

    assert proposal.action == FinalNote(text="done")
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (0, 0)  # no usage sent


def test_several_read_calls_are_one_batch(make_policy: MakePolicy, transcript: Transcript) -> None:
    """Parallel tool calls (OpenAI, vLLM and llama.cpp server send several in one message,
    some without an ``id``, some with ``finish_reason`` "stop") are one CallTools batch, in
    order: the runtime counts them as one step."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"type": "function", "function": {"name": "journal", "arguments": '{"unit": "a"}'}},
            {"id": "", "type": "function", "function": {"name": "status", "arguments": {}}},
        ],
    }
    policy = make_policy("http://model.invalid/v1", transport=_reply(message, finish="stop"))

    action = policy.propose(transcript, [JOURNAL]).action

    assert action == CallTools(
        calls=(CallTool(tool="journal", args={"unit": "a"}), CallTool(tool="status", args={}))
    )


def test_arguments_sent_as_an_object_and_content_as_parts(
    make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Arguments already decoded into an object, and content given as a list of text parts,
    are both understood."""
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Looking "}, {"type": "text", "text": "closer."}],
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "journal", "arguments": {"unit": "web.service"}},
            }
        ],
    }
    policy = make_policy("http://model.invalid/v1", transport=_reply(message))

    action = policy.propose(transcript, [JOURNAL]).action

    assert action == CallTool(
        tool="journal", args={"unit": "web.service"}, thought="Looking closer."
    )


def test_reply_arguments_round_trip_as_json(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """Non-ASCII text in arguments survives the JSON string encoding of the wire format."""
    server.add(ToolCall("final_note", {"text": "Prüfe /etc/nginx — Zeile 3"}))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text="Prüfe /etc/nginx — Zeile 3")


def test_empty_final_note_says_so(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A final_note with empty text becomes a note saying it was empty, never ""."""
    server.add(ToolCall("final_note", {"text": "  "}))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text="the model finished with an empty note")
