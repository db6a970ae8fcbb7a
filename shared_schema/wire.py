"""Messages on the executor socket: newline-delimited JSON objects, at most 64 KiB each.

A request is one of ``submit``, ``list``, ``show`` (field ``op``); a reply carries a
``verdict``: ACCEPT (plan id and fingerprint), REVISE (field errors a model can act on),
REJECT (a reason), or PLANS / PLAN for operators' queries. Every message carries the
protocol version ``v``.
"""

import json
import math
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field, TypeAdapter, ValidationError

from shared_schema._model import Model
from shared_schema.canonical import canonical_json
from shared_schema.errors import FieldError, field_errors
from shared_schema.plan import Plan
from shared_schema.states import PlanState
from shared_schema.units import PlanId, Sha256Hex

PROTOCOL_VERSION: Final = 1
MAX_MESSAGE_BYTES = 64 * 1024
# A reply may be far larger than a request: PLANS lists every stored plan (some 350 bytes
# each), so 64 KiB would stop `opsbot plans` at about 190 plans.
MAX_REPLY_BYTES = 16 * 1024 * 1024
MAX_NESTING = 32

RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class WireError(Exception):
    """A message that is not a well-formed request or reply; ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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


class ListPlans(Model):
    """List stored plans (operators and root)."""

    v: Literal[1] = 1
    op: Literal["list"] = "list"


class ShowPlan(Model):
    """Show one plan with its argv, history and step records (operators and root)."""

    v: Literal[1] = 1
    op: Literal["show"] = "show"
    plan_id: PlanId


Request = Annotated[SubmitPlan | ListPlans | ShowPlan, Field(discriminator="op")]
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


class PlanSummary(Model):
    plan_id: PlanId
    state: PlanState
    sha256: Sha256Hex
    goal: str
    units: list[str]
    submitted_at: datetime
    submitted_by: str
    reason: str = ""


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


Reply = Annotated[Accept | Revise | Reject | PlanDetail | PlanList, Field(discriminator="verdict")]
_REPLY = TypeAdapter(Reply)


# -- framing ----------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise WireError(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _depth(value: Any, limit: int) -> int:
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _bad_constant(name: str) -> Any:
    raise WireError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e999 would silently become inf, which canonical JSON cannot print back.
    value = float(text)
    if not math.isfinite(value):
        raise WireError(f"number {text[:40]} is out of range")
    return value


def decode_json_object(line: bytes, limit: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Decode one message: UTF-8 JSON object, no duplicate keys, bounded size and depth.

    ``limit``: the most bytes accepted (a request's 64 KiB unless a reply is read)."""
    if len(line) > limit:
        raise WireError(f"message is larger than {limit} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"message is not valid UTF-8 (byte {exc.start})") from exc
    if "\x00" in text:
        raise WireError("message contains a NUL byte")
    # Refuse deep nesting before json recurses into it.
    opened = 0
    deepest = 0
    for char in text:
        if char in "[{":
            opened += 1
            deepest = max(deepest, opened)
        elif char in "]}":
            opened -= 1
    if deepest > MAX_NESTING * 2:
        raise WireError(f"message is nested deeper than {MAX_NESTING} levels")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_bad_constant,
            parse_float=_finite_float,
        )
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WireError(f"message is not valid JSON: {str(exc)[:120]}") from exc
    if not isinstance(value, dict):
        raise WireError(f"a message is a JSON object, not {type(value).__name__}")
    if _depth(value, MAX_NESTING) > MAX_NESTING:
        raise WireError(f"message is nested deeper than {MAX_NESTING} levels")
    return value


def _check_version(obj: dict[str, Any]) -> None:
    version = obj.get("v")
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise WireError(
            f"unsupported protocol version {version!r}; this executor speaks v={PROTOCOL_VERSION}"
        )


def parse_request(obj: dict[str, Any]) -> SubmitPlan | ListPlans | ShowPlan:
    """Validate a decoded object as a request; WireError says what is wrong."""
    _check_version(obj)
    try:
        return _REQUEST.validate_python(obj)
    except ValidationError as exc:
        errors = field_errors(exc, union_tags=frozenset({"submit", "list", "show"}))
        raise WireError("bad request: " + "; ".join(str(e) for e in errors)[:500]) from exc


def parse_reply(line: bytes) -> Accept | Revise | Reject | PlanDetail | PlanList:
    """Validate one reply line from the executor."""
    obj = decode_json_object(line, MAX_REPLY_BYTES)
    _check_version(obj)
    try:
        return _REPLY.validate_python(obj)
    except ValidationError as exc:
        raise WireError(f"bad reply: {exc.errors(include_url=False)[:3]}") from exc


def encode_message(message: Model) -> bytes:
    """One message as canonical JSON plus the newline that ends it."""
    return canonical_json(message.model_dump(mode="json", exclude_none=True)) + b"\n"
