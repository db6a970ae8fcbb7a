"""How a verdict is judged against a fault, shared by the scenario stack's faults
(faults.py) and the generated ones (graph_faults.py): each plan step's tool, unit and
precondition; each note's structured cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Either brings a failed or stopped unit back.
START = ("start_unit", "restart_unit")


@dataclass(frozen=True)
class Step:
    """One expected step: any of ``tools`` on ``unit``; ``active`` the ActiveState(s) its
    precondition must name (an ``expect`` that would let it run on a recovered unit is
    wrong), ``invocation`` the InvocationID it must be pinned to, if any."""

    tools: tuple[str, ...]
    unit: str
    active: tuple[str, ...] = ()
    invocation: str = ""


def check_step(i: int, want: Step, got: dict[str, Any]) -> list[str]:
    """What is wrong with plan step ``i`` (``got``, as the verdict's JSON has it) where
    ``want`` is expected: another tool or unit, no precondition, a precondition that would
    also hold once the fault is gone (an ActiveState the fault does not leave, no
    InvocationID for a unit that runs)."""
    tool, unit = got.get("tool"), got.get("args", {}).get("unit")
    if tool not in want.tools or unit != want.unit:
        return [f"step {i}: expected {'|'.join(want.tools)} {want.unit}, got {tool} {unit}"]
    expect = got.get("expect") or {}
    if not expect:
        return [f"step {i}: no precondition (expect)"]
    problems = []
    named: list[str] = expect.get("active_state") or []
    if want.active and not named:
        problems.append(f"step {i}: expect names no active_state")
    elif want.active and not set(named) <= set(want.active):
        problems.append(
            f"step {i}: expect active_state {sorted(named)}, the fault leaves {unit} "
            f"{'/'.join(want.active)}"
        )
    if want.invocation and expect.get("invocation_id") != want.invocation:
        pinned = expect.get("invocation_id")
        problems.append(
            f"step {i}: pinned to another invocation ({pinned})"
            if pinned
            else f"step {i}: not pinned to the invocation the fault is in"
        )
    return problems


def cause_problems(cause: dict[str, Any] | None, kind: str, unit: str = "") -> list[str]:
    """What is wrong with a note's cause: it must be ``kind``, in ``unit`` when given."""
    if not cause:
        return ["the note names no cause"]
    problems = []
    if cause.get("kind") != kind:
        problems.append(f"cause {cause.get('kind')!r}, expected {kind!r}")
    if unit and cause.get("unit") != unit:
        problems.append(f"cause unit {cause.get('unit')!r}, expected {unit!r}")
    return problems
