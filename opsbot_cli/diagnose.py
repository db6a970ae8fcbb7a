"""``opsbot diagnose UNIT``: ask the diagnosis service why a unit is down, each step shown
as it happens, then the plan it proposed or its note.

Exit status (shared_io/exit_codes.py): 3 a plan was proposed and waits for approval; 0
no change is warranted (the unit is healthy); 4 a note naming what a human must do (or
why the run stopped before a cause was found); 5 refused (a unit systemd does not know or
one out of the diagnosis scope, or the executor refused the plan); 1 the diagnosis could
not be made (a daemon away, the model endpoint down); 78 an invalid configuration.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from typing import Any

from opsbot_cli.clients import diagnose_stream
from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, fit, json_out, one_line, out, printable, unit_arg
from plans import step_argv
from shared_io.exit_codes import ERROR, HUMAN, OK, REFUSED, WAITING
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
    p.add_argument(
        "-v", "--verbose", action="store_true", help="each step's finding whole, not cut to fit"
    )
    p.set_defaults(func=run)


def verdict_status(verdict: PlanVerdict | NoteVerdict) -> int:
    """The exit status a verdict means (see the module docstring)."""
    if isinstance(verdict, PlanVerdict):
        return WAITING
    if verdict.ended_by in ("executor_error", "policy_error"):
        return ERROR
    if verdict.ended_by == "plan_rejected":
        return REFUSED
    if verdict.cause is not None and verdict.cause.kind == "healthy":
        return OK
    return HUMAN


def refusal(item: ErrorMessage) -> str:
    """The service's error as the console says it: a refusal (a unit systemd does not
    know, or one out of the diagnosis scope) in the service's words, as systemctl says
    them; anything else as the diagnosis having failed."""
    if item.exit_status == REFUSED or item.message.startswith("diagnosis failed"):
        return item.message
    return f"diagnosis failed: {item.message}"


def print_event(item: StartedEvent | StepEvent | FinishedEvent, verbose: bool = False) -> None:
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
        if item.action == "final_note" or item.tool == "final_note":
            return  # the note itself follows the steps, whole
        found = one_line(item.summary or item.result_excerpt)
        for line in fit(found, "      ", verbose=verbose):
            out(line)


def diagnosis(
    paths: Paths,
    unit: str,
    symptom: str,
    on_event: Callable[[StartedEvent | StepEvent | FinishedEvent], None],
) -> PlanVerdict | NoteVerdict:
    """Ask the diagnosis service about ``unit`` (a valid unit name): each event to
    ``on_event`` as it arrives, then the verdict; its refusal, or a connection closed
    without a verdict, as a ConsoleError (what ``opsbot diagnose`` and ``opsbot mcp``
    say)."""
    request = DiagnoseRequest(unit=unit, symptom=symptom)
    for item in diagnose_stream(paths.diagnose_socket, request):
        if isinstance(item, ErrorMessage):
            raise ConsoleError(refusal(item), hint=item.hint, exit_status=item.exit_status)
        if isinstance(item, VerdictMessage):
            return item.verdict
        on_event(item)
    raise ConsoleError("the diagnosis service closed the connection without a verdict")


def run(args: argparse.Namespace, paths: Paths) -> int:
    events: list[dict[str, Any]] = []

    def shown(item: StartedEvent | StepEvent | FinishedEvent) -> None:
        events.append(item.model_dump(mode="json"))
        if not args.json:
            print_event(item, args.verbose)

    verdict = diagnosis(paths, unit_arg(args.unit), args.symptom, shown)
    status = verdict_status(verdict)
    if args.json:
        json_out({"events": events, "verdict": verdict.model_dump(mode="json")})
        return status
    if isinstance(verdict, PlanVerdict):
        out(f"plan {verdict.plan_id} proposed: {printable(verdict.plan.goal)}")
        for index, (step, argv) in enumerate(
            zip(verdict.plan.steps, step_argv(verdict.plan), strict=True), 1
        ):
            out(f"  {index}. {shlex.join(argv)}")
            if step.reason:
                for line in fit(f"why: {printable(step.reason)}", "     ", verbose=True):
                    out(line)
        out(f"review it:          opsbot show {verdict.plan_id}")
        out(f"approve it (root):  opsbot approve {verdict.plan_id}")
    else:
        cause = f", cause {verdict.cause.kind}" if verdict.cause is not None else ""
        out(f"no plan ({verdict.ended_by}{cause}):")
        for paragraph in verdict.text.splitlines():
            for line in fit(printable(paragraph), "  ", verbose=True):
                out(line)
    return status
