"""The executor socket's protocol (/run/opsbot/executor.sock): one request line, one
reply line, each a JSON object (shared_schema.messages).

A request is one of ``submit``, ``list``, ``show``, ``pending``, ``verify`` and
``config`` (field ``op``); a reply carries a ``verdict``: ACCEPT (plan id and
fingerprint), REVISE (field errors a model can act on), REJECT (a reason), PLANS / PLAN
for operators' queries, PENDING (the applied plans waiting to be verified), RECORDED (a
verification taken) and CONFIG (the configuration in force, for check-config).
``pending`` and ``verify`` are opsbot-verify's (the diagnose user's): a forged report can
only mislabel a plan, never run anything. Every message carries the protocol version
``v``.
"""

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field, TypeAdapter, ValidationError

from shared_schema._model import Model
from shared_schema.config_state import ConfigState
from shared_schema.errors import FieldError, field_errors
from shared_schema.messages import MAX_REPLY_BYTES, WireError, check_version, decode_json_object
from shared_schema.plan import Plan, Symptom, TargetName
from shared_schema.states import PlanState
from shared_schema.units import PlanId, Sha256Hex

__all__ = [
    "Accept",
    "AwaitingPlan",
    "AwaitingStep",
    "ListPlans",
    "PROTOCOL_VERSION",
    "Pending",
    "PendingVerification",
    "PlanDetail",
    "PlanList",
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
    "StepRecord",
    "SubmitPlan",
    "Verification",
    "VerificationResult",
    "parse_reply",
    "parse_request",
]

PROTOCOL_VERSION: Final = 1

#: ``opsbot plans`` shows this many of the newest plans unless told (``--limit``), and
#: a list answers at most MAX_LISTED: its time and size do not grow with the store.
DEFAULT_LISTED: Final = 200
MAX_LISTED: Final = 5000

RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]

# -- requests ---------------------------------------------------------------------------


class SubmitPlan(Model):
    """Propose a plan. Only the diagnose user (and root) may send it."""

    v: Literal[1] = 1
    op: Literal["submit"] = "submit"
    # Kept as raw JSON here so that a bad plan gets REVISE with field errors, while a
    # bad envelope gets REJECT.
    plan: dict[str, Any]
    run_id: RunId | None = None
    symptom: Annotated[str, Field(max_length=500)] | None = None
    #: What diagnosis saw, two lines at most (the approval page and the notice show it).
    evidence: Annotated[list[Annotated[str, Field(max_length=300)]], Field(max_length=2)] = []


class ListPlans(Model):
    """List stored plans (operators and root): the ``limit`` newest, submitted at or
    after ``since`` when given."""

    v: Literal[1] = 1
    op: Literal["list"] = "list"
    limit: Annotated[int, Field(ge=1, le=MAX_LISTED)] = DEFAULT_LISTED
    since: datetime | None = None


class ShowPlan(Model):
    """Show one plan with its argv, history and step records (operators and root)."""

    v: Literal[1] = 1
    op: Literal["show"] = "show"
    plan_id: PlanId


class PendingVerification(Model):
    """Which applied plans wait for verification (opsbot-verify, as the diagnose user)."""

    v: Literal[1] = 1
    op: Literal["pending"] = "pending"


VerificationResult = Literal["verified", "unresolved"]
Evidence = Annotated[str, Field(max_length=300)]


class ReportVerification(Model):
    """Whether an applied plan's service came back: VERIFIED or UNRESOLVED, with what
    was seen (opsbot-verify, as the diagnose user)."""

    v: Literal[1] = 1
    op: Literal["verify"] = "verify"
    plan_id: PlanId
    sha256: Sha256Hex
    result: VerificationResult
    evidence: Annotated[list[Evidence], Field(max_length=20)] = []
    #: Seconds from the plan's last step to this verdict.
    seconds: Annotated[float, Field(ge=0, le=86400)] = 0.0
    #: The health targets of the plan's symptom that were judged (all of them, for a
    #: VERIFIED the executor believes).
    targets: Annotated[list[TargetName], Field(max_length=16)] = []


class ShowConfig(Model):
    """The configuration the executor has in force (``opsbot check-config``)."""

    v: Literal[1] = 1
    op: Literal["config"] = "config"


Request = Annotated[
    SubmitPlan | ListPlans | ShowPlan | PendingVerification | ReportVerification | ShowConfig,
    Field(discriminator="op"),
]
RequestModel = (
    SubmitPlan | ListPlans | ShowPlan | PendingVerification | ReportVerification | ShowConfig
)
_REQUEST = TypeAdapter(Request)


# -- replies ----------------------------------------------------------------------------


class Accept(Model):
    v: Literal[1] = 1
    verdict: Literal["ACCEPT"] = "ACCEPT"
    plan_id: PlanId
    sha256: Sha256Hex
    duplicate: bool = False


