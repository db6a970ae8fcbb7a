"""What a policy may propose, and what it is shown: the vocabulary of the loop.

A policy proposes exactly one action per turn: one tool call, several at once (a
``CallTools`` batch, counted as one step), a plan, or a note. Which actions are possible,
what they do and when the run stops is decided by the runtime (``runtime/``), not by
the policy.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "Action",
    "CallTool",
    "CallTools",
    "FinalNote",
    "Policy",
    "Proposal",
    "SubmitPlan",
    "ToolSpec",
    "Transcript",
    "Turn",
]


@dataclass(frozen=True)
class CallTool:
    """Call a read tool by name with JSON arguments."""

    tool: str
    args: Mapping[str, Any]
    thought: str = ""
    kind: Literal["call_tool"] = "call_tool"


@dataclass(frozen=True)
class CallTools:
    """Call several read tools in one step (at most ``MAX_CALLS_PER_STEP``, limits.py):
    the breadth-first reads of an operator who looks at everything failing at once."""

    calls: tuple[CallTool, ...]
    thought: str = ""
    kind: Literal["call_tools"] = "call_tools"


@dataclass(frozen=True)
class SubmitPlan:
    """Finish by proposing a plan (a JSON object the runtime validates with shared_schema)."""

    plan: Mapping[str, Any]
    thought: str = ""
    kind: Literal["submit_plan"] = "submit_plan"


@dataclass(frozen=True)
class FinalNote:
    """Finish without a plan: no change is warranted, or a human must act.

    ``cause`` is the cause as data (``shared_schema.verdict.Cause``: kind, unit, fact),
    when the policy names one; the runtime validates it and drops what does not.
    """

    text: str
    thought: str = ""
    cause: Mapping[str, Any] | None = None
    kind: Literal["final_note"] = "final_note"


Action = CallTool | CallTools | SubmitPlan | FinalNote


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a policy sees it: name, description (the tool's docstring), JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """One action of the transcript and what came back.

    ``observation`` is what the policy is shown (already truncated and redacted);
    ``decided_by`` says who produced it: the policy's tool call answered by a tool, the
    runtime (a refused tool, a nudge, a limit) or the validator (REVISE errors). The calls
    of one ``CallTools`` step are one Turn each, with the same ``step``.
    """

    step: int
    action: Action
    observation: str
    decided_by: Literal["policy", "runtime", "validator"] = "policy"
    tool_call_id: str = ""


@dataclass(frozen=True)
class TriedPlan:
    """A plan of opsbot's that ran and did not fix it (UNRESOLVED): a follow-up diagnosis
    knows what was tried, and must not propose the same steps again."""

    plan_id: str
    steps: tuple[tuple[str, str], ...]  # (tool, unit), in order
    evidence: tuple[str, ...] = ()
    #: The symptom it was meant to cure (shared_schema.Symptom, as JSON): a follow-up
    #: plan carries the same one.
    symptom: Mapping[str, Any] | None = None

    def line(self) -> str:
        steps = ", ".join(f"{tool} {unit}" for tool, unit in self.steps)
        seen = "; ".join(self.evidence)
        return f"plan {self.plan_id} ({steps}) ran and did not fix it" + (
            f": {seen}" if seen else ""
        )


@dataclass
class Transcript:
    """What the policy knows: the unit and symptom asked about, the plans already tried,
    and every turn so far."""

    unit: str
    symptom: str = ""
    turns: list[Turn] = field(default_factory=list)
    tried: tuple[TriedPlan, ...] = ()


@dataclass(frozen=True)
class Proposal:
    """A policy's answer for one turn: the action, plus tokens if a model reports them."""

    action: Action
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Policy(Protocol):
    """Proposes one action given the transcript and the tools currently visible.

    ``tools`` may be empty: the runtime withdraws tools when the run must finish, and
    the policy must then answer with SubmitPlan or FinalNote.
    """

    name: str

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal: ...
