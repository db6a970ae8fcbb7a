"""``opsbot apply [--dry-run]``: run approved plans now (opsbot-apply.timer and .path do
this by themselves); with ``--dry-run``, what the next apply would do, running nothing."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from executor_svc.apply import Outcome
from executor_svc.apply_service import apply_plans, failed
from opsbot_cli.output import command, json_out, operator_name, out, printable
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "apply", "run approved plans now (opsbot-apply.timer and .path do this)")
    p.add_argument("--dry-run", action="store_true", help="print what would run and run nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    outcomes = apply_plans(paths, actor=operator_name(), dry_run=args.dry_run)
    if args.json:
        json_out([_outcome_json(o) for o in outcomes])
    else:
        if not outcomes:
            out("no open plans")
        for o in outcomes:
            out(f"{o.plan_id}  {o.state:<11} {printable(o.message)}")
            if args.dry_run:
                for argv in o.argv:
                    out(f"    {shlex.join(argv)}")
    return 1 if failed(outcomes) else 0


def _outcome_json(o: Outcome) -> dict[str, Any]:
    return {
        "plan_id": o.plan_id,
        "state": str(o.state),
        "message": o.message,
        "argv": o.argv,
        "ran": o.ran,
    }
