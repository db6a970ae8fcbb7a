"""A step's precondition (its ``expect``) against a unit's live state: the apply's
verdict (:func:`expectation_mismatch`), each check in words beside the live value
(:func:`precondition_checks`, what ``opsbot apply --dry-run`` and ``opsbot show`` print),
and the precondition in words without the live state (:func:`expect_words`, what the
approval page and the console show). The state itself is read with
shared_io.unit_show.read_unit_state, the one reader.

``expect`` is the model or its JSON form (``opsbot show`` reads the plan as plain JSON,
without building the models).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared_io.unit_show import UnitState

if TYPE_CHECKING:  # opsbot show imports this module and no model
    from shared_schema import Expect

__all__ = ["Check", "expect_words", "expectation_mismatch", "precondition_checks"]


def expectation_mismatch(expect: Expect, state: UnitState) -> str | None:
    """Why ``state`` does not meet ``expect``, or None when it does."""
    if expect.active_state is not None and state.active_state not in expect.active_state:
        return (
            f"{state.describe()}; the plan expected active state {' or '.join(expect.active_state)}"
        )
    if expect.sub_state is not None and state.sub_state not in expect.sub_state:
        return f"{state.describe()}; the plan expected sub state {' or '.join(expect.sub_state)}"
    if expect.invocation_id is not None and state.invocation_id != expect.invocation_id:
        return (
            f"{state.unit} was restarted since diagnosis (invocation "
            f"{state.invocation_id[:12] or 'none'}, the plan expected "
            f"{expect.invocation_id[:12] or 'none'})"
        )
    return None


@dataclass(frozen=True)
class Check:
    """One precondition of a step in words, and whether the live state meets it:
    ``"app.service is failed now"`` and True."""

    text: str
    holds: bool

    def line(self) -> str:
        return f"{self.text}: {'yes' if self.holds else 'NO'}"


def _fields(expect: Expect | Mapping[str, Any]) -> Mapping[str, Any]:
    return expect if isinstance(expect, Mapping) else expect.model_dump(exclude_none=True)


def precondition_checks(expect: Expect | Mapping[str, Any], state: UnitState) -> list[Check]:
    """Each field of ``expect`` against ``state``, in words (what ``opsbot apply --dry-run``
    and ``opsbot show`` print; :func:`expectation_mismatch` is the apply's verdict)."""
    fields = _fields(expect)
    active_state = fields.get("active_state")
    sub_state = fields.get("sub_state")
    invocation_id = fields.get("invocation_id")
    checks: list[Check] = []
    if active_state is not None:
        checks.append(
            Check(
                f"{state.unit} is {' or '.join(active_state)} now "
                f"(live: {state.active_state or 'unknown'})",
                state.active_state in active_state,
            )
        )
    if sub_state is not None:
        checks.append(
            Check(
                f"{state.unit} is in sub state {' or '.join(sub_state)} now "
                f"(live: {state.sub_state or 'unknown'})",
                state.sub_state in sub_state,
            )
        )
    if invocation_id is not None:
        checks.append(
            Check(
                f"{state.unit} has not been started again since diagnosis "
                f"(invocation {invocation_id[:12] or 'none'}, live: "
                f"{state.invocation_id[:12] or 'none'})",
                state.invocation_id == invocation_id,
            )
        )
    return checks


def expect_words(unit: str, expect: Expect | Mapping[str, Any] | None) -> list[str]:
    """A step's precondition in words, without the live state (the plan's own view):
    ``app.service is failed``; none for a step that expects nothing."""
    fields = {} if expect is None else _fields(expect)
    words = []
    if fields.get("active_state") is not None:
        words.append(f"{unit} is {' or '.join(fields['active_state'])}")
    if fields.get("sub_state") is not None:
        words.append(f"{unit} is in sub state {' or '.join(fields['sub_state'])}")
    if fields.get("invocation_id") is not None:
        said = fields["invocation_id"][:12] or "none"
        words.append(f"{unit} has not been started again since diagnosis (invocation {said})")
    return words
