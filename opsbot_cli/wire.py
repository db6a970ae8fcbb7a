"""The executor's ``list`` and ``show`` for the commands an operator runs most, ``opsbot
plans`` and ``opsbot show``, without building a model: the replies are checked against
the models' own JSON Schema, generated from shared_schema (shared_schema.console_schema,
written to wire_schema.json beside this module by ``scripts/generate-wire-schema``; a
test fails when the file and the models differ).

Nothing here declares a field: :func:`check` reads only the JSON Schema keywords the
models produce (:data:`KEYWORDS`; a schema with any other is refused when it is loaded,
so a new kind of constraint cannot pass unchecked). A reply is decoded strictly
(shared_schema.messages: no duplicate keys, no NaN, protocol ``v``), checked, and
returned with the models' defaults filled in, as ``model_dump(mode="json")`` gives it:
what ``--json`` prints. Anything else is :class:`MalformedReply`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

from shared_schema.canonical import canonical_json
from shared_schema.messages import WireError, check_version, decode_json_object

__all__ = [
    "KEYWORDS",
    "MalformedReply",
    "canonical_plan",
    "check",
    "decode_reply",
    "list_request",
    "max_reply_bytes",
    "plan_detail",
    "plan_list",
    "schema",
    "show_request",
]

#: Every JSON Schema keyword the models produce and :func:`check` reads; annotations
#: (title, description, discriminator's mapping is read with oneOf) need nothing.
KEYWORDS = frozenset(
    {
        "$defs",
        "$ref",
        "additionalProperties",
        "anyOf",
        "const",
        "default",
        "description",
        "discriminator",
        "enum",
        "format",
        "items",
        "maxItems",
        "maxLength",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "not",
        "oneOf",
        "pattern",
        "properties",
        "required",
        "title",
        "type",
    }
)
#: Keywords that say nothing about a value (``default`` is filled in by the object).
_ANNOTATIONS = frozenset({"default", "description", "title"})
#: Each JSON type: the Python types json gives for it, and its name in an error.
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "object": ((dict,), "an object"),
    "array": ((list,), "a list"),
    "string": ((str,), "a string"),
    "integer": ((int,), "an integer"),
    "number": ((int, float), "a number"),
    "boolean": ((bool,), "true or false"),
    "null": ((type(None),), "null"),
}
#: RFC 3339's date-time (JSON Schema's ``format``), with its offset: what the models send.
_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2})$"
)


class MalformedReply(Exception):
    """A reply that is not what the executor's models allow; ``what`` says where."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@cache
def schema() -> dict[str, Any]:
    """The generated document: protocol version, reply bound, requests and replies."""
    document: dict[str, Any] = json.loads(
        files("opsbot_cli").joinpath("wire_schema.json").read_text(encoding="utf-8")
    )
    for part in ("requests", "replies"):
        for name, each in document[part].items():
            _known_keywords(each, f"{part}.{name}")
    return document


def _known_keywords(node: Any, where: str) -> None:
    if isinstance(node, list):
        for item in node:
            _known_keywords(item, where)
        return
    if not isinstance(node, dict):
        return
    unknown = sorted(set(node) - KEYWORDS)
    if unknown:
        raise MalformedReply(f"the generated schema uses {unknown[0]!r} at {where}")
    for key, value in node.items():
        if key in ("properties", "$defs"):
            for name, sub in value.items():
                _known_keywords(sub, f"{where}.{name}")
        elif key not in ("default", "const", "enum", "discriminator"):
            _known_keywords(value, where)


def max_reply_bytes() -> int:
    return int(schema()["max_reply_bytes"])


def _request(op: str, **fields: Any) -> bytes:
    """A request as ``encode_message`` writes it: the schema's constants, then ``fields``."""
    props = schema()["requests"][op]["properties"]
    message = {key: prop["const"] for key, prop in props.items() if "const" in prop}
    return canonical_json({**message, **fields}) + b"\n"


