"""The contract between opsbot's two halves: plans, steps, socket messages, approvals,
config.

Pure data: pydantic models, canonical JSON and fingerprints. No I/O, and no import of
either service (a test enforces both).

    write_tools       the write tools, declared once (name, systemctl verb, what a step
                      leaves, arguments); pure data
    plan              a plan: goal and steps, its canonical bytes and fingerprint
    messages          one JSON line on any socket: strict decoding, canonical encoding
    executor_socket   the executor socket's requests and replies
    diagnose_socket   the diagnose socket's request and the events streamed back
    approver_socket   the approver socket's requests and replies
    verdict           what a diagnosis ends with: a plan or a note, with its evidence
    console_schema    the JSON Schema of what the console reads, from these models
    names             the grammar of unit names and plan ids (pure text)
    approval, config, states, units, text, errors, canonical, timespan, limits

Names are exported here and loaded when first used: a module that needs only pure data
(the console's fast path: canonical, states, names, messages, write_tools) builds no model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared_schema.approval import (
        Approval,
    )
    from shared_schema.canonical import (
        canonical_json,
        sha256_hex,
    )
    from shared_schema.config import (
        DiagnoseSettings,
        ExecutorPolicy,
        HealthTarget,
        ModelSettings,
        OpsbotConfig,
        VerifySettings,
    )
    from shared_schema.errors import (
        FieldError,
        field_errors,
    )
    from shared_schema.executor_socket import (
        PROTOCOL_VERSION,
        Accept,
        AwaitingPlan,
        AwaitingStep,
        ListPlans,
        Pending,
        PendingVerification,
        PlanDetail,
        PlanList,
        PlanSummary,
        Recorded,
        Reject,
        Reply,
        ReplyModel,
        ReportVerification,
        Request,
        RequestModel,
        Revise,
        ShowPlan,
        StepRecord,
        SubmitPlan,
        Verification,
        VerificationResult,
        parse_reply,
        parse_request,
    )
    from shared_schema.messages import (
        MAX_MESSAGE_BYTES,
        MAX_REPLY_BYTES,
        WireError,
        decode_json_object,
        encode_message,
    )
    from shared_schema.plan import (
        STEP_MODELS,
        Expect,
        Plan,
        Step,
        StepModel,
        Symptom,
        UnitArgs,
        fingerprint,
        parse_plan,
    )
    from shared_schema.states import (
        PlanState,
    )
    from shared_schema.units import (
        BUILTIN_DENYLIST,
        PLAN_ID_PATTERN,
        UNIT_NAME_MAX,
        UnitName,
        denied_reason,
        is_valid_plan_id,
        is_valid_unit_name,
    )
    from shared_schema.write_tools import (
        WRITE_TOOL_TABLE,
        WRITE_TOOLS,
        WRITE_TOOLS_BY_NAME,
        WriteTool,
    )

#: Each exported name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "Approval": "shared_schema.approval",
    "canonical_json": "shared_schema.canonical",
    "sha256_hex": "shared_schema.canonical",
    "DiagnoseSettings": "shared_schema.config",
    "ExecutorPolicy": "shared_schema.config",
    "HealthTarget": "shared_schema.config",
    "ModelSettings": "shared_schema.config",
    "OpsbotConfig": "shared_schema.config",
    "VerifySettings": "shared_schema.config",
    "FieldError": "shared_schema.errors",
    "field_errors": "shared_schema.errors",
    "PROTOCOL_VERSION": "shared_schema.executor_socket",
    "Accept": "shared_schema.executor_socket",
    "AwaitingPlan": "shared_schema.executor_socket",
    "AwaitingStep": "shared_schema.executor_socket",
    "ListPlans": "shared_schema.executor_socket",
    "Pending": "shared_schema.executor_socket",
    "PendingVerification": "shared_schema.executor_socket",
    "PlanDetail": "shared_schema.executor_socket",
    "PlanList": "shared_schema.executor_socket",
    "PlanSummary": "shared_schema.executor_socket",
    "Recorded": "shared_schema.executor_socket",
    "Reject": "shared_schema.executor_socket",
    "Reply": "shared_schema.executor_socket",
    "ReplyModel": "shared_schema.executor_socket",
    "ReportVerification": "shared_schema.executor_socket",
    "Request": "shared_schema.executor_socket",
    "RequestModel": "shared_schema.executor_socket",
    "Revise": "shared_schema.executor_socket",
    "ShowPlan": "shared_schema.executor_socket",
    "StepRecord": "shared_schema.executor_socket",
    "SubmitPlan": "shared_schema.executor_socket",
    "Verification": "shared_schema.executor_socket",
    "VerificationResult": "shared_schema.executor_socket",
    "parse_reply": "shared_schema.executor_socket",
    "parse_request": "shared_schema.executor_socket",
    "MAX_MESSAGE_BYTES": "shared_schema.messages",
    "MAX_REPLY_BYTES": "shared_schema.messages",
    "WireError": "shared_schema.messages",
    "decode_json_object": "shared_schema.messages",
    "encode_message": "shared_schema.messages",
    "STEP_MODELS": "shared_schema.plan",
    "Expect": "shared_schema.plan",
    "Plan": "shared_schema.plan",
    "Step": "shared_schema.plan",
    "StepModel": "shared_schema.plan",
    "Symptom": "shared_schema.plan",
    "UnitArgs": "shared_schema.plan",
    "fingerprint": "shared_schema.plan",
    "parse_plan": "shared_schema.plan",
    "PlanState": "shared_schema.states",
    "BUILTIN_DENYLIST": "shared_schema.units",
    "PLAN_ID_PATTERN": "shared_schema.units",
    "UNIT_NAME_MAX": "shared_schema.units",
    "UnitName": "shared_schema.units",
    "denied_reason": "shared_schema.units",
    "is_valid_plan_id": "shared_schema.units",
    "is_valid_unit_name": "shared_schema.units",
    "WRITE_TOOL_TABLE": "shared_schema.write_tools",
    "WRITE_TOOLS": "shared_schema.write_tools",
    "WRITE_TOOLS_BY_NAME": "shared_schema.write_tools",
    "WriteTool": "shared_schema.write_tools",
}
__all__ = [
    "Accept",
    "Approval",
    "AwaitingPlan",
    "AwaitingStep",
    "BUILTIN_DENYLIST",
    "DiagnoseSettings",
    "ExecutorPolicy",
    "Expect",
    "FieldError",
    "HealthTarget",
    "ListPlans",
    "MAX_MESSAGE_BYTES",
    "MAX_REPLY_BYTES",
    "ModelSettings",
    "OpsbotConfig",
    "PLAN_ID_PATTERN",
    "PROTOCOL_VERSION",
    "Pending",
    "PendingVerification",
    "Plan",
    "PlanDetail",
    "PlanList",
    "PlanState",
    "PlanSummary",
    "Recorded",
    "Reject",
    "Reply",
    "ReplyModel",
    "ReportVerification",
    "Request",
    "RequestModel",
    "Revise",
    "STEP_MODELS",
    "ShowPlan",
    "Step",
    "StepModel",
    "Symptom",
    "StepRecord",
    "SubmitPlan",
    "UNIT_NAME_MAX",
    "UnitArgs",
    "UnitName",
    "Verification",
    "VerificationResult",
    "VerifySettings",
    "WRITE_TOOLS",
    "WRITE_TOOLS_BY_NAME",
    "WRITE_TOOL_TABLE",
    "WireError",
    "WriteTool",
    "canonical_json",
    "decode_json_object",
    "denied_reason",
    "encode_message",
    "field_errors",
    "fingerprint",
    "is_valid_plan_id",
    "is_valid_unit_name",
    "parse_plan",
    "parse_reply",
    "parse_request",
    "sha256_hex",
]


def __getattr__(name: str) -> Any:
    """Load an exported name's module the first time the name is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
