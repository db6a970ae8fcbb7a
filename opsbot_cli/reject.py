"""``opsbot reject ID`` (root): refuse a plan; it will never run.

Root removes the plan's approval file (so no later rewrite of the executor's status file
can bring an approved plan back) and leaves a root-owned rejection next to where it was,
which the apply and ``opsbot approve`` honour whatever the status file says.
"""

from __future__ import annotations

import argparse

from opsbot_cli.output import command, json_out, operator_name, out, plan_id_arg, require_root
from plans import PlanStore, reject, utcnow
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "reject", "(root) refuse a plan and remove its approval; it will never run")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--reason", help="why, for the audit trail")
    p.add_argument("--json", action="store_true", help="the plan's status after it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    require_root("reject")
    plan_id = plan_id_arg(args.plan_id)
    status = reject(
        PlanStore(paths.state_dir),
        paths.approvals_dir,
        plan_id,
        by=operator_name(),
        now=utcnow(),
        reason=args.reason or None,
    )
    if args.json:
        json_out({"plan_id": plan_id, "state": str(status.state), "reason": status.reason})
    else:
        out(f"rejected plan {plan_id}: it will never run")
    return 0
