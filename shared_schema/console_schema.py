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

from typing import Any

from shared_schema.executor_socket import (
    PROTOCOL_VERSION,
    ListPlans,
    PlanDetail,
    PlanList,
    Reject,
    ShowPlan,
)
from shared_schema.messages import MAX_REPLY_BYTES

__all__ = ["console_schema"]


def console_schema() -> dict[str, Any]:
    """The document opsbot_cli/wire_schema.json holds: the protocol version, the reply
    bound, and each request's and reply's JSON Schema (validation mode: what may arrive)."""
    return {
        "comment": "Generated from shared_schema by scripts/generate-wire-schema; do not edit.",
        "protocol_version": PROTOCOL_VERSION,
        "max_reply_bytes": MAX_REPLY_BYTES,
        "requests": {
            "list": ListPlans.model_json_schema(),
            "show": ShowPlan.model_json_schema(),
        },
        "replies": {
            "PLANS": PlanList.model_json_schema(),
            "PLAN": PlanDetail.model_json_schema(),
            "REJECT": Reject.model_json_schema(),
        },
    }
