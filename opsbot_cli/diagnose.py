"""``opsbot diagnose UNIT``: ask the diagnosis service why a unit is down, each step shown
as it happens, then the plan it proposed or its note."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from executor_svc.policy import step_argv
from opsbot_cli.clients import diagnose_stream
from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, printable, unit_arg
from shared_io.paths import Paths
from shared_schema.diagnose_socket import (
    DiagnoseRequest,
    ErrorMessage,
    FinishedEvent,
    StartedEvent,
    StepEvent,
    VerdictMessage,
)
from shared_schema.verdict import NoteVerdict, PlanVerdict


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "diagnose", "ask the diagnosis service why a unit is down; shows each step live"
    )
    p.add_argument("unit", metavar="UNIT", help="e.g. nginx.service (.service may be left out)")
    p.add_argument("--symptom", default="", help="what you saw, e.g. 'nginx returns 502'")
    p.add_argument("--json", action="store_true", help="events and verdict as one JSON object")
    p.set_defaults(func=run)


def print_event(item: StartedEvent | StepEvent | FinishedEvent) -> None:
    if isinstance(item, StartedEvent):
        out(
            f"diagnosing {item.unit} (run {item.run_id}, policy {item.policy}, "
            f"at most {item.max_steps} steps)"
        )
    elif isinstance(item, StepEvent):
        # The tool is whatever name the model asked for, and a model reads text anyone
        # can write to the journal: shown through printable(), like the excerpt.
        what = printable(item.tool or item.action)
        tokens = f", {item.tokens} tokens" if item.tokens else ""
        redacted = f", {item.redactions} redacted" if item.redactions else ""
        out(f"  step {item.step} [{item.decided_by}] {what}{tokens}{redacted}")
        found = printable((item.summary or item.result_excerpt).replace("\n", " "))
        out(f"      {found[:200]}")


def run(args: argparse.Namespace, paths: Paths) -> int:
    unit = unit_arg(args.unit)
    events: list[dict[str, Any]] = []
    verdict: PlanVerdict | NoteVerdict | None = None
    request = DiagnoseRequest(unit=unit, symptom=args.symptom)
    for item in diagnose_stream(paths.diagnose_socket, request):
        if isinstance(item, ErrorMessage):
            raise ConsoleError(f"diagnosis failed: {item.message}", hint=item.hint)
        if isinstance(item, VerdictMessage):
            verdict = item.verdict
            break
        events.append(item.model_dump(mode="json"))
        if not args.json:
            print_event(item)
    if verdict is None:
        raise ConsoleError("the diagnosis service closed the connection without a verdict")
    if args.json:
        json_out({"events": events, "verdict": verdict.model_dump(mode="json")})
        return 0
    if isinstance(verdict, PlanVerdict):
        out(f"plan {verdict.plan_id} proposed: {printable(verdict.plan.goal)}")
        for index, (step, argv) in enumerate(
            zip(verdict.plan.steps, step_argv(verdict.plan), strict=True), 1
        ):
            out(f"  {index}. {shlex.join(argv)}")
            if step.reason:
                out(f"     why: {printable(step.reason)}")
        out(f"approve it with: sudo opsbot approve {verdict.plan_id}")
    else:
        out(f"no plan ({verdict.ended_by}):")
        for line in verdict.text.splitlines():
            out(f"  {printable(line)}")
    return 0
