"""Test doubles at the edges of the diagnosis loop, and nothing else.

* ``ScriptedPolicy`` replays a list of actions (pydantic-ai's FunctionModel idea): the
  model behind the protocol, without a network.
* ``FakeSubmitter`` implements the Submitter protocol: the executor boundary.
* ``RecordedHost`` answers the read tools from recorded systemd output (this host does
  not run systemd): its read_unit_status parses ``systemctl show`` text with the real
  parser, its tail_journal returns recorded lines through the real bounding code. The
  tools are built with the real ``make_tool`` and the real argument models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from diagnose_svc.actions import Action, Proposal, ToolSpec, Transcript
from diagnose_svc.errors import DiagnoseError, ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools import (
    HealthArgs,
    HealthResult,
    JournalArgs,
    JournalLine,
    JournalTail,
    Tool,
    ToolContext,
    UnitArgs,
    UnitStatus,
    make_tool,
)
from diagnose_svc.tools._systemctl import parse_show
from diagnose_svc.tools.read_unit_status import DependencyState, parse_unit_status
from diagnose_svc.tools.tail_journal import fit
from shared_schema import Accept, Reject, Revise

Script = Action | Proposal | Callable[[Transcript, Sequence[ToolSpec]], Action | Proposal]


class ScriptedPolicy:
    """Replays ``script``; records the tools it was shown and the transcript at each turn."""

    name = "scripted"

    def __init__(self, script: Sequence[Script], tokens: tuple[int, int] = (0, 0)) -> None:
        self.script = list(script)
        self.tokens = tokens
        self.shown_tools: list[list[str]] = []
        self.observations: list[list[str]] = []

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        self.shown_tools.append([tool.name for tool in tools])
        self.observations.append([turn.observation for turn in transcript.turns])
        if not self.script:
            raise AssertionError("the scripted policy ran out of actions")
        item = self.script.pop(0)
        if callable(item):
            item = item(transcript, tools)
        if isinstance(item, Proposal):
            return item
        return Proposal(item, prompt_tokens=self.tokens[0], completion_tokens=self.tokens[1])


class RepeatingPolicy:
    """Proposes the same action forever (a policy that never finishes)."""

    name = "repeating"

    def __init__(self, make: Callable[[int], Action]) -> None:
        self.make = make
        self.calls = 0
        self.shown_tools: list[list[str]] = []

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        self.shown_tools.append([tool.name for tool in tools])
        self.calls += 1
        return Proposal(self.make(self.calls))


@dataclass
class FakeSubmitter:
    """The executor's side of the socket, as a list of replies (or errors) to give."""

    replies: list[Accept | Revise | Reject | DiagnoseError] = field(default_factory=list)
    submitted: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)

    def submit(self, plan: dict[str, Any], run_id: str, symptom: str) -> Accept | Revise | Reject:
        self.submitted.append((plan, run_id, symptom))
        if not self.replies:
            raise AssertionError("the fake executor has no more replies")
        reply = self.replies.pop(0)
        if isinstance(reply, DiagnoseError):
            raise reply
        return reply


def accept(plan_sha: str = "0" * 64, plan_id: str = "20261129-214500-0a1b2c3d") -> Accept:
    return Accept(plan_id=plan_id, sha256=plan_sha)


def journal_lines(rows: Sequence[tuple[str, str, str, str]]) -> list[JournalLine]:
    return [JournalLine(time=t, priority=p, source=s, message=m) for t, p, s, m in rows]


@dataclass
class RecordedHost:
    """A host as recorded: ``systemctl show`` text per unit, journal rows, health results."""

    shows: dict[str, str] = field(default_factory=dict)
    journals: dict[str, list[tuple[str, str, str, str]]] = field(default_factory=dict)
    health: dict[str, HealthResult] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, show: str, journal: Sequence[tuple[str, str, str, str]] = ()) -> RecordedHost:
        [props] = parse_show(show)
        self.shows[props["Id"]] = show
        if journal:
            self.journals[props["Id"]] = list(journal)
        return self

    def status(self, unit: str) -> UnitStatus:
        if unit not in self.shows:
            raise ToolError(f"unit {unit} not found")
        [props] = parse_show(self.shows[unit])
        unhealthy = []
        for relation, key in (("Requires", "Requires"), ("BindsTo", "BindsTo")):
            for dep in props.get(key, "").split():
                if dep in self.shows:
                    [dep_props] = parse_show(self.shows[dep])
                    if dep_props["ActiveState"] in ("failed", "inactive"):
                        unhealthy.append(
                            DependencyState(
                                unit=dep,
                                relation=relation,  # type: ignore[arg-type]
                                load_state=dep_props["LoadState"],
                                active_state=dep_props["ActiveState"],
                                sub_state=dep_props["SubState"],
                            )
                        )
        return parse_unit_status(props, unhealthy)

    def tools(self) -> dict[str, Tool]:
        def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
            """Recorded read_unit_status."""
            self.calls.append(("read_unit_status", args.model_dump()))
            return self.status(args.unit)

        def tail_journal(args: JournalArgs, context: ToolContext) -> JournalTail:
            """Recorded tail_journal."""
            self.calls.append(("tail_journal", args.model_dump()))
            rows = self.journals.get(args.unit, [])[-args.lines :]
            newest_first = list(reversed(journal_lines(rows)))
            return fit(args.unit, args.since, newest_first, TOOL_OUTPUT_BUDGET)

        def http_get_health(args: HealthArgs, context: ToolContext) -> HealthResult:
            """Recorded http_get_health."""
            self.calls.append(("http_get_health", args.model_dump()))
            if args.target not in self.health:
                raise ToolError(f"unknown health target {args.target!r}")
            return self.health[args.target]

        return {
            "read_unit_status": make_tool(UnitArgs, read_unit_status),
            "tail_journal": make_tool(JournalArgs, tail_journal),
            "http_get_health": make_tool(HealthArgs, http_get_health),
        }


def health(
    target: str,
    unit: str | None,
    outcome: str,
    status: int | None = None,
    body: str = "",
    expected: int = 200,
    url: str | None = None,
) -> HealthResult:
    """A HealthResult as http_get_health builds it."""
    error = {
        "timeout": "no answer within 2 s (ReadTimeout)",
        "connection_refused": "ConnectError: [Errno 111] Connection refused",
    }.get(outcome)
    return HealthResult(
        target=target,
        url=url or f"http://127.0.0.1/{target}",
        unit=unit,
        outcome=outcome,  # type: ignore[arg-type]
        status=status,
        expected_status=expected,
        latency_ms=3 if status is not None else None,
        body_excerpt=body,
        error=error,
    )


def recent(minutes: int = 5) -> str:
    """An ISO time ``minutes`` ago."""
    return (datetime.now(UTC) - timedelta(minutes=minutes)).isoformat()
