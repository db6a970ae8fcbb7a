"""The diagnose socket's contract: a request, the step events streamed back live, and
the verdict a run ends with.

An operator sends one ``DiagnoseRequest`` line to /run/opsbot/diagnose.sock; the service
answers with one JSON line per event (``diagnose.started``, ``diagnose.step`` ...,
``diagnose.finished``) and then one ``diagnose.verdict`` line (or ``diagnose.error``).

A ``Verdict`` is a discriminated union on ``kind``: ``"plan"`` (the executor accepted a
plan: its id, fingerprint and the plan) or ``"note"`` (no plan: a text for the operator).
Both say how the run ended (``ended_by``), how many steps and tokens it used, and the
evidence gathered: each tool called and one line on what it returned.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from shared_schema._model import Model
from shared_schema.plan import Plan
from shared_schema.units import UnitName

EndedBy = Literal[
    "plan_accepted",  # the executor accepted the plan: it waits for an operator's approval
    "final_note",  # the policy finished with a note
    "plan_rejected",  # the executor rejected the plan outright
    "step_limit",  # max_steps used up without an answer
    "token_budget",  # the policy used more tokens than [diagnose] token_budget allows
    "cycle",  # tools were withdrawn for repeated calls and the policy still called one
    "policy_error",  # the policy could not propose (model endpoint down, bad answer)
    "executor_error",  # the executor could not be reached, or answered nonsense
]


class Evidence(Model):
    """One tool call of a run and one line on what it returned (already redacted)."""

    step: int
    tool: str
    args: dict[str, Any]
    summary: str
    error: bool = False

    def line(self) -> str:
        args = ", ".join(f"{key}={value}" for key, value in self.args.items())
        return f"step {self.step} {self.tool}({args}): {self.summary}"


class _Verdict(Model):
    run_id: str
    unit: str
    steps_used: int
    tokens: int
    evidence: list[Evidence]


class PlanVerdict(_Verdict):
    """The executor accepted a plan; it now waits for an operator's approval."""

    kind: Literal["plan"] = "plan"
    ended_by: Literal["plan_accepted"] = "plan_accepted"
    plan_id: str
    sha256: str
    plan: Plan


class NoteVerdict(_Verdict):
    """No plan: a note for the operator (no change warranted, a human must act, or why
    the run stopped, with the evidence gathered and what is still unknown)."""

    kind: Literal["note"] = "note"
    ended_by: EndedBy
    text: str


Verdict = Annotated[PlanVerdict | NoteVerdict, Field(discriminator="kind")]


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


class VerdictMessage(Model):
    event: Literal["diagnose.verdict"] = "diagnose.verdict"
    verdict: Verdict


class ErrorMessage(Model):
    event: Literal["diagnose.error"] = "diagnose.error"
    message: str
    hint: str = ""


StreamItem = Annotated[
    StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage,
    Field(discriminator="event"),
]
STREAM_ITEM: TypeAdapter[
    StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage
] = TypeAdapter(StreamItem)
