"""The OpenAI chat completions format: a transcript as ``messages`` and ``tools``, and
a reply's ``choices[0].message`` as one action.

Each earlier step is replayed as an assistant message with its ``tool_calls`` (one per
call of the step; the first call's ``thought`` as content), each answered by a ``tool``
message with its observation. A reply becomes one action (prompt.action_for_calls), as
real servers send it (each of these has a test):

* ``tool_calls`` whose ``arguments`` are a JSON string or an object, with or without an
  ``id``, one or several (several read tools: one batch, one step), with any
  ``finish_reason`` ("tool_calls", or "stop" as some servers say);
* models without native tool calling write their calls into ``content``: as
  ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks (Hermes, Qwen) or as
  a bare JSON object ``{"name": ..., "arguments"|"parameters": ...}`` (Llama), fenced or
  not;
* no call at all -> ``FinalNote`` with the assistant's text; when ``content`` is empty
  (reasoning models), the text of ``reasoning_content``, ``reasoning`` or a ``<think>``
  block in content is used;
* a 200 response that carries an ``error`` object instead of choices (llama.cpp server,
  vLLM behind a gateway, which may put ``"object": "error"`` at the top) ->
  NotACompletion with the server's message;
* ``usage.prompt_tokens`` / ``completion_tokens`` are the tokens it cost (0 if absent).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from diagnose_svc.actions import Action, FinalNote, Proposal, ToolSpec, Transcript, Turn
from diagnose_svc.policies.prompt import (
    action_for_calls,
    call_of,
    finishing_tools,
    split_thinking,
    system_prompt,
    task,
)


class NotACompletion(ValueError):
    """A reply that is JSON but not a chat completion."""


def _function(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


def tools_payload(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``tools`` for a request: the visible read tools, then the finishing tools."""
    return [_function(t) for t in [*tools, *finishing_tools()]]


def _steps(turns: Sequence[Turn]) -> list[list[Turn]]:
    """The transcript's turns grouped by step: the calls of one batch come together."""
    steps: list[list[Turn]] = []
    for turn in turns:
        if steps and steps[-1][0].step == turn.step:
            steps[-1].append(turn)
        else:
            steps.append([turn])
    return steps


def messages_for(transcript: Transcript) -> list[dict[str, Any]]:
    """The chat history for ``transcript``: system, task, then per step one assistant
    message with that step's calls and one tool message answering each.

    Ids are the turn's ``tool_call_id`` when set, else ``call`` + 5 digits: 9
    alphanumeric characters, which the strictest chat templates (Mistral's) demand, and
    the same on every request, so a server's prompt cache keeps matching.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": task(transcript)},
    ]
    used: set[str] = set()
    index = 0
    for step in _steps(transcript.turns):
        calls: list[dict[str, Any]] = []
        answers: list[dict[str, Any]] = []
        for turn in step:
            index += 1
            call_id = turn.tool_call_id or f"call{index:05d}"
            if call_id in used:  # a server pairs calls and answers by id: keep them unique
                call_id = f"call{index:05d}"
            used.add(call_id)
            name, args = call_of(turn.action)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(args, ensure_ascii=False, default=str),
                    },
                }
            )
            answers.append({"role": "tool", "tool_call_id": call_id, "content": turn.observation})
        thought = step[0].action.thought or None
        messages.append({"role": "assistant", "content": thought, "tool_calls": calls})
        messages.extend(answers)
    return messages


def request_body(model: str, transcript: Transcript, tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON body of one chat completions request."""
    return {
        "model": model,
        "messages": messages_for(transcript),
        "tools": tools_payload(tools),
        "stream": False,
    }


def _text(value: Any) -> str:
    """Message content as text: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part["text"]
            for part in value
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _call_in_text(text: str) -> tuple[str, Any] | None:
    """A call written as JSON text: {"name": ..., "arguments"|"parameters": ...}."""
    fenced = _FENCE.match(text.strip())
    try:
        value = json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    if "arguments" in value:
        return value["name"], value["arguments"]
    if "parameters" in value:
        return value["name"], value["parameters"]
    return None


def calls_in_content(answer: str) -> list[tuple[str, Any]]:
    """Tool calls a model without native tool calling wrote into its content."""
    tagged = [_call_in_text(block) for block in _TOOL_CALL_TAG.findall(answer)]
    if tagged:
        return [call for call in tagged if call is not None]
    call = _call_in_text(answer)
    return [call] if call is not None else []


def native_calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``tool_calls`` as (name, raw arguments), in order; malformed entries are skipped."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            out.append((str(function.get("name") or ""), function.get("arguments")))
    return out


def action_from_message(message: Mapping[str, Any], finish_reason: Any = None) -> Action:
    """Turn a reply's ``choices[0].message`` into one action (see the module docstring)."""
    answer, thinking = split_thinking(_text(message.get("content")))
    reasoning = (
        _text(message.get("reasoning_content")) or _text(message.get("reasoning")) or thinking
    ).strip()
    calls = native_calls(message)
    if calls:
        return action_for_calls(calls, answer)
    written = calls_in_content(answer)
    if written:
        return action_for_calls(written)
    text = answer or reasoning
    if not text:
        text = f"the model returned an empty reply (finish_reason {finish_reason!r})"
    return FinalNote(text=text)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def proposal_from_reply(reply: Mapping[str, Any]) -> Proposal:
    """A chat completion as one proposal; NotACompletion if it has no ``choices[0].message``
    (with the server's own message when it sent an ``error`` object)."""
    error = reply.get("error")
    if reply.get("object") == "error":  # vLLM behind some gateways: the error at the top
        error = reply
    if error is not None and not reply.get("choices"):
        said = error.get("message") if isinstance(error, dict) else error
        raise NotACompletion(f"answered 200 with an error: {str(said)[:200]}")
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise NotACompletion("answered without choices[0].message")
    action = action_from_message(choice["message"], choice.get("finish_reason"))
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Proposal(
        action=action,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
    )