def list_limits() -> tuple[int, int]:
    """ListPlans' ``limit``: its default and its most (shared_schema DEFAULT_LISTED,
    MAX_LISTED), from the wire schema."""
    limit = schema()["requests"]["list"]["properties"]["limit"]
    return int(limit["default"]), int(limit["maximum"])


def list_request(limit: int, since: datetime | None = None) -> bytes:
    """``encode_message(ListPlans(limit=limit, since=since))``."""
    fields: dict[str, Any] = {"limit": limit}
    if since is not None:
        fields["since"] = since.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return _request("list", **fields)


def show_request(plan_id: str) -> bytes:
    """``encode_message(ShowPlan(plan_id=plan_id))`` (``plan_id`` already checked)."""
    return _request("show", plan_id=plan_id)


def decode_reply(line: bytes) -> dict[str, Any]:
    """One reply line as a JSON object that speaks the protocol."""
    try:
        obj = decode_json_object(line, max_reply_bytes())
        check_version(obj, int(schema()["protocol_version"]), "this console")
    except WireError as exc:
        raise MalformedReply(exc.message) from exc
    return obj


# -- the reader -----------------------------------------------------------------------------


def check(value: Any, node: Mapping[str, Any], where: str, defs: Mapping[str, Any]) -> Any:
    """``value`` checked against the schema ``node`` (refs resolved in ``defs``), with the
    defaults of missing properties filled in; MalformedReply says where it is not."""
    if "$ref" in node:
        return check(value, defs[node["$ref"].rsplit("/", 1)[1]], where, defs)
    if "not" in node and _passes(value, node["not"], defs):
        raise MalformedReply(f"{where} is {str(value)[:20]}")
    if "oneOf" in node:
        return _one_of(value, node, where, defs)
    if "anyOf" in node and node.keys() <= _ANNOTATIONS | {"anyOf"}:
        return _any_of(value, node["anyOf"], where, defs)  # a field's options: one shapes it
    if "anyOf" in node and not any(_passes(value, o, defs) for o in node["anyOf"]):
        # Beside other keywords: a rule of the whole (a model that needs one of its fields).
        needs = [" and ".join(o["required"]) for o in node["anyOf"] if o.get("required")]
        raise MalformedReply(f"{where} needs one of {', '.join(needs) or 'its forms'}")
    if "const" in node and value != node["const"]:
        raise MalformedReply(f"{where} is not {node['const']!r}")
    if "enum" in node and value not in node["enum"]:
        raise MalformedReply(f"{where} is unknown: {str(value)[:20]!r}")
    kind = node.get("type")
    if kind is not None:
        _check_type(value, kind, where)
    if isinstance(value, str):
        _check_string(value, node, where)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not node.get("minimum", value) <= value <= node.get("maximum", value):
            raise MalformedReply(f"{where} is out of its range: {value}")
    elif isinstance(value, list):
        return _check_array(value, node, where, defs)
    elif isinstance(value, dict):
        return _check_object(value, node, where, defs)
    return value


