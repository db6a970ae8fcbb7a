"""opsbot's diagnosis half: a bounded ReAct loop over read-only tools.

Runs as an unprivileged user in its own unit. Nothing in this package can change the
host; its only way to affect anything is to submit a plan to the executor's socket.

The public names are re-exported here::

    verdict = run_diagnosis(unit, symptom, RunbookPolicy(config.diagnose), READ_TOOLS,
                            ExecutorClient(), config.diagnose, on_event=print)
"""

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