class Revise(Model):
    v: Literal[1] = 1
    verdict: Literal["REVISE"] = "REVISE"
    errors: list[FieldError] = Field(min_length=1)


class Reject(Model):
    v: Literal[1] = 1
    verdict: Literal["REJECT"] = "REJECT"
    reason: str


class StepRecord(Model):
    """What happened to one step of an apply."""

    index: int
    tool: str
    argv: list[str]
    outcome: Literal["running", "ok", "failed", "timeout", "not-run"]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_status: int | None = None
    output: str = ""


class Verification(Model):
    """What opsbot-verify saw after the last step."""

    result: VerificationResult
    evidence: list[str] = []
    seconds: float = 0.0
    at: datetime
    by: str


class WindowWait(Model):
    """An approved plan that waits for its apply window: when the window opens and closes
    (both None: none opens within 7 days). The apply records it, and ``opsbot approve``."""

    opens_at: datetime | None = None
    closes_at: datetime | None = None


class PlanSummary(Model):
    plan_id: PlanId
    state: PlanState
    sha256: Sha256Hex
    goal: str
    units: list[str]
    submitted_at: datetime
    submitted_by: str
    reason: str = ""
    verification: Verification | None = None
    #: Set while an APPROVED plan waits for its apply window.
    waits_for_window: WindowWait | None = None
    #: The incident the plan belongs to (the first plan's id; its own for a first plan).
    incident: PlanId | None = None
    #: Who approved it: the person (``approved_by``), or the standing approval rule
    #: (``approved_by_rule``, with ``rule_sha256``, the rule as it stood), never both;
    #: "" until it is approved.
    approved_by: str = ""
    approved_by_rule: str = ""
    rule_sha256: str = ""


class PlanDetail(Model):
    v: Literal[1] = 1
    verdict: Literal["PLAN"] = "PLAN"
    summary: PlanSummary
    plan: Plan
    argv: list[list[str]]
    history: list[dict[str, Any]] = []
    steps: list[StepRecord] = []


class PlanList(Model):
    v: Literal[1] = 1
    verdict: Literal["PLANS"] = "PLANS"
    plans: list[PlanSummary]
    #: The plans the request's ``since`` matched in the live store; more than listed
    #: when ``limit`` cut the oldest of them.
    total: int | None = None


class AwaitingStep(Model):
    tool: str
    unit: str


class AwaitingPlan(Model):
    """An applied plan whose outcome is not known yet: its steps and when they ended."""

    plan_id: PlanId
    sha256: Sha256Hex
    steps: list[AwaitingStep]
    applied_at: datetime
    #: What the plan is meant to cure (its diagnosis's symptom): verification samples it.
    symptom: Symptom | None = None
    #: The incident the plan belongs to (the first plan's id of the chain).
    incident: PlanId | None = None


#: How far a symptom that fails late in its window may move the window's end: this many
#: settle windows after the last step, a plan is judged (diagnose_svc/verify.py).
SETTLE_WINDOWS_AT_MOST: Final = 3


class Pending(Model):
    v: Literal[1] = 1
    verdict: Literal["PENDING"] = "PENDING"
    plans: list[AwaitingPlan]
    #: How long a plan waits for verification after its last step ([executor]).
    settle_seconds: float


class Recorded(Model):
    v: Literal[1] = 1
    verdict: Literal["RECORDED"] = "RECORDED"
    plan_id: PlanId
    state: PlanState


class ConfigReply(ConfigState):
    v: Literal[1] = 1
    verdict: Literal["CONFIG"] = "CONFIG"


Reply = Annotated[
    Accept | Revise | Reject | PlanDetail | PlanList | Pending | Recorded | ConfigReply,
    Field(discriminator="verdict"),
]
ReplyModel = Accept | Revise | Reject | PlanDetail | PlanList | Pending | Recorded | ConfigReply
_REPLY = TypeAdapter(Reply)


# -- parsing ----------------------------------------------------------------------------


def parse_request(obj: dict[str, Any]) -> RequestModel:
    """Validate a decoded object as a request; WireError says what is wrong."""
    check_version(obj, PROTOCOL_VERSION, "this executor")
    try:
        return _REQUEST.validate_python(obj)
    except ValidationError as exc:
        errors = field_errors(
            exc, union_tags=frozenset({"submit", "list", "show", "pending", "verify", "config"})
        )
        raise WireError("bad request: " + "; ".join(str(e) for e in errors)[:500]) from exc


def parse_reply(line: bytes) -> ReplyModel:
    """Validate one reply line from the executor."""
    obj = decode_json_object(line, MAX_REPLY_BYTES)
    check_version(obj, PROTOCOL_VERSION, "this executor")
    try:
        return _REPLY.validate_python(obj)
    except ValidationError as exc:
        raise WireError(f"bad reply: {exc.errors(include_url=False)[:3]}") from exc
