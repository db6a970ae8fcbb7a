"""The contract between opsbot's two halves: plans, steps, socket messages, approvals,
config.

Pure data: pydantic models, canonical JSON and fingerprints. No I/O, and no import of
either service (a test enforces both).

    write_tools       the write tools, declared once (name, systemctl verb, arguments)
    plan              a plan: goal and steps, its canonical bytes and fingerprint
    messages          one JSON line on any socket: strict decoding, canonical encoding
    executor_socket   the executor socket's requests and replies
    diagnose_socket   the diagnose socket's request and the events streamed back
    verdict           what a diagnosis ends with: a plan or a note, with its evidence
    approval, config, states, units, text, errors, canonical
"""

from shared_schema.approval import Approval
from shared_schema.canonical import canonical_json, sha256_hex
from shared_schema.config import (
    DiagnoseSettings,
    ExecutorPolicy,
    HealthTarget,
    ModelSettings,
    OpsbotConfig,
    VerifySettings,
)
from shared_schema.errors import FieldError, field_errors
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
    UnitArgs,
    fingerprint,
    parse_plan,
)
from shared_schema.states import PlanState
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

__all__ = [
    "BUILTIN_DENYLIST",
    "MAX_MESSAGE_BYTES",
    "MAX_REPLY_BYTES",
    "PLAN_ID_PATTERN",
    "PROTOCOL_VERSION",
    "STEP_MODELS",
    "UNIT_NAME_MAX",
    "WRITE_TOOLS",
    "WRITE_TOOLS_BY_NAME",
    "WRITE_TOOL_TABLE",
    "Accept",
    "Approval",
    "AwaitingPlan",
    "AwaitingStep",
    "DiagnoseSettings",
    "ExecutorPolicy",
    "Expect",
    "FieldError",
    "HealthTarget",
    "ListPlans",
    "ModelSettings",
    "OpsbotConfig",
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
    "ShowPlan",
    "Step",
    "StepModel",
    "StepRecord",
    "SubmitPlan",
    "UnitArgs",
    "UnitName",
    "Verification",
    "VerificationResult",
    "VerifySettings",
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
