"""``opsbot show ID``: one plan, its steps as a plan diff (``app.service: failed ->
restart``) with the argv each runs and each precondition said as the unit is now (``as
expected`` or not), who approved it (a person, or a standing rule, named as a rule), when
an approved plan waiting for its apply window runs, whether the service came back
(VERIFIED / UNRESOLVED, with what opsbot-verify saw), its history. Each step is printed
by opsbot_cli.steps, as ``opsbot approve`` prints it for review.

The reply is checked with the models' generated JSON Schema (opsbot_cli.wire): no model
is built. The argv is checked with the write tools' own builders (plans.argv_of), the
preconditions judged by plans. The live state is read only for a plan that may still
run (PROPOSED, APPROVED, APPLYING), by opsbot_cli.live, imported then; where it cannot be
read, each precondition says "live state unknown" and why. ``--json`` prints the
executor's answer whole, with the plan's ``plan_id`` and ``sha256`` at its top, where
``opsbot plans --json`` has them for each plan."""

from __future__ import annotations

import argparse
import hashlib
import shlex
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opsbot_cli import screen, steps, wire
from opsbot_cli.clients import ask_json
from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import plan_id_arg, window_words
from opsbot_cli.screen import printable, when
from opsbot_cli.steps import ReadState
from plans import argv_of
from shared_io.paths import Paths
from shared_schema.states import PlanState

if TYPE_CHECKING:
    from shared_io.unit_show import UnitState
    from shared_schema import PlanDetail

SUMMARY = "show one plan: goal, steps as argv, history"
#: The first column's width: ``submitted `` and every label after it.
LABEL = 10


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("show", help=SUMMARY, description=SUMMARY)
    p.add_argument("plan_id", metavar="ID", help="a plan id, as `opsbot plans` lists them")
    p.add_argument("--argv", action="store_true", help="print only each step's argv, one a line")
    p.add_argument("--json", action="store_true", help="the executor's answer, whole, as JSON")
    p.add_argument("-l", "--full", action="store_true", help="do not cut long lines at 100 columns")
    p.add_argument(
        "--no-pager",
        action="store_true",
        help="print, never through $SYSTEMD_PAGER/$PAGER/less (a terminal pages as systemctl does)",
    )
    p.set_defaults(func=run)


def fetched(paths: Paths, plan_id: str) -> dict[str, Any]:
    """The executor's answer about ``plan_id`` (a valid id), shaped by opsbot_cli.wire
    and checked to add up (:func:`check_detail`): what ``opsbot show`` and ``opsbot mcp``
    show."""
    detail = ask_json(paths.executor_socket, wire.show_request(plan_id), wire.plan_detail)
    check_detail(detail)
    return detail


def run(args: argparse.Namespace, paths: Paths) -> int:
    detail = fetched(paths, plan_id_arg(args.plan_id))
    if args.json:
        print(screen.json_text(json_detail(detail)))
    elif args.argv:
        for argv in detail["argv"]:
            print(shlex.join(argv))
    else:
        screen.show(render(detail, _live_reader(detail), args.full), no_pager=args.no_pager)
    return 0


def json_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    """What ``--json`` prints: the answer whole, and the plan's id and sha256 at its top
    level, the keys and the level ``opsbot plans --json`` gives each plan."""
    summary = detail["summary"]
    return {"plan_id": summary["plan_id"], "sha256": summary["sha256"], **detail}


def _live_reader(detail: Mapping[str, Any]) -> ReadState | None:
    """How to read live state, for a plan whose steps may still run; None once final."""
    if PlanState(detail["summary"]["state"]).is_final:
        return None
    from opsbot_cli import live  # systemctl, and the logging the runner needs

    return live.read


def check_detail(detail: Mapping[str, Any] | PlanDetail) -> None:
    """The executor's answer must add up before an operator reads a sha256 off it to
    approve: the plan shown hashes to the sha256 shown, and the argv shown is the argv
    that plan runs (a subverted executor could pair one plan with another's sha256).
    ``detail`` is a PLAN reply shaped by opsbot_cli.wire (or the model, dumped here)."""
    if not isinstance(detail, Mapping):
        detail = detail.model_dump(mode="json")
    summary = detail["summary"]
    actual = hashlib.sha256(wire.canonical_plan(detail["plan"])).hexdigest()
    if actual != summary["sha256"]:
        raise ConsoleError(
            f"the executor's answer does not add up: plan {summary['plan_id']} as sent "
            f"hashes to {actual[:16]}..., not the {summary['sha256'][:16]}... it reports",
            hint="do not approve it; look at /var/lib/opsbot/plans as root and the journal",
        )
    if argv_of(detail["plan"]["steps"]) != detail["argv"]:
        raise ConsoleError(
            f"the executor's answer does not add up: the argv it reports for plan "
            f"{summary['plan_id']} is not what its steps run",
            hint="do not approve it; look at /var/lib/opsbot/plans as root and the journal",
        )


