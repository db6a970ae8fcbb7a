"""``opsbot show ID``: one plan, its steps as the argv each will run, whether the
service came back (VERIFIED / UNRESOLVED, with what opsbot-verify saw), its history."""

from __future__ import annotations

import argparse
import shlex

from opsbot_cli.clients import request
from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, plan_id_arg, printable, when
from shared_io.paths import Paths
from shared_schema import PlanDetail, Reject, ShowPlan, sha256_hex


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "show", "show one plan: goal, steps as argv, history")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--argv", action="store_true", help="print only each step's argv, one a line")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    reply = request(paths.executor_socket, ShowPlan(plan_id=plan_id_arg(args.plan_id)))
    if isinstance(reply, Reject):
        raise ConsoleError(reply.reason)
    assert isinstance(reply, PlanDetail)
    check_detail(reply)
    if args.json:
        json_out(reply.model_dump(mode="json"))
    elif args.argv:
        for argv in reply.argv:
            out(shlex.join(argv))
    else:
        render(reply)
    return 0


def check_detail(detail: PlanDetail) -> None:
    """The executor's answer must add up before an operator reads a sha256 off it to
    approve: the plan shown hashes to the sha256 shown, and the argv shown is the argv
    that plan runs (a subverted executor could pair one plan with another's sha256)."""
    actual = sha256_hex(detail.plan.canonical())
    if actual != detail.summary.sha256:
        raise ConsoleError(
            f"the executor's answer does not add up: plan {detail.summary.plan_id} as sent "
            f"hashes to {actual[:16]}..., not the {detail.summary.sha256[:16]}... it reports",
            hint="do not approve it; look at /var/lib/opsbot/plans as root and the journal",
        )
    from executor_svc.policy import step_argv  # the executor's own table, when needed

    if step_argv(detail.plan) != detail.argv:
        raise ConsoleError(
            f"the executor's answer does not add up: the argv it reports for plan "
            f"{detail.summary.plan_id} is not what its steps run",
            hint="do not approve it; look at /var/lib/opsbot/plans as root and the journal",
        )


def render(detail: PlanDetail) -> None:
    s = detail.summary
    out(f"plan      {s.plan_id}")
    out(f"state     {s.state}" + (f" ({printable(s.reason)})" if s.reason else ""))
    out(f"sha256    {s.sha256}")
    out(f"goal      {printable(s.goal)}")
    out(f"submitted {when(s.submitted_at)} by {printable(s.submitted_by)}")
    out(f"on error  {'stop' if detail.plan.stop_on_error else 'continue'}")
    out("steps:")
    records = {r.index: r for r in detail.steps}
    for index, (step, argv) in enumerate(zip(detail.plan.steps, detail.argv, strict=True), 1):
        out(f"  {index}. {shlex.join(argv)}")
        if step.expect is not None:
            out(f"     expect {step.expect.model_dump_json(exclude_none=True)}")
        if step.reason:
            out(f"     why    {printable(step.reason)}")
        record = records.get(index)
        if record is not None and record.outcome != "not-run":
            out(f"     ran    {record.outcome} (exit {record.exit_status})")
    v = s.verification
    if v is not None:
        out(f"verified  {v.result} {v.seconds:g} s after the last step, by {printable(v.by)}:")
        for line in v.evidence:
            out(f"  {printable(line)}")
    elif s.state == "APPLIED":
        out("verified  not yet: opsbot-verify watches its units for [executor] settle_seconds")
    if detail.history:
        out("history:")
        for item in detail.history:
            reason = f": {printable(str(item.get('reason')))}" if item.get("reason") else ""
            at, state, by = (printable(str(item.get(k, "?"))) for k in ("at", "state", "by"))
            out(f"  {at}  {state:<11} by {by}{reason}")
