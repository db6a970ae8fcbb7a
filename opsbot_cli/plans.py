"""``opsbot plans``: the stored plans and their states."""

from __future__ import annotations

import argparse

from opsbot_cli.clients import request
from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, printable, when
from shared_io.paths import Paths
from shared_schema import ListPlans, PlanList, Reject


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "plans", "list plans with their states")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    reply = request(paths.executor_socket, ListPlans())
    if isinstance(reply, Reject):
        raise ConsoleError(reply.reason)
    assert isinstance(reply, PlanList)
    if args.json:
        json_out([p.model_dump(mode="json") for p in reply.plans])
        return 0
    if not reply.plans:
        out("no plans")
        return 0
    out(f"{'PLAN':<25} {'STATE':<12} {'SUBMITTED':<19} {'UNITS':<30} GOAL")
    for p in reply.plans:
        units = printable(",".join(p.units))[:30]
        out(
            f"{p.plan_id:<25} {p.state:<12} {when(p.submitted_at):<19} {units:<30} "
            f"{printable(p.goal)[:60]}"
        )
    return 0
