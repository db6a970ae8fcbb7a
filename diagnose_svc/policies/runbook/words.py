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


def crash_looping(status: UnitStatus) -> bool:
    """systemd is restarting it because it exited (Restart=): waiting to restart
    (auto-restart), or starting it again after an automatic restart (NRestarts counts
    those since it was last started by hand). A loop is failing, not settling; only a
    unit starting for the first time, or stopping, is in transition."""
    if status.active_state != "activating":
        return False
    return status.sub_state == "auto-restart" or status.n_restarts > 0


def loop_words(status: UnitStatus) -> str:
    """A crash loop in facts: how often systemd restarted it and how its runs end."""
    return (
        f"in a crash loop ({status.active_state}/{status.sub_state}, Restart={status.restart}, "
        f"NRestarts={status.n_restarts}; its last run: {ended(status)})"
    )


def health_words(result: HealthResult) -> str:
    if result.outcome == "ok":
        return f"answers {result.status}"
    if result.outcome == "unexpected_status":
        return f"answers {result.status} (expected {result.expected_status})"
    return {
        "timeout": "does not answer (timed out)",
        "connection_refused": "refuses connections",
    }.get(result.outcome, "cannot be reached")
