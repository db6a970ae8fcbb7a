"""The JSON Schema of what the console reads from the executor, generated from the
models: the requests it sends (``list``, ``show``) and the replies it reads (PLANS, PLAN,
REJECT).

``opsbot plans`` and ``opsbot show`` are what an operator runs most, and building these
models costs more start-up than the commands themselves (bench/console_startup.py). So
the console checks replies against this schema, written to opsbot_cli/wire_schema.json
by ``scripts/generate-wire-schema`` (a test fails when the file and the models differ),
with a small reader of exactly the keywords the models produce (opsbot_cli.wire). Every
field, type and constraint is declared once, in the models; the file is their output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from shared_schema.executor_socket import (
    PROTOCOL_VERSION,
    ListPlans,
    PlanDetail,
    PlanList,
    Reject,
    ShowPlan,
)
from shared_schema.messages import MAX_REPLY_BYTES
from shared_schema.names import PLAN_ID_PATTERN, UNIT_NAME_MAX, UNIT_NAME_PATTERN
from shared_schema.plan import Expect
from shared_schema.text import TEXT_PATTERN, no_control
from shared_schema.units import check_plan_id, check_unit

__all__ = ["console_schema"]

#: What a validator function of the models checks, as JSON Schema says it: the models'
#: own schema (what a hosted model is shown) leaves these out; the console's reader
#: needs them, so that it takes nothing the models refuse.
_BY_VALIDATOR: dict[Callable[..., Any], JsonSchemaValue] = {
    check_unit: {"pattern": UNIT_NAME_PATTERN, "maxLength": UNIT_NAME_MAX},
    check_plan_id: {"pattern": PLAN_ID_PATTERN},
    no_control: {"pattern": TEXT_PATTERN},
}
#: What a model validator checks: an expectation names at least one field, not null.
_BY_MODEL: dict[type, JsonSchemaValue] = {
    Expect: {
        "anyOf": [
            {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
            for name in ("active_state", "sub_state", "invocation_id")
        ]
    },
}


class _ReaderSchema(GenerateJsonSchema):
    """The models' JSON Schema, with what their validators check written in."""

    def function_after_schema(
        self, schema: core_schema.AfterValidatorFunctionSchema
    ) -> JsonSchemaValue:
        said = super().function_after_schema(schema)
        return {**said, **_BY_VALIDATOR.get(schema["function"]["function"], {})}

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        said = super().model_schema(schema)
        return {**said, **_BY_MODEL.get(schema["cls"], {})}


def console_schema() -> dict[str, Any]:
    """The document opsbot_cli/wire_schema.json holds: the protocol version, the reply
    bound, and each request's and reply's JSON Schema (validation mode: what may arrive)."""
    return {
        "comment": "Generated from shared_schema by scripts/generate-wire-schema; do not edit.",
        "protocol_version": PROTOCOL_VERSION,
        "max_reply_bytes": MAX_REPLY_BYTES,
        "requests": {
            "list": ListPlans.model_json_schema(schema_generator=_ReaderSchema),
            "show": ShowPlan.model_json_schema(schema_generator=_ReaderSchema),
        },
        "replies": {
            "PLANS": PlanList.model_json_schema(schema_generator=_ReaderSchema),
            "PLAN": PlanDetail.model_json_schema(schema_generator=_ReaderSchema),
            "REJECT": Reject.model_json_schema(schema_generator=_ReaderSchema),
        },
    }
