"""What an apply did, or would do, with each plan: :class:`Outcome`, as the apply
(executor_svc.apply) and the dry run (plans.preview) say it, and as ``opsbot apply
--json`` prints it and the apply's ``apply.outcomes`` journal entry holds it
(:func:`outcome_json`). It builds no model: ``opsbot apply`` says what waits with it
before anything else is loaded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plans.preconditions import Check, precondition_checks
from shared_io.errors import UnitStateError
from shared_io.unit_show import UnitState
from shared_schema.states import PlanState
from shared_schema.write_tools import WRITE_TOOLS_BY_NAME

if TYPE_CHECKING:
    from shared_schema import Plan

__all__ = ["LiveStates", "Outcome", "StepPreview", "failed", "outcome_json", "preview_steps"]


@dataclass(frozen=True)
class StepPreview:
    """What a dry run says of one step: the argv, each precondition against the live state
    in words, and what the step does."""

    argv: list[str]
    checks: list[Check]
    does: str


@dataclass(frozen=True)
class Outcome:
    """What one apply did (or would do) with one plan."""

    plan_id: str
    state: PlanState
    message: str
    argv: list[list[str]] = field(default_factory=list)
    ran: bool = False
    #: Dry run: each step's preview, and what the apply would do (a decision's kind, or
    #: "running": an apply holds the lock now). A real apply sets ``would`` only to
    #: "wait", for an approved plan left waiting for its apply window.
    preview: list[StepPreview] = field(default_factory=list)
    would: str = ""
    #: The plan could not be read or judged (an error, not a state it is in).
    error: bool = False


class LiveStates:
    """Each unit's live state read once, for the preview and the verdict alike: what the
    dry run shows is what it judged (a read that failed is its message)."""

    def __init__(self, read_state: Callable[[str], UnitState]) -> None:
        self._read = read_state
        self._seen: dict[str, UnitState | str] = {}

    def get(self, unit: str) -> UnitState | str:
        if unit not in self._seen:
            try:
                self._seen[unit] = self._read(unit)
            except UnitStateError as exc:
                self._seen[unit] = exc.message
        return self._seen[unit]

    def read(self, unit: str) -> UnitState:
        """As ``read_state``: the state, or UnitStateError again."""
        state = self.get(unit)
        if isinstance(state, str):
            raise UnitStateError(state)
        return state


def preview_steps(plan: Plan, argv: list[list[str]], live: LiveStates) -> list[StepPreview]:
    """Each step of ``plan`` with its preconditions checked against live state now, in
    the words ``opsbot apply --dry-run`` prints."""
    previews: list[StepPreview] = []
    for step, step_argv in zip(plan.steps, argv, strict=True):
        unit = step.args.unit
        tool = WRITE_TOOLS_BY_NAME.get(step.tool)
        does = f"{tool.verb} {unit}: {tool.summary}" if tool else f"{step.tool} {unit}"
        checks: list[Check] = []
        if step.expect is not None:
            state = live.get(unit)
            if isinstance(state, str):
                checks.append(Check(f"live state unknown: {state}", False))
            else:
                checks = precondition_checks(step.expect, state)
        previews.append(StepPreview(step_argv, checks, does))
    return previews


def failed(outcomes: list[Outcome]) -> bool:
    """Whether a step failed in this run."""
    return any(o.state is PlanState.FAILED for o in outcomes if o.ran)


def outcome_json(o: Outcome) -> dict[str, Any]:
    """One outcome as ``opsbot apply --json`` prints it (and ``apply.outcomes`` holds it)."""
    said: dict[str, Any] = {
        "plan_id": o.plan_id,
        "state": str(o.state),
        "message": o.message,
        "argv": o.argv,
        "ran": o.ran,
    }
    if o.would:
        said["would"] = o.would
    if o.error:
        said["error"] = True
    if o.preview:
        said["steps"] = [
            {
                "argv": p.argv,
                "does": p.does,
                "checks": [{"text": c.text, "holds": c.holds} for c in p.checks],
            }
            for p in o.preview
        ]
    return said
