"""The executor socket's two read-only verbs (``list``, ``show``) in plain JSON, for the
commands an operator runs most: ``opsbot plans`` and ``opsbot show`` start in a fraction
of the time it takes pydantic to build shared_schema's models (issue 13, item 11).

The daemons keep validating with the full models; this side only reads. It sends the
same bytes as ``encode_message(ListPlans())`` / ``ShowPlan`` (canonical JSON, one line),
decodes a reply strictly (no duplicate keys, no NaN, one object, protocol ``v`` 1) and
checks its shape by hand: every field the models have, of its type, nothing else, with
the models' defaults filled in, so ``--json`` prints what ``model_dump(mode="json")``
printed. Anything else is :class:`MalformedReply`, which the console says in one line.

The plan inside a PLAN reply is normalised to ``Plan.model_dump(mode="json")``;
:func:`canonical_plan` gives the bytes ``Plan.canonical()`` gives (its sha256 is what an
operator approves), :func:`step_argv` the argv the executor's write tools build, and
:func:`window_words` when an approved plan waiting for its apply window runs. The
little this module declares again that shared_schema declares first (the protocol
version, the reply limit, the write tools' verbs, the plan id pattern) is pinned to it by
tests/unit/console/test_console_plain.py; shared_schema's modules that import only the
standard library (canonical, states, timespan) are used as they are, see :func:`_pure`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared_schema.canonical import canonical_json
    from shared_schema.states import PlanState
    from shared_schema.timespan import parse_timespan

__all__ = [
    "MAX_REPLY_BYTES",
    "PLAN_ID_PATTERN",
    "PROTOCOL_VERSION",
    "WRITE_TOOL_VERBS",
    "MalformedReply",
    "PlanState",
    "canonical_json",
    "canonical_plan",
    "decode_reply",
    "is_plan_id",
    "list_request",
    "parse_timespan",
    "plan_detail",
    "plan_list",
    "show_request",
    "step_argv",
    "window_words",
]

#: shared_schema.PROTOCOL_VERSION, MAX_REPLY_BYTES and PLAN_ID_PATTERN (tests pin them).
PROTOCOL_VERSION = 1
MAX_REPLY_BYTES = 16 * 1024 * 1024
PLAN_ID_PATTERN = r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$"
_PLAN_ID_RE = re.compile(PLAN_ID_PATTERN, re.ASCII)
#: Each write tool of shared_schema.WRITE_TOOL_TABLE and its systemctl verb.
WRITE_TOOL_VERBS: Mapping[str, str] = {
    "restart_unit": "restart",
    "reload_unit": "reload",
    "start_unit": "start",
    "stop_unit": "stop",
    "reset_failed_unit": "reset-failed",
}
_MAX_STEPS = 8


def _pure(name: str) -> ModuleType:
    """``shared_schema.NAME``, a module that imports only the standard library, loaded
    without running shared_schema/__init__.py (which imports every model and so builds
    them all). Already imported whole in this process (a daemon, a test): that module."""
    full = f"shared_schema.{name}"
    if full in sys.modules:
        return sys.modules[full]
    package = importlib.util.find_spec("shared_schema")  # finds it, runs nothing
    locations = package.submodule_search_locations if package else None
    found = importlib.machinery.PathFinder.find_spec(full, list(locations or ()))
    # Under a name of its own: it is not the package's module, whose __init__ never ran.
    spec = found and importlib.util.spec_from_file_location(
        f"opsbot_cli._pure_{name}", found.origin
    )
    if not spec or spec.loader is None:
        raise ImportError(f"cannot find {full}", name=full)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if not TYPE_CHECKING:
    canonical_json = _pure("canonical").canonical_json
    PlanState = _pure("states").PlanState
    parse_timespan = _pure("timespan").parse_timespan


class MalformedReply(Exception):
    """A reply that is not what the executor's models allow; ``what`` says where."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def is_plan_id(value: str) -> bool:
    """True for ids opsbot makes (shared_schema.is_valid_plan_id)."""
    return _PLAN_ID_RE.fullmatch(value) is not None


def list_request() -> bytes:
    """``encode_message(ListPlans())``."""
    return canonical_json({"v": PROTOCOL_VERSION, "op": "list"}) + b"\n"


def show_request(plan_id: str) -> bytes:
    """``encode_message(ShowPlan(plan_id=plan_id))`` (``plan_id`` already checked)."""
    return canonical_json({"v": PROTOCOL_VERSION, "op": "show", "plan_id": plan_id}) + b"\n"


# -- decoding ---------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise MalformedReply(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise MalformedReply(f"{name} is not valid JSON")


