"""The baseline of bench.diagnosis_cost: a minimal ReAct loop over the same read tools and
the same OpenAI-compatible server, without anything opsbot does to keep prompts small.

It sends the same system prompt, task and tool list as diagnose_svc's OpenAICompatPolicy
and replays every turn each request, as that policy does; the difference is what an
observation is. Here it is the tool's *full* result, as compact JSON: no redaction, no
2,000-character cut, and (with ``unbounded=True``) none of the tools' own bounds either
(tail_journal's 1,800-character output budget and 500-character message cut,
read_unit_status's dependency-list limits, list_failed_units' and http_get_health's
limits): the same code reading the same data, with its limits lifted. That is what a loop
that "just dumps the tool output" shows its model.

It takes the first tool call of each reply; ``submit_plan`` and ``final_note`` end it.
No step or token limit besides ``max_steps``; no cycle detection; no readiness rule.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from diagnose_svc.policies.openai_wire import tools_payload
from diagnose_svc.policies.prompt import FINAL_NOTE, SUBMIT_PLAN, system_prompt
from diagnose_svc.submitter import Submitter
from diagnose_svc.tools import Tool, ToolContext
from shared_schema import Plan, parse_plan

BIG = 10**9
#: (module, name, value): the tools' bounds, lifted for the unbounded baseline.
_LIFTS: tuple[tuple[str, str, Any], ...] = (
    ("diagnose_svc.tools.tail_journal", "TOOL_OUTPUT_BUDGET", BIG),
    ("diagnose_svc.tools.tail_journal", "JOURNAL_MESSAGE_LIMIT", BIG),
    ("diagnose_svc.tools.read_unit_status", "UNIT_LIST_LIMIT", BIG),
    ("diagnose_svc.tools.read_unit_status", "fit_status", lambda status, budget=0: status),
    ("diagnose_svc.tools.list_failed_units", "FAILED_UNITS_LIMIT", BIG),
    ("diagnose_svc.tools.list_failed_units", "TOOL_OUTPUT_BUDGET", BIG),
    ("diagnose_svc.tools.http_get_health", "HEALTH_BODY_LIMIT", BIG),
    ("diagnose_svc.tools.http_get_health", "HEALTH_BODY_READ_BYTES", 1024 * 1024),
)


@contextlib.contextmanager
def unbounded_tools() -> Iterator[list[str]]:
    """Lift the read tools' own output bounds while inside; yields what was lifted."""
    saved: list[tuple[Any, str, Any]] = []
    lifted: list[str] = []
    try:
        for module_name, name, value in _LIFTS:
            module = importlib.import_module(module_name)
            if hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, value)
                lifted.append(f"{module_name}.{name}")
        yield lifted
    finally:
        for module, name, old in reversed(saved):
            setattr(module, name, old)


@dataclass
class NaiveResult:
    kind: str  # "plan" or "note"
    plan_sha256: str | None
    note: str | None
    steps: int
    prompt_tokens: int  # as the server reported them, summed
    observation_chars: list[int] = field(default_factory=list)


def naive_diagnosis(
    unit: str,
    symptom: str,
    base_url: str,
    tools: Mapping[str, Tool],
    context: ToolContext,
    submitter: Submitter,
    *,
    model: str = "scripted-model",
    max_steps: int = 6,
) -> NaiveResult:
    task = f"The unit {unit} is down." + (f" Symptom: {symptom}" if symptom else "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": task},
    ]
    payload = tools_payload([tool.spec() for tool in tools.values()])
    prompt_tokens = 0
    sizes: list[int] = []
    with httpx.Client(timeout=60, trust_env=False) as client:
        for step in range(1, max_steps + 1):
            body = {"model": model, "messages": messages, "tools": payload, "stream": False}
            response = client.post(f"{base_url}/chat/completions", json=body)
            response.raise_for_status()
            reply = response.json()
            prompt_tokens += int(reply.get("usage", {}).get("prompt_tokens", 0))
            message = reply["choices"][0]["message"]
            call = message["tool_calls"][0]
            name = call["function"]["name"]
            args = json.loads(call["function"]["arguments"] or "{}")
            messages.append(
                {"role": "assistant", "content": message.get("content"), "tool_calls": [call]}
            )
            if name == FINAL_NOTE:
                return NaiveResult(
                    "note", None, str(args.get("text", "")), step, prompt_tokens, sizes
                )
            if name == SUBMIT_PLAN:
                plan = parse_plan(args)
                if not isinstance(plan, Plan):
                    raise ValueError(f"scripted plan is not valid: {plan}")
                submitter.submit(plan, "naive", "")
                return NaiveResult("plan", plan.fingerprint(), None, step, prompt_tokens, sizes)
            tool = tools[name]
            try:
                output = tool(tool.parse_args(args), context)
                observation = json.dumps(
                    output.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":")
                )
            except Exception as exc:  # a naive loop shows the error and goes on
                observation = json.dumps({"error": str(exc)})
            sizes.append(len(observation))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
    return NaiveResult("note", None, "step limit", max_steps, prompt_tokens, sizes)
