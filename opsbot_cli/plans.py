"""``opsbot plans``: the stored plans and their states, listed as ``systemctl
list-units`` lists units: a header, a line a plan of at most 100 columns (``--full``:
whole), a footer; ``--state`` and ``--since`` to filter, ``--no-legend``, a pager on a
terminal. Where an approved plan waits for its apply window, a RUNS column says when
the window opens, and where a standing rule approved a plan, a BY RULE column names the
rule. The reply is checked with the models' generated JSON Schema (opsbot_cli.wire): no
model is built."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from opsbot_cli import screen, wire
from opsbot_cli.clients import ask_json
from opsbot_cli.errors import UsageError
from opsbot_cli.output import window_words
from opsbot_cli.screen import cut, printable, when
from shared_io.paths import Paths
from shared_schema.states import PlanState
from shared_schema.timespan import parse_timespan

SUMMARY = "list plans with their states"
EPILOG = """\
examples:
  opsbot plans --state proposed,approved     what waits for a decision or an apply
  opsbot plans --since 2h --state failed     what failed in the last two hours
  opsbot plans --since 2026-12-01 --json     everything since that day, for a script
"""
#: Columns of UNITS and GOAL when lines are cut to 100 columns (GOAL takes the rest).
UNITS_WIDTH = 20
#: Columns of BY RULE (the standing rule that approved a plan) when lines are cut.
RULE_WIDTH = 20


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plans",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (never cut)")
    p.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only plans in STATE (any case; repeat it or separate with commas): "
        + ", ".join(s.value for s in PlanState),
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only plans submitted since WHEN: a systemd time span ago (2h, 1d, 30min) "
        "or a date and time (2026-12-01, '2026-12-01 15:20', ... UTC)",
    )
    default, most = wire.list_limits()
    p.add_argument(
        "-n",
        "--limit",
        type=limit_arg,
        default=default,
        metavar="N",
        help=f"the N newest plans (default {default}, at most {most}); --state filters among them",
    )
    p.add_argument("--no-legend", action="store_true", help="print no header and no footer")
    p.add_argument(
        "-l", "--full", action="store_true", help="do not cut goals and units at 100 columns"
    )
    p.add_argument(
        "--no-pager",
        action="store_true",
        help="print, never through $SYSTEMD_PAGER/$PAGER/less (a terminal pages as systemctl does)",
    )
    p.set_defaults(func=run)


def limit_arg(value: str) -> int:
    most = wire.list_limits()[1]
    if not value.isdigit() or not 1 <= int(value) <= most:
        raise argparse.ArgumentTypeError(f"not a number from 1 to {most}: {value[:20]!r}")
    return int(value)


def states_arg(values: list[str]) -> set[str]:
    """``--state`` values, each a plan state in any case; a bad one is a usage error."""
    known = {s.value for s in PlanState}
    wanted = set()
    for value in values:
        for word in value.split(","):
            state = word.strip().upper()
            if state not in known:
                raise UsageError(
                    f"--state {printable(word.strip()[:20])!r}: not a plan state "
                    "(`opsbot plans --help` lists them)"
                )
            wanted.add(state)
    return wanted


def since_arg(value: str, now: float) -> datetime:
    """``--since WHEN``: a time span ago as systemd writes it (``2h``, ``1d 12h``, also
    ``-2h`` and ``2h ago``), or an ISO date or date and time; local time unless it says
    its zone (``Z``, ``+01:00``, `` UTC``; ``opsbot plans`` prints times in UTC on a host
    whose zone is UTC, and a zone name other than UTC is not understood here)."""
    text = value.strip()
    span = text.removeprefix("-").removesuffix("ago").strip()
    seconds = parse_timespan(span) if text else None
    if seconds is not None:
        try:
            return datetime.fromtimestamp(now - seconds, UTC)
        except (OverflowError, OSError, ValueError):
            raise UsageError(f"--since {printable(value[:20])!r}: too long ago") from None
    zone = UTC if text.endswith(" UTC") else None
    try:
        at = datetime.fromisoformat(text.removesuffix(" UTC"))
    except ValueError:
        raise UsageError(
            f"--since {printable(value[:20])!r}: not a time span (2h, 1d) or a date "
            "(2026-12-01 15:20)"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone) if zone else at.astimezone()
    return at


def listed(
    paths: Paths, limit: int, states: set[str], since: datetime | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The executor's ``limit`` newest plans (checked by opsbot_cli.wire), those in
    ``states`` (all for none) submitted since ``since``: what ``--json`` prints, and the
    listing whole (its ``total``). What ``opsbot plans`` and ``opsbot mcp`` list."""
    listing = ask_json(paths.executor_socket, wire.list_request(limit, since), wire.plan_list)
    shown = [
        p
        for p in listing["plans"]
        if (not states or p["state"] in states)
        and (since is None or datetime.fromisoformat(p["submitted_at"]) >= since)
    ]
    return shown, listing


