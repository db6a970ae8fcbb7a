"""The diagnose socket's protocol (/run/opsbot/diagnose.sock).

An operator sends one ``DiagnoseRequest`` line; the service answers with one JSON line
per event (``diagnose.started``, ``diagnose.step`` ..., ``diagnose.finished``) and then
one ``diagnose.verdict`` line (or ``diagnose.error``). Lines are JSON objects
(shared_schema.messages); the verdict is shared_schema.verdict's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from shared_schema._model import Model
from shared_schema.config_state import ConfigState
from shared_schema.units import UnitName
from shared_schema.verdict import EndedBy, Verdict

# -- events -----------------------------------------------------------------------------


class StartedEvent(Model):
    event: Literal["diagnose.started"] = "diagnose.started"
    run_id: str
    unit: str
    symptom: str
    policy: str
    max_steps: int
    token_budget: int


class StepEvent(Model):
    """One step: who decided the outcome, what was asked, what came back (an excerpt)."""

    event: Literal["diagnose.step"] = "diagnose.step"
    run_id: str
    step: int
    decided_by: Literal["policy", "runtime", "validator"]
    action: Literal["call_tool", "submit_plan", "final_note"]
    tool: str | None = None
    args_sha256: str | None = None
    result_excerpt: str
    #: One line on what the step found, for a person (already redacted).
    summary: str = ""
    tokens: int
    redactions: int


class FinishedEvent(Model):
    event: Literal["diagnose.finished"] = "diagnose.finished"
    run_id: str
    kind: Literal["plan", "note"]
    ended_by: EndedBy
    steps_used: int
    tokens: int
    plan_id: str | None = None
    sha256: str | None = None


Event = StartedEvent | StepEvent | FinishedEvent


# -- the socket -------------------------------------------------------------------------


class DiagnoseRequest(Model):
    """Diagnose one unit; ``symptom`` is what the operator saw, in words."""

    v: Literal[1] = 1
    op: Literal["diagnose"] = "diagnose"
    unit: UnitName
    symptom: Annotated[str, Field(max_length=500)] = ""


class ConfigQuery(Model):
    """The configuration the service has in force (``opsbot check-config``)."""

    v: Literal[1] = 1
    op: Literal["config"] = "config"


class ConfigMessage(ConfigState):
    event: Literal["diagnose.config"] = "diagnose.config"


class VerdictMessage(Model):
    event: Literal["diagnose.verdict"] = "diagnose.verdict"
    verdict: Verdict


class ErrorMessage(Model):
    event: Literal["diagnose.error"] = "diagnose.error"
    message: str
    hint: str = ""
    #: The console's exit status for it (shared_io/exit_codes.py): 5 out of the diagnosis
    #: scope or unknown to systemd, 78 an invalid configuration, 1 anything else.
    exit_status: Annotated[int, Field(ge=1, le=125)] = 1


StreamItem = Annotated[
    StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage,
    Field(discriminator="event"),
]
STREAM_ITEM: TypeAdapter[
    StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage
] = TypeAdapter(StreamItem)
