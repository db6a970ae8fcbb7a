"""Reading a unit's live state, to re-check a step's ``expect`` just before apply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor_svc.errors import ExecutorError
from shared_io.run import run

if TYPE_CHECKING:  # opsbot show imports this module and no model (issue 13, item 11)
    from shared_schema import Expect

_PROPERTIES = ("LoadState", "ActiveState", "SubState", "InvocationID")


@dataclass(frozen=True)
class UnitState:
    unit: str
    load_state: str
    active_state: str
    sub_state: str
    invocation_id: str

    def describe(self) -> str:
        return f"{self.unit} is {self.active_state}/{self.sub_state} (load: {self.load_state})"


class UnitStateError(ExecutorError):
    """The live state of a unit could not be read."""


def show_properties(unit: str, properties: Sequence[str], timeout: float = 15.0) -> dict[str, str]:
    """``systemctl show`` of ``properties`` of ``unit``, as a dict; UnitStateError if
    systemctl fails."""
    argv = [
        "systemctl",
        "show",
        "--no-pager",
        *(f"--property={p}" for p in properties),
        "--",
        unit,
    ]
    result = run(argv, timeout=timeout, merge_stderr=True)
    if not result.ok:
        raise UnitStateError(
            f"cannot read the state of {unit}: {result.error or result.output.strip()[:200]}"
        )
    values: dict[str, str] = {}
    for line in result.output.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    return values


def read_unit_state(unit: str, timeout: float = 15.0) -> UnitState:
    values = show_properties(unit, _PROPERTIES, timeout)
    return UnitState(
        unit=unit,
        load_state=values.get("LoadState", ""),
        active_state=values.get("ActiveState", ""),
        sub_state=values.get("SubState", ""),
        invocation_id=values.get("InvocationID", ""),
    )


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


def precondition_checks(expect: Expect | Mapping[str, Any], state: UnitState) -> list[Check]:
    """Each field of ``expect`` against ``state``, in words (what ``opsbot apply --dry-run``
    and ``opsbot show`` print; :func:`expectation_mismatch` is the apply's verdict).
    ``expect`` is the model or, in the console, its JSON form (``opsbot show`` reads the
    plan as plain JSON)."""
    fields = expect if isinstance(expect, Mapping) else expect.model_dump(exclude_none=True)
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