def run(args: argparse.Namespace, paths: Paths) -> int:
    states = states_arg(args.state)
    since = since_arg(args.since, time.time()) if args.since is not None else None
    shown, listing = listed(paths, args.limit, states, since)
    if args.json:
        print(screen.json_text(shown))
        return 0
    lines = table(shown, legend=not args.no_legend, full=args.full)
    total = listing.get("total")
    if not args.no_legend and isinstance(total, int) and total > len(listing["plans"]):
        lines.append(
            f"(the {len(listing['plans'])} newest of {total} stored plans: "
            "--limit N for more, --since to go back)"
        )
    screen.show(lines, no_pager=args.no_pager)
    return 0


def _waits(plan: dict[str, Any]) -> bool:
    return plan["state"] == "APPROVED" and plan.get("waits_for_window") is not None


def _runs(plan: dict[str, Any]) -> str:
    """The RUNS cell: when an approved plan's apply window opens."""
    if plan["state"] != "APPROVED":
        return "-"
    return window_words(plan.get("waits_for_window"), long=False)


def _goal(plan: dict[str, Any]) -> str:
    """The GOAL cell; a follow-up's says whose incident it continues."""
    incident = plan.get("incident")
    if incident and incident != plan["plan_id"]:
        return f"(follow-up of {incident}) {plan['goal']}"
    return str(plan["goal"])


def _rule(plan: dict[str, Any], full: bool) -> str:
    """The BY RULE cell: the standing rule that approved the plan ("-" for none: a person
    did, or no one yet), cut to RULE_WIDTH unless ``full``."""
    rule = printable(str(plan.get("approved_by_rule") or "-"))
    return rule if full else cut(rule, RULE_WIDTH)


def table(plans: list[dict[str, Any]], legend: bool = True, full: bool = False) -> list[str]:
    """The listing: PLAN, STATE, SUBMITTED, UNITS, GOAL; each line at most 100 columns
    (units and goal cut with an ellipsis) unless ``full``. A RUNS column after STATE
    where an approved plan waits for its apply window: when the window opens; a BY RULE
    column after it where a standing rule approved a plan: which (a rule, not a person)."""
    runs = any(_waits(p) for p in plans)
    ruled = any(p.get("approved_by_rule") for p in plans)
    # An incident's plans together, in order, the follow-ups marked.
    first = {p["plan_id"]: i for i, p in enumerate(plans)}
    plans = sorted(
        plans,
        key=lambda p: (first.get(p.get("incident") or p["plan_id"], len(plans)), p["plan_id"]),
    )
    rows = [
        (
            p["plan_id"],
            p["state"],
            *((_runs(p),) if runs else ()),
            *((_rule(p, full),) if ruled else ()),
            when(p["submitted_at"]),
            printable(",".join(p["units"])),
            printable(_goal(p)),
        )
        for p in plans
    ]
    header = (
        "PLAN",
        "STATE",
        *(("RUNS",) if runs else ()),
        *(("BY RULE",) if ruled else ()),
        "SUBMITTED",
        "UNITS",
        "GOAL",
    )
    units_at = len(header) - 2
    widths = [
        max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header[: units_at + 1])
    ]
    if not full:
        widths[units_at] = min(widths[units_at], UNITS_WIDTH)
    goal_width = screen.WIDTH - sum(widths) - len(widths)
    lines = []
    for row in [header, *rows] if legend else rows:
        units = row[units_at] if full else cut(row[units_at], widths[units_at])
        goal = row[-1] if full else cut(row[-1], max(goal_width, 1))
        cells = [*row[:units_at], units]
        lines.append(" ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True)) + f" {goal}")
    if legend:
        lines.append("")
        lines.append(f"{len(plans)} plan{'' if len(plans) == 1 else 's'} listed.")
    return [line.rstrip() for line in lines]
