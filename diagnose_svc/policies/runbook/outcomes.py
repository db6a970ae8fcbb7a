"""What deciding on one root yields: a cause for a human, or a fix made of plan steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnose_svc.actions import SubmitPlan
from diagnose_svc.policies.runbook.words import cut
from diagnose_svc.tools import UnitStatus


@dataclass(frozen=True)
class Human:
    """A cause only a human can fix: its kind, the unit, the fact that shows it, and what
    to do."""

    kind: str
    unit: str
    fact: str
    advice: str
    #: The failing unit the cause was found through ("" for ``unit`` itself): a root of
    #: the chain that is failing because of ``unit``, so not "also failing".
    via: str = ""


@dataclass(frozen=True)
class Fix:
    steps: list[dict[str, Any]]
    goal: str


def step(tool: str, unit: str, expect: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"tool": tool, "args": {"unit": unit}, "expect": expect, "reason": cut(reason, 500)}


def pinned(status: UnitStatus) -> dict[str, Any]:
    """The precondition for acting on a running unit: this very invocation of it."""
    expect: dict[str, Any] = {"active_state": ["active"]}
    if status.invocation_id:
        expect["invocation_id"] = status.invocation_id
    return expect


def plan(goal: str, steps: list[dict[str, Any]]) -> SubmitPlan:
    return SubmitPlan(plan={"goal": cut(goal, 200), "steps": steps})
