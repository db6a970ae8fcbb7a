"""Facts put in words: bounded printable text, how a run ended, what a health target says."""

from __future__ import annotations

from diagnose_svc.tools import HealthResult, UnitStatus
from shared_schema.text import printable


def cut(text: str, limit: int) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ended(status: UnitStatus) -> str:
    """How its last run ended, in facts: Result= and the main process's exit."""
    words = f"Result={status.result}"
    exit_words = status.main_exit()
    return f"{words}; {exit_words}" if exit_words else words


def health_words(result: HealthResult) -> str:
    if result.outcome == "ok":
        return f"answers {result.status}"
    if result.outcome == "unexpected_status":
        return f"answers {result.status} (expected {result.expected_status})"
    return {
        "timeout": "does not answer (timed out)",
        "connection_refused": "refuses connections",
    }.get(result.outcome, "cannot be reached")
