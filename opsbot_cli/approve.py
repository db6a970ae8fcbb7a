"""``opsbot approve ID`` (root): bind an approval to exactly this plan's sha256."""

from __future__ import annotations

import argparse
import shlex

from executor_svc.gate import approve
from executor_svc.policy import step_argv
from executor_svc.store import PlanStore, utcnow
from opsbot_cli.errors import UsageError
from opsbot_cli.output import command, json_out, operator_name, out, plan_id_arg, require_root, when
from shared_io.config import load_config
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "approve", "(root) approve a plan: binds an approval to its sha256, with expiry"
    )
    p.add_argument("plan_id", metavar="ID")
    p.add_argument(
        "--ttl",
        type=int,
        help="seconds the approval holds (at most the config's approval_ttl_seconds)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    require_root("approve")
    plan_id = plan_id_arg(args.plan_id)
    config = load_config(paths.config)
    ceiling = config.executor.approval_ttl_seconds
    ttl = args.ttl or ceiling
    if ttl > ceiling:
        raise UsageError(f"--ttl {ttl} exceeds approval_ttl_seconds={ceiling} in {paths.config}")
    done = approve(
        PlanStore(paths.state_dir),
        paths.approvals_dir,
        plan_id,
        approver=operator_name(),
        now=utcnow(),
        ttl_seconds=ttl,
    )
    if args.json:
        json_out(done.approval.model_dump(mode="json"))
        return 0
    out(
        f"approved plan {plan_id} (sha256 {done.record.sha256[:16]}...) until "
        f"{when(done.approval.expires_at)}:"
    )
    for argv in step_argv(done.plan):
        out(f"  {shlex.join(argv)}")
    out("opsbot-apply.path starts the apply now; `opsbot audit " + plan_id + "` follows it")
    return 0
