"""The text a policy is shown for a step: redacted first, then cut to the limit.

Tool outputs are shown as compact JSON of their fields (``ToolOutput`` models, which a
policy can read back with ``Model.model_validate_json``); a tool's error as
``{"error": ..., "hint": ...}``; the runtime's and the validator's answers as plain text.
"""

from __future__ import annotations

import json
from typing import Any

from diagnose_svc.limits import OBSERVATION_LIMIT
from diagnose_svc.redact import Redactor
from diagnose_svc.tools import ToolOutput


def truncate(text: str, limit: int = OBSERVATION_LIMIT) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and a marker, in ``limit``."""
    if len(text) <= limit:
        return text
    widest = f" [... {len(text)} more characters cut]"
    keep = max(0, limit - len(widest))
    return text[:keep] + f" [... {len(text) - keep} more characters cut]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def output_data(output: ToolOutput, redactor: Redactor) -> tuple[Any, int]:
    """A tool's output as JSON data, redacted, and how many redactions were made (what a
    diagnosis's record keeps: diagnose_svc/record.py)."""
    return redactor.value(output.model_dump(mode="json"))


def shown(data: Any) -> str:
    """Redacted output data as the policy sees it: compact JSON, cut to the limit."""
    return truncate(_json(data))


def output_text(output: ToolOutput, redactor: Redactor) -> tuple[str, int]:
    """A tool's output as the policy sees it, and how many redactions were made."""
    data, count = output_data(output, redactor)
    return shown(data), count


def error_text(message: str, hint: str | None, redactor: Redactor) -> tuple[str, int]:
    """A tool's error as the policy sees it: ``{"error": ..., "hint": ...}``."""
    body: dict[str, str] = {"error": message}
    if hint:
        body["hint"] = hint
    data, count = redactor.value(body)
    return truncate(_json(data)), count


def note_text(text: str, redactor: Redactor) -> tuple[str, int]:
    """A runtime or validator answer as the policy sees it."""
    redacted, count = redactor.text(text)
    return truncate(redacted), count
