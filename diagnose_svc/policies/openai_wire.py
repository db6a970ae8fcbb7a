"""The OpenAI chat completions format: a transcript as ``messages`` and ``tools``, and
a reply's ``choices[0].message`` as one action.

Each earlier turn is replayed as an assistant message with one ``tool_calls`` entry (its
``thought`` as content) answered by a ``tool`` message with the observation. A reply:

* the first tool call (more are ignored) -> an action (prompt.action_for_call);
* no tool call -> ``FinalNote`` with the assistant's text; when ``content`` is empty
  (reasoning models), the text of ``reasoning_content``, ``reasoning`` or a ``<think>``
  block in content is used;
* ``usage.prompt_tokens`` / ``completion_tokens`` are the tokens it cost (0 if absent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from diagnose_svc.actions import Action, FinalNote, Proposal, ToolSpec, Transcript
from diagnose_svc.policies.prompt import (
    action_for_call,
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


def messages_for(transcript: Transcript) -> list[dict[str, Any]]:
    """The chat history for ``transcript``: system, task, then one call and answer per turn.

    Ids are the turn's ``tool_call_id`` when set, else ``call`` + 5 digits: 9
    alphanumeric characters, which the strictest chat templates (Mistral's) demand, and
    the same on every request, so a server's prompt cache keeps matching.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": task(transcript)},
    ]
    used: set[str] = set()
    for index, turn in enumerate(transcript.turns, start=1):
        call_id = turn.tool_call_id or f"call{index:05d}"
        if call_id in used:  # a server pairs calls and answers by id: keep them unique
            call_id = f"call{index:05d}"
        used.add(call_id)
        name, args = call_of(turn.action)
        messages.append(
            {
                "role": "assistant",
                "content": turn.action.thought or None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(args, ensure_ascii=False, default=str),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": turn.observation})
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


def action_from_message(message: Mapping[str, Any], finish_reason: Any = None) -> Action:
    """Turn a reply's ``choices[0].message`` into one action (see the module docstring)."""
    answer, thinking = split_thinking(_text(message.get("content")))
    reasoning = (
        _text(message.get("reasoning_content")) or _text(message.get("reasoning")) or thinking
    ).strip()
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict):
        function = calls[0].get("function")
        function = function if isinstance(function, dict) else {}
        return action_for_call(str(function.get("name") or ""), function.get("arguments"), answer)
    text = answer or reasoning
    if not text:
        text = f"the model returned an empty reply (finish_reason {finish_reason!r})"
    return FinalNote(text=text)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def proposal_from_reply(reply: Mapping[str, Any]) -> Proposal:
    """A chat completion as one proposal; NotACompletion if it has no ``choices[0].message``."""
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