def render(detail: Mapping[str, Any], read: ReadState | None, full: bool = False) -> list[str]:
    """The plan as ``opsbot show`` prints it: lines of at most 100 columns (prose and
    argv folded between words; ``--argv`` prints each argv exact), whole with ``full``.
    ``read`` reads a unit's live state (None: the plan is final)."""
    lines: list[str] = []

    def say(label: str, text: str, indent: int = 0) -> None:
        first = " " * indent + (f"{label:<{LABEL}}" if label else "")
        if full:
            lines.append(first + text)
            return
        rest = " " * (indent + (LABEL if label else 2))
        lines.extend(
            textwrap.wrap(text, screen.WIDTH, initial_indent=first, subsequent_indent=rest)
            or [first.rstrip()]
        )

    s = detail["summary"]
    say("plan", s["plan_id"])
    say("state", s["state"])
    if s["reason"]:
        say("reason", printable(s["reason"]))
    if s.get("approved_by_rule"):
        rule_sha = printable(str(s.get("rule_sha256") or "?"))[:16]
        say(
            "approved",
            f"by rule {printable(s['approved_by_rule'])}, not by a person "
            f"([[approve.rule]] sha256 {rule_sha}...)",
        )
    elif s.get("approved_by"):
        say("approved", f"by {printable(s['approved_by'])}")
    if s["state"] == "APPROVED" and s.get("waits_for_window") is not None:
        say("runs", window_words(s["waits_for_window"]))
    say("sha256", s["sha256"])
    say("goal", printable(s["goal"]))
    symptom = detail["plan"].get("symptom")
    if symptom:
        failing = ", ".join(symptom["health"]) or "none"
        say("symptom", f"{symptom['unit']}; health targets failing: {failing}")
    follows = detail["plan"].get("follows")
    if follows:
        say(
            "incident",
            f"incident {s.get('incident') or follows}: follows {follows}, which "
            "ran and did not cure the symptom",
        )
    elif s.get("incident") and s["incident"] != s["plan_id"]:
        say("incident", f"incident {s['incident']}")
    say("submitted", f"{when(s['submitted_at'])} by {printable(s['submitted_by'])}")
    say("on error", "stop" if detail["plan"]["stop_on_error"] else "continue")
    lines.append("steps:")
    records = {r["index"]: r for r in detail["steps"]}
    states: dict[str, UnitState | str] = {}
    plan_steps = detail["plan"]["steps"]
    for index, (step, argv) in enumerate(zip(plan_steps, detail["argv"], strict=True), 1):
        unit = step["args"]["unit"]
        state = None
        if read is not None:
            state = states[unit] if unit in states else states.setdefault(unit, read(unit))
        record = records.get(index)
        ran = ""
        if record is not None and record["outcome"] != "not-run":
            ran = f"{record['outcome']} (exit {record['exit_status']})"
        lines += steps.lines(index, step, argv, state=state, final=s["state"], ran=ran, full=full)
    v = s["verification"]
    if v is not None:
        say(
            "verified",
            f"{v['result']} {v['seconds']:g} s after the last step, by {printable(v['by'])}:",
        )
        for line in v["evidence"]:
            say("", printable(line), indent=2)
    elif s["state"] == "APPLIED":
        say("verified", "not yet: opsbot-verify watches its units for [executor] settle_seconds")
    if detail["history"]:
        lines.append("history:")
        for item in detail["history"]:
            reason = f": {printable(str(item.get('reason')))}" if item.get("reason") else ""
            state_, by = (printable(str(item.get(k, "?"))) for k in ("state", "by"))
            say("", f"{_at(item.get('at'))}  {state_:<11} by {by}{reason}", indent=2)
    return lines


def _at(value: Any) -> str:
    """A history entry's time with its zone (as sent, escaped, if it is not a time)."""
    try:
        return when(str(value))
    except ValueError:
        return printable(str(value))
