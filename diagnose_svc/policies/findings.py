"""What a transcript has established so far, read back from the observations.

A policy sees tool outputs as JSON of the tools' own models; this module parses them back
into those models (UnitStatus, JournalTail, HealthResult), keyed by what was asked: the
unit, or the health target. An observation that does not parse (cut at the limit, or
an error) is recorded as an error for that key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from diagnose_svc.actions import CallTool, SubmitPlan, Transcript
from diagnose_svc.tools import HealthResult, JournalTail, UnitStatus
from shared_schema import canonical_json


def call_key(tool: str, args: dict[str, Any]) -> str:
    """Identifies a call: the tool and its canonical arguments."""
    return tool + " " + canonical_json(args).decode("utf-8")


@dataclass
class Findings:
    status: dict[str, UnitStatus] = field(default_factory=dict)
    status_error: dict[str, str] = field(default_factory=dict)
    journal: dict[str, JournalTail] = field(default_factory=dict)
    #: tail_journal(own_output_only=True): what the unit's own processes said.
    own_journal: dict[str, JournalTail] = field(default_factory=dict)
    journal_error: dict[str, str] = field(default_factory=dict)
    health: dict[str, HealthResult] = field(default_factory=dict)
    health_error: dict[str, str] = field(default_factory=dict)
    #: Every call made so far (call_key), answered or not: never ask twice.
    asked: set[str] = field(default_factory=set)
    #: The answer to the last plan submitted, when it was not accepted.
    plan_refused: str | None = None


def _error_of(observation: str) -> str | None:
    try:
        data = json.loads(observation)
    except ValueError:
        return "the observation could not be read (cut at the limit?)"
    # A tool's error is exactly {"error": ..., "hint"?: ...} (observation.error_text);
    # outputs may have an "error" field of their own (HealthResult).
    if isinstance(data, dict) and "error" in data and set(data) <= {"error", "hint"}:
        return str(data["error"])
    return None


def read_findings(transcript: Transcript) -> Findings:
    """Parse every answered tool call of ``transcript``."""
    found = Findings()
    for turn in transcript.turns:
        action = turn.action
        if isinstance(action, SubmitPlan):
            refused = turn.decided_by != "policy"
            found.plan_refused = turn.observation if refused else None
            continue
        if not isinstance(action, CallTool):
            continue
        args = dict(action.args)
        found.asked.add(call_key(action.tool, args))
        if turn.decided_by != "policy":
            continue  # refused or nudged by the runtime: nothing was read
        error = _error_of(turn.observation)
        unit = str(args.get("unit", ""))
        target = str(args.get("target", ""))
        try:
            if action.tool == "read_unit_status":
                if error is None:
                    found.status[unit] = UnitStatus.model_validate_json(turn.observation)
                else:
                    found.status_error[unit] = error
            elif action.tool == "tail_journal":
                if error is None:
                    tail = JournalTail.model_validate_json(turn.observation)
                    if args.get("own_output_only"):
                        found.own_journal[unit] = tail
                    else:
                        found.journal[unit] = tail
                else:
                    found.journal_error[unit] = error
            elif action.tool == "http_get_health":
                if error is None:
                    found.health[target] = HealthResult.model_validate_json(turn.observation)
                else:
                    found.health_error[target] = error
        except ValidationError:
            message = f"the answer of {action.tool} could not be read"
            if action.tool == "read_unit_status":
                found.status_error[unit] = message
            elif action.tool == "tail_journal":
                found.journal_error[unit] = message
            else:
                found.health_error[target] = message
    return found