def decode_reply(line: bytes) -> dict[str, Any]:
    """One reply line as a JSON object that speaks protocol v1 (what
    shared_schema.decode_json_object and check_version accept)."""
    if len(line) > MAX_REPLY_BYTES:
        raise MalformedReply(f"reply is larger than {MAX_REPLY_BYTES} bytes")
    try:
        value = json.loads(
            line.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except MalformedReply:
        raise
    except UnicodeDecodeError as exc:
        raise MalformedReply(f"reply is not valid UTF-8 (byte {exc.start})") from exc
    except (ValueError, RecursionError) as exc:
        raise MalformedReply(f"reply is not valid JSON ({str(exc)[:40]})") from exc
    if not isinstance(value, dict):
        raise MalformedReply(f"a reply is a JSON object, not {type(value).__name__}")
    said = value.get("v")
    if type(said) is not int or said != PROTOCOL_VERSION:
        raise MalformedReply(f"unsupported protocol version {str(said)[:20]}")
    return value


# -- shapes -----------------------------------------------------------------------------

#: A field's check: the value at ``where`` as the model would dump it, or MalformedReply.
Check = Callable[[Any, str], Any]
_REQUIRED = object()


def _kind(kind: type | tuple[type, ...], name: str) -> Check:
    def check(value: Any, where: str) -> Any:
        # bool is an int to Python, never to the models (StrictBool, int fields).
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise MalformedReply(f"{where} is not {name}")
        return value

    return check


_str = _kind(str, "a string")
_int = _kind(int, "an integer")
_bool = _kind(bool, "true or false")


def _number(value: Any, where: str) -> float:
    return float(_kind((int, float), "a number")(value, where))


def _optional(check: Check) -> Check:
    return lambda value, where: None if value is None else check(value, where)


def _list(item: Check, least: int = 0, most: int | None = None) -> Check:
    def check(value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise MalformedReply(f"{where} is not a list")
        if len(value) < least or (most is not None and len(value) > most):
            raise MalformedReply(f"{where} has {len(value)} items")
        return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]

    return check


def _one_of(*allowed: str) -> Check:
    def check(value: Any, where: str) -> str:
        if value not in allowed:
            raise MalformedReply(f"{where} is unknown: {str(value)[:20]!r}")
        return str(value)

    return check


def _when(value: Any, where: str) -> str:
    """A time as the models send it: ISO 8601 with its zone (kept as sent)."""
    try:
        at = datetime.fromisoformat(_str(value, where))
    except ValueError as exc:
        raise MalformedReply(f"{where} is not a time") from exc
    if at.tzinfo is None:
        raise MalformedReply(f"{where} has no time zone")
    return str(value)


def _plan_id(value: Any, where: str) -> str:
    if not is_plan_id(_str(value, where)):
        raise MalformedReply(f"{where} is not a plan id")
    return str(value)


def _sha256(value: Any, where: str) -> str:
    if re.fullmatch(r"[0-9a-f]{64}", _str(value, where), re.ASCII) is None:
        raise MalformedReply(f"{where} is not a sha256")
    return str(value)


def _object(fields: Mapping[str, tuple[Check, Any]]) -> Check:
    """A model: each field checked, a missing one its default (``_REQUIRED``: an error),
    and no key the model does not have (``extra="forbid"``)."""

    def check(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise MalformedReply(f"{where} is not an object")
        extra = sorted(set(value) - set(fields))
        if extra:
            raise MalformedReply(f"{where} has an unknown key {extra[0][:40]!r}")
        shaped: dict[str, Any] = {}
        for key, (field, default) in fields.items():
            if key not in value:
                if default is _REQUIRED:
                    raise MalformedReply(f"{where}.{key} is missing")
                shaped[key] = default
            else:
                shaped[key] = field(value[key], f"{where}.{key}")
        return shaped

    return check


_ACTIVE_STATES = (
    "active",
    "reloading",
    "inactive",
    "failed",
    "activating",
    "deactivating",
    "maintenance",
)
_EXPECT_FIELDS = _object(
    {
        "active_state": (_optional(_list(_one_of(*_ACTIVE_STATES), 1, 7)), None),
        "sub_state": (_optional(_list(_str, 1, 8)), None),
        "invocation_id": (_optional(_str), None),
    }
)


def _expect(value: Any, where: str) -> dict[str, Any]:
    shaped: dict[str, Any] = _EXPECT_FIELDS(value, where)
    if all(v is None for v in shaped.values()):
        raise MalformedReply(f"{where} expects nothing")
    return shaped


_STEP = _object(
    {
        "tool": (_one_of(*WRITE_TOOL_VERBS), _REQUIRED),
        "args": (_object({"unit": (_str, _REQUIRED)}), _REQUIRED),
        "expect": (_optional(_expect), None),
        "reason": (_optional(_str), None),
    }
)
_PLAN = _object(
    {
        "goal": (_str, _REQUIRED),
        "steps": (_list(_STEP, 1, _MAX_STEPS), _REQUIRED),
        "stop_on_error": (_bool, True),
    }
)
_VERIFICATION = _object(
    {
        "result": (_one_of("verified", "unresolved"), _REQUIRED),
        "evidence": (_list(_str), []),
        "seconds": (_number, 0.0),
        "at": (_when, _REQUIRED),
        "by": (_str, _REQUIRED),
    }
)
_WINDOW_WAIT = _object(
    {
        "opens_at": (_optional(_when), None),
        "closes_at": (_optional(_when), None),
    }
)
_SUMMARY = _object(
    {
        "plan_id": (_plan_id, _REQUIRED),
        "state": (_one_of(*PlanState), _REQUIRED),
        "sha256": (_sha256, _REQUIRED),
        "goal": (_str, _REQUIRED),
        "units": (_list(_str), _REQUIRED),
        "submitted_at": (_when, _REQUIRED),
        "submitted_by": (_str, _REQUIRED),
        "reason": (_str, ""),
        "verification": (_optional(_VERIFICATION), None),
        "waits_for_window": (_optional(_WINDOW_WAIT), None),
    }
)
_STEP_RECORD = _object(
    {
        "index": (_int, _REQUIRED),
        "tool": (_str, _REQUIRED),
        "argv": (_list(_str), _REQUIRED),
        "outcome": (_one_of("running", "ok", "failed", "timeout", "not-run"), _REQUIRED),
        "started_at": (_optional(_when), None),
        "finished_at": (_optional(_when), None),
        "exit_status": (_optional(_int), None),
        "output": (_str, ""),
    }
)
_HISTORY_ITEM = _kind(dict, "an object")
_ENVELOPE: dict[str, tuple[Check, Any]] = {"v": (_int, _REQUIRED)}
_PLAN_LIST = _object(
    {**_ENVELOPE, "verdict": (_one_of("PLANS"), _REQUIRED), "plans": (_list(_SUMMARY), _REQUIRED)}
)
_PLAN_DETAIL = _object(
    {
        **_ENVELOPE,
        "verdict": (_one_of("PLAN"), _REQUIRED),
        "summary": (_SUMMARY, _REQUIRED),
        "plan": (_PLAN, _REQUIRED),
        "argv": (_list(_list(_str)), _REQUIRED),
        "history": (_list(_HISTORY_ITEM), []),
        "steps": (_list(_STEP_RECORD), []),
    }
)
_REJECT = _object(
    {**_ENVELOPE, "verdict": (_one_of("REJECT"), _REQUIRED), "reason": (_str, _REQUIRED)}
)


def _reply(obj: dict[str, Any], shape: Check, verdict: str) -> dict[str, Any] | str:
    """``obj`` in ``shape``, or the reason of a REJECT (a str)."""
    if obj.get("verdict") == "REJECT":
        return str(_REJECT(obj, "reply")["reason"])
    if obj.get("verdict") != verdict:
        raise MalformedReply(f"reply.verdict is {str(obj.get('verdict'))[:20]}, not {verdict}")
    shaped: dict[str, Any] = shape(obj, "reply")
    return shaped


def plan_list(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A PLANS reply as ``PlanList.model_dump(mode="json")``, or a REJECT's reason."""
    return _reply(obj, _PLAN_LIST, "PLANS")


def plan_detail(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A PLAN reply as ``PlanDetail.model_dump(mode="json")``, or a REJECT's reason."""
    return _reply(obj, _PLAN_DETAIL, "PLAN")


# -- what a plan is ---------------------------------------------------------------------


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def canonical_plan(plan: Mapping[str, Any]) -> bytes:
    """``Plan.canonical()`` of a plan shaped by :func:`plan_detail`: its canonical JSON
    without the fields that are None (``exclude_none=True``)."""
    return canonical_json(_without_none(dict(plan)))


def step_argv(plan: Mapping[str, Any]) -> list[list[str]]:
    """Each step as the argv plans.tools builds for it (``policy.step_argv``)."""
    return [
        ["systemctl", WRITE_TOOL_VERBS[s["tool"]], "--no-ask-password", "--", s["args"]["unit"]]
        for s in plan["steps"]
    ]


def _window_at(value: str) -> str:
    """``Wed 2026-12-02 02:00 UTC``: a window's start or end, in local time."""
    return datetime.fromisoformat(value).astimezone().strftime("%a %Y-%m-%d %H:%M %Z").rstrip()


def window_words(wait: Mapping[str, Any] | None, long: bool = True) -> str:
    """When an APPROVED plan waiting for its apply window runs (the executor's
    ``waits_for_window``): ``in its apply window, Wed 2026-12-02 02:00 UTC to 04:00``;
    short (``long`` False): the window's start only."""
    if wait is None:
        return "at the next apply"
    opens, closes = wait.get("opens_at"), wait.get("closes_at")
    if not opens or not closes:
        if not long:
            return "no window in 7 days"
        return (
            "not in a window: none opens within 7 days, and its approval expires first "
            "(`opsbot approve --now` runs it outside one)"
        )
    if not long:
        return _window_at(opens)
    start = datetime.fromisoformat(opens).astimezone()
    end = datetime.fromisoformat(closes).astimezone()
    until = end.strftime("%H:%M") if start.date() == end.date() else _window_at(closes)
    return (
        f"in its apply window, {_window_at(opens)} to {until} (opsbot-apply.timer runs it "
        "then, checking its preconditions again)"
    )
