"""opsbot's diagnosis half: a bounded ReAct loop over read-only tools.

Runs as an unprivileged user in its own unit. Nothing in this package can change the
host; its only way to affect anything is to submit a plan to the executor's socket.

The public names are re-exported here::

    verdict = run_diagnosis(unit, symptom, RunbookPolicy(config.diagnose), READ_TOOLS,
                            ExecutorClient(), config.diagnose, on_event=print)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.exports import lazy_exports

if TYPE_CHECKING:
    from diagnose_svc.actions import (
        Action,
        CallTool,
        CallTools,
        FinalNote,
        Policy,
        Proposal,
        SubmitPlan,
        ToolSpec,
        Transcript,
        Turn,
    )
    from diagnose_svc.errors import (
        DiagnoseError,
        ExecutorError,
        ExecutorProtocolError,
        ExecutorUnavailable,
        PolicyError,
        ToolError,
        UsageError,
    )
    from diagnose_svc.events import Event, FinishedEvent, StartedEvent, StepEvent
    from diagnose_svc.executor_client import ExecutorClient
    from diagnose_svc.policies.runbook import RunbookPolicy
    from diagnose_svc.redact import Redactor, redact
    from diagnose_svc.runtime import run_diagnosis
    from diagnose_svc.submitter import SubmitReply, Submitter
    from diagnose_svc.tools import READ_TOOLS, Tool, ToolContext, ToolOutput
    from diagnose_svc.verdict import Evidence, NoteVerdict, PlanVerdict, Verdict

#: Each module and the names it exports here (loaded when first used: the verify and
#: baseline verbs do not pay for the policies).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "diagnose_svc.actions": (
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
    ),
    "diagnose_svc.errors": (
        "DiagnoseError",
        "ExecutorError",
        "ExecutorProtocolError",
        "ExecutorUnavailable",
        "PolicyError",
        "ToolError",
        "UsageError",
    ),
    "diagnose_svc.events": ("Event", "FinishedEvent", "StartedEvent", "StepEvent"),
    "diagnose_svc.executor_client": ("ExecutorClient",),
    "diagnose_svc.policies.runbook": ("RunbookPolicy",),
    "diagnose_svc.redact": ("Redactor", "redact"),
    "diagnose_svc.runtime": ("run_diagnosis",),
    "diagnose_svc.submitter": ("SubmitReply", "Submitter"),
    "diagnose_svc.tools": ("READ_TOOLS", "Tool", "ToolContext", "ToolOutput"),
    "diagnose_svc.verdict": ("Evidence", "NoteVerdict", "PlanVerdict", "Verdict"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "READ_TOOLS",
    "Action",
    "CallTool",
    "CallTools",
    "DiagnoseError",
    "Event",
    "Evidence",
    "ExecutorClient",
    "ExecutorError",
    "ExecutorProtocolError",
    "ExecutorUnavailable",
    "FinalNote",
    "FinishedEvent",
    "NoteVerdict",
    "PlanVerdict",
    "Policy",
    "PolicyError",
    "Proposal",
    "Redactor",
    "RunbookPolicy",
    "StartedEvent",
    "StepEvent",
    "SubmitPlan",
    "SubmitReply",
    "Submitter",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolSpec",
    "Transcript",
    "Turn",
    "UsageError",
    "Verdict",
    "redact",
    "run_diagnosis",
]