def _passes(value: Any, node: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
    try:
        check(value, node, "", defs)
    except MalformedReply:
        return False
    return True


def _check_type(value: Any, kind: str, where: str) -> None:
    # bool is an int to Python, never to the models (StrictBool, int fields).
    types, name = _TYPES[kind]
    if isinstance(value, bool) != (kind == "boolean") or not isinstance(value, types):
        raise MalformedReply(f"{where} is not {name}")


def _check_string(value: str, node: Mapping[str, Any], where: str) -> None:
    if len(value) > node.get("maxLength", len(value)) or len(value) < node.get("minLength", 0):
        raise MalformedReply(f"{where} has {len(value)} characters")
    pattern = node.get("pattern")
    if pattern is not None:
        # A JSON Schema pattern is unanchored, and its $ never matches before a newline.
        found = re.search(pattern, value)
        if found is None or (pattern.endswith("$") and found.end() != len(value)):
            raise MalformedReply(f"{where} is not of the form {pattern}")
    if node.get("format") == "date-time":
        if _DATE_TIME.fullmatch(value) is None:
            raise MalformedReply(f"{where} is not a time with its offset")
        try:
            datetime.fromisoformat(value)
        except ValueError as exc:
            raise MalformedReply(f"{where} is not a time") from exc


def _check_array(
    value: list[Any], node: Mapping[str, Any], where: str, defs: Mapping[str, Any]
) -> list[Any]:
    if not node.get("minItems", 0) <= len(value) <= node.get("maxItems", len(value)):
        raise MalformedReply(f"{where} has {len(value)} items")
    items = node.get("items")
    if items is None:
        return list(value)
    return [check(item, items, f"{where}[{i}]", defs) for i, item in enumerate(value)]


def _check_object(
    value: dict[str, Any], node: Mapping[str, Any], where: str, defs: Mapping[str, Any]
) -> dict[str, Any]:
    props: Mapping[str, Any] = node.get("properties", {})
    extra = node.get("additionalProperties", True)
    if extra is False:
        unknown = sorted(set(value) - set(props))
        if unknown:
            raise MalformedReply(f"{where} has an unknown key {unknown[0][:40]!r}")
    if len(value) < node.get("minProperties", 0):
        raise MalformedReply(f"{where} has {len(value)} keys")
    missing = [key for key in node.get("required", ()) if key not in value]
    if missing:
        raise MalformedReply(f"{where}.{missing[0]} is missing")
    shaped: dict[str, Any] = {}
    for key, prop in props.items():
        if key in value:
            shaped[key] = check(value[key], prop, f"{where}.{key}", defs)
        elif "default" in prop:
            shaped[key] = json.loads(json.dumps(prop["default"]))
    for key in value.keys() - props.keys():
        sub = extra if isinstance(extra, dict) else {}
        shaped[key] = check(value[key], sub, f"{where}.{key}", defs)
    return shaped


def _any_of(value: Any, options: list[Any], where: str, defs: Mapping[str, Any]) -> Any:
    first: MalformedReply | None = None
    for option in options:
        try:
            return check(value, option, where, defs)
        except MalformedReply as exc:
            first = first or exc
    raise first or MalformedReply(f"{where} matches nothing")


def _one_of(value: Any, node: Mapping[str, Any], where: str, defs: Mapping[str, Any]) -> Any:
    """A discriminated union: the ``propertyName`` of the value picks its one schema."""
    tag = node["discriminator"]["propertyName"]
    if not isinstance(value, dict) or not isinstance(value.get(tag), str):
        raise MalformedReply(f"{where}.{tag} is missing")
    target = node["discriminator"]["mapping"].get(value[tag])
    if target is None:
        raise MalformedReply(f"{where}.{tag} is unknown: {value[tag][:20]!r}")
    return check(value, {"$ref": target}, where, defs)


# -- replies --------------------------------------------------------------------------------


def _reply(obj: dict[str, Any], verdict: str) -> dict[str, Any] | str:
    """``obj`` checked as a ``verdict`` reply, or the reason of a REJECT (a str)."""
    replies = schema()["replies"]
    if obj.get("verdict") == "REJECT":
        rejected = replies["REJECT"]
        return str(check(obj, rejected, "reply", rejected.get("$defs", {}))["reason"])
    if obj.get("verdict") != verdict:
        raise MalformedReply(f"reply.verdict is {str(obj.get('verdict'))[:20]}, not {verdict}")
    shape = replies[verdict]
    shaped: dict[str, Any] = check(obj, shape, "reply", shape.get("$defs", {}))
    return shaped


def plan_list(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A PLANS reply as ``PlanList.model_dump(mode="json")``, or a REJECT's reason."""
    return _reply(obj, "PLANS")


def plan_detail(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A PLAN reply as ``PlanDetail.model_dump(mode="json")``, or a REJECT's reason."""
    return _reply(obj, "PLAN")


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
