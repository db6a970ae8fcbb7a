"""What a transcript has established so far, read back from the observations.

A policy sees tool outputs as JSON of the tools' own models; this module parses them back
into those models, keyed by what was asked: the unit, the health target, the port. An
observation that does not parse (cut at the limit, or an error) is recorded as an error
for that key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from diagnose_svc.actions import CallTool, SubmitPlan, Transcript
from diagnose_svc.tools import HealthResult, JournalTail, UnitStatus
from diagnose_svc.tools.disk_usage import DiskUsage
from diagnose_svc.tools.list_failed_units import FailedUnits
from diagnose_svc.tools.list_listeners import Listeners
from diagnose_svc.tools.read_baseline import Baseline
from diagnose_svc.tools.read_certificates import Certificates
from diagnose_svc.tools.read_changes import Changes
from diagnose_svc.tools.read_config_edges import ConfigEdges
from diagnose_svc.tools.read_connections import Connections
from diagnose_svc.tools.read_limits import Limits
from diagnose_svc.tools.read_memory import MemoryState
from diagnose_svc.tools.read_process_state import ProcessState
from diagnose_svc.tools.read_timer import TimerState
from diagnose_svc.tools.read_unit_file import UnitFile
from shared_schema import canonical_json

#: Each read tool the runbook uses: the Findings field its answers go to, and their model.
OUTPUTS: dict[str, tuple[str, type[BaseModel]]] = {
    "read_unit_status": ("status", UnitStatus),
    "tail_journal": ("journal", JournalTail),
    "http_get_health": ("health", HealthResult),
    "read_process_state": ("process", ProcessState),
    "list_listeners": ("listeners", Listeners),
    "read_unit_file": ("unit_file", UnitFile),
    "disk_usage": ("disk", DiskUsage),
    "read_memory": ("memory", MemoryState),
    "read_timer": ("timer", TimerState),
    "list_failed_units": ("failed", FailedUnits),
    "read_connections": ("connections", Connections),
    "read_config_edges": ("configured", ConfigEdges),
    "read_baseline": ("baseline", Baseline),
    "read_changes": ("changes", Changes),
    "read_limits": ("limits", Limits),
    "read_certificates": ("certificates", Certificates),
}


def call_key(tool: str, args: dict[str, Any]) -> str:
    """Identifies a call: the tool and its canonical arguments."""
    return tool + " " + canonical_json(args).decode("utf-8")


def subject(tool: str, args: dict[str, Any]) -> str:
    """What a call is about: its unit, its target, its port (or "*")."""
    for key in ("unit", "target", "port"):
        if key in args and args[key] is not None:
            return str(args[key])
    return "*"


@dataclass
class Findings:
    status: dict[str, UnitStatus] = field(default_factory=dict)
    journal: dict[str, JournalTail] = field(default_factory=dict)
    #: tail_journal(own_output_only=True): what the unit's own processes said.
    own_journal: dict[str, JournalTail] = field(default_factory=dict)
    health: dict[str, HealthResult] = field(default_factory=dict)
    process: dict[str, ProcessState] = field(default_factory=dict)
    listeners: dict[str, Listeners] = field(default_factory=dict)
    unit_file: dict[str, UnitFile] = field(default_factory=dict)
    disk: dict[str, DiskUsage] = field(default_factory=dict)
    memory: dict[str, MemoryState] = field(default_factory=dict)
    timer: dict[str, TimerState] = field(default_factory=dict)
    failed: dict[str, FailedUnits] = field(default_factory=dict)
    connections: dict[str, Connections] = field(default_factory=dict)
    configured: dict[str, ConfigEdges] = field(default_factory=dict)
    baseline: dict[str, Baseline] = field(default_factory=dict)
    changes: dict[str, Changes] = field(default_factory=dict)
    limits: dict[str, Limits] = field(default_factory=dict)
    certificates: dict[str, Certificates] = field(default_factory=dict)
    #: (tool, subject) -> why that call gave no answer.
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Every call made so far (call_key), answered or not: never ask twice.
    asked: set[str] = field(default_factory=set)
    #: The answer to the last plan submitted, when it was not accepted.
    plan_refused: str | None = None

    def error(self, tool: str, name: str) -> str | None:
        return self.errors.get((tool, name))

    def failed_units(self) -> list[str]:
        return [u.unit for out in self.failed.values() for u in out.units]


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
        if turn.decided_by != "policy" or action.tool not in OUTPUTS:
            continue  # refused or nudged by the runtime, or a tool this policy never asks
        name = subject(action.tool, args)
        error = _error_of(turn.observation)
        if error is not None:
            found.errors[(action.tool, name)] = error
            continue
        attribute, model = OUTPUTS[action.tool]
        try:
            output = model.model_validate_json(turn.observation)
        except ValidationError:
            found.errors[(action.tool, name)] = f"the answer of {action.tool} could not be read"
            continue
        if action.tool == "tail_journal" and args.get("own_output_only"):
            found.own_journal[name] = output  # type: ignore[assignment]
        else:
            getattr(found, attribute)[name] = output
    return found
