"""opsbot: the operator's command line.

    opsbot plans                  list plans and their states
    opsbot show ID [--argv]       one plan: its steps, as the argv each will run
    opsbot approve ID             (root) approve exactly this plan, bound to its sha256
    opsbot reject ID              (root) refuse it
    opsbot apply [--dry-run]      run approved plans now (the timer does this too)
    opsbot audit ID               the plan's story from the journal
    opsbot diagnose UNIT          ask the diagnosis service why UNIT is down (live steps)
    opsbot watch UNIT             (root) diagnose UNIT automatically whenever it fails
    opsbot unwatch UNIT           (root) stop that
    opsbot check-config           validate /etc/opsbot/opsbot.toml, show the privilege mode
    opsbot polkit-rule [--write]  the polkit rule generated from the policy

Errors are one line on stderr and a non-zero exit status; --json where scripts read.
"""

import argparse
import contextlib
import json
import os
import pwd
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from executor_svc import log as logsetup
from executor_svc.apply import Applier, Outcome
from executor_svc.approvals import write_approval
from executor_svc.audit import read_story
from executor_svc.client import diagnose_stream, request
from executor_svc.config import load_config
from executor_svc.errors import ExecutorError, UsageError
from executor_svc.paths import Paths
from executor_svc.policy import step_argv
from executor_svc.polkit import RULE_PATH, allowed_verbs, privilege_mode, render_rule
from executor_svc.run import run
from executor_svc.states import TransitionRefused, transition
from executor_svc.store import PlanStore, utcnow, write_atomic
from shared_schema import ListPlans, PlanDetail, PlanList, PlanState, Reject, ShowPlan
from shared_schema.diagnosis import (
    DiagnoseRequest,
    ErrorMessage,
    FinishedEvent,
    NoteVerdict,
    PlanVerdict,
    StartedEvent,
    StepEvent,
    VerdictMessage,
)
from shared_schema.text import printable

log = structlog.get_logger("opsbot.cli")


def _out(text: str = "") -> None:
    print(text)


def _json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UsageError(f"{what} must run as root", hint=f"sudo opsbot {what}")


def _operator_name() -> str:
    name = os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name
    return "".join(c for c in name if c.isalnum() or c in "_.@-")[:64] or "root"


def _when(value: datetime) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


# -- plans / show -----------------------------------------------------------------------


def cmd_plans(args: argparse.Namespace, paths: Paths) -> int:
    reply = request(paths.socket, ListPlans())
    if isinstance(reply, Reject):
        raise ExecutorError(reply.reason)
    assert isinstance(reply, PlanList)
    if args.json:
        _json([p.model_dump(mode="json") for p in reply.plans])
        return 0
    if not reply.plans:
        _out("no plans")
        return 0
    _out(f"{'PLAN':<25} {'STATE':<12} {'SUBMITTED':<19} {'UNITS':<30} GOAL")
    for p in reply.plans:
        units = printable(",".join(p.units))[:30]
        _out(
            f"{p.plan_id:<25} {p.state:<12} {_when(p.submitted_at):<19} {units:<30} "
            f"{printable(p.goal)[:60]}"
        )
    return 0


def _show_detail(detail: PlanDetail, argv_only: bool) -> None:
    s = detail.summary
    if argv_only:
        for argv in detail.argv:
            _out(shlex.join(argv))
        return
    _out(f"plan      {s.plan_id}")
    _out(f"state     {s.state}" + (f" ({printable(s.reason)})" if s.reason else ""))
    _out(f"sha256    {s.sha256}")
    _out(f"goal      {printable(s.goal)}")
    _out(f"submitted {_when(s.submitted_at)} by {printable(s.submitted_by)}")
    _out(f"on error  {'stop' if detail.plan.stop_on_error else 'continue'}")
    _out("steps:")
    records = {r.index: r for r in detail.steps}
    for index, (step, argv) in enumerate(zip(detail.plan.steps, detail.argv, strict=True), 1):
        _out(f"  {index}. {shlex.join(argv)}")
        if step.expect is not None:
            _out(f"     expect {step.expect.model_dump_json(exclude_none=True)}")
        if step.reason:
            _out(f"     why    {printable(step.reason)}")
        record = records.get(index)
        if record is not None and record.outcome != "not-run":
            _out(f"     ran    {record.outcome} (exit {record.exit_status})")
    if detail.history:
        _out("history:")
        for item in detail.history:
            reason = f": {printable(str(item.get('reason')))}" if item.get("reason") else ""
            _out(f"  {item['at']}  {item['state']:<11} by {item['by']}{reason}")


def cmd_show(args: argparse.Namespace, paths: Paths) -> int:
    reply = request(paths.socket, ShowPlan(plan_id=_plan_id(args.plan_id)))
    if isinstance(reply, Reject):
        raise ExecutorError(reply.reason)
    assert isinstance(reply, PlanDetail)
    if args.json:
        _json(reply.model_dump(mode="json"))
    else:
        _show_detail(reply, args.argv)
    return 0


def _plan_id(value: str) -> str:
    from shared_schema import is_valid_plan_id

    if not is_valid_plan_id(value):
        raise UsageError(
            f"{printable(value[:80])!r} is not a plan id",
            hint="ids look like 20261129-213500-1a2b3c4d; `opsbot plans` lists them",
        )
    return value


# -- approve / reject -------------------------------------------------------------------


def cmd_approve(args: argparse.Namespace, paths: Paths) -> int:
    _require_root("approve")
    plan_id = _plan_id(args.plan_id)
    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    ttl = args.ttl or config.executor.approval_ttl_seconds
    if ttl > config.executor.approval_ttl_seconds:
        raise UsageError(
            f"--ttl {ttl} exceeds approval_ttl_seconds="
            f"{config.executor.approval_ttl_seconds} in {paths.config}"
        )
    approver = _operator_name()
    with store.apply_lock():
        record = store.load(plan_id)
        plan = store.verified_plan(record)
        status = store.status(plan_id, record)
        if status.state not in (PlanState.PROPOSED, PlanState.APPROVED):
            raise UsageError(
                f"plan {plan_id} is {status.state}; only PROPOSED plans can be approved",
                hint="diagnose again for a new plan",
            )
        now = utcnow()
        approval = write_approval(paths.approvals_dir, record, approver, now, ttl)
        if status.state is PlanState.PROPOSED:
            try:
                status = transition(
                    status, PlanState.APPROVED, by=approver, at=now, approved_by=approver
                )
            except TransitionRefused as exc:
                raise UsageError(exc.message) from exc
            store.save_status(status)
    log.info(
        "plan.approved",
        plan_id=plan_id,
        sha256=record.sha256,
        approver=approver,
        expires_at=approval.expires_at.isoformat(),
    )
    if args.json:
        _json(approval.model_dump(mode="json"))
        return 0
    _out(
        f"approved plan {plan_id} (sha256 {record.sha256[:16]}...) until "
        f"{_when(approval.expires_at)}:"
    )
    for argv in step_argv(plan):
        _out(f"  {shlex.join(argv)}")
    _out("opsbot-apply.path starts the apply now; `opsbot audit " + plan_id + "` follows it")
    return 0


def cmd_reject(args: argparse.Namespace, paths: Paths) -> int:
    _require_root("reject")
    plan_id = _plan_id(args.plan_id)
    store = PlanStore(paths.state_dir)
    by = _operator_name()
    with store.apply_lock():
        record = store.load(plan_id)
        status = store.status(plan_id, record)
        try:
            status = transition(
                status,
                PlanState.REJECTED,
                by=by,
                at=utcnow(),
                reason=args.reason or "rejected by operator",
            )
        except TransitionRefused as exc:
            raise UsageError(exc.message) from exc
        store.save_status(status)
    log.info(
        "plan.rejected",
        plan_id=plan_id,
        sha256=record.sha256,
        approver=by,
        reason=args.reason or None,
    )
    _out(f"rejected plan {plan_id}")
    return 0


# -- apply ------------------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    if not args.dry_run:
        store.ensure()
    applier = Applier(
        store, paths.approvals_dir, config.executor, actor=_operator_name(), now=utcnow
    )
    outcomes = applier.apply_all(dry_run=args.dry_run)
    if args.json:
        _json([_outcome_json(o) for o in outcomes])
    else:
        if not outcomes:
            _out("no open plans")
        for o in outcomes:
            _out(f"{o.plan_id}  {o.state:<11} {printable(o.message)}")
            if args.dry_run:
                for argv in o.argv:
                    _out(f"    {shlex.join(argv)}")
    return 1 if any(o.state is PlanState.FAILED for o in outcomes if o.ran) else 0


def _outcome_json(o: Outcome) -> dict[str, Any]:
    return {
        "plan_id": o.plan_id,
        "state": str(o.state),
        "message": o.message,
        "argv": o.argv,
        "ran": o.ran,
    }


# -- audit ------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace, paths: Paths) -> int:
    plan_id = _plan_id(args.plan_id)
    entries, ignored = read_story(plan_id)
    if args.json:
        _json(
            {
                "plan_id": plan_id,
                "entries": [e.as_json() for e in entries],
                "ignored_untrusted": ignored,
            }
        )
        return 0 if entries else 1
    if not entries:
        raise ExecutorError(
            f"no journal entries from opsbot for plan {plan_id}",
            hint="reading the journal needs root or group systemd-journal",
        )
    for e in entries:
        # A root-run service may log PLAN_ID= too; what it wrote is shown, never obeyed.
        details = " ".join(f"{k.lower()}={printable(v)}" for k, v in e.fields.items())
        _out(
            f"{e.time.astimezone():%Y-%m-%d %H:%M:%S}  {printable(e.event):<18} {details}  "
            f"[{printable(e.source)}]"
        )
    if ignored:
        _out(f"({ignored} entries naming this plan were ignored: not written by opsbot)")
    return 0


# -- diagnose / watch -------------------------------------------------------------------


def _unit(value: str) -> str:
    from shared_schema import is_valid_unit_name

    if "." not in value:
        value += ".service"
    if not is_valid_unit_name(value):
        raise UsageError(
            f"{printable(value[:80])!r} is not a unit name",
            hint="e.g. nginx.service, app.service, foo@bar.service",
        )
    return value


def _print_event(item: StartedEvent | StepEvent | FinishedEvent) -> None:
    if isinstance(item, StartedEvent):
        _out(
            f"diagnosing {item.unit} (run {item.run_id}, policy {item.policy}, "
            f"at most {item.max_steps} steps)"
        )
    elif isinstance(item, StepEvent):
        # The tool is whatever name the model asked for, and a model reads text anyone
        # can write to the journal: shown through printable(), like the excerpt.
        what = printable(item.tool or item.action)
        tokens = f", {item.tokens} tokens" if item.tokens else ""
        redacted = f", {item.redactions} redacted" if item.redactions else ""
        _out(f"  step {item.step} [{item.decided_by}] {what}{tokens}{redacted}")
        found = printable((item.summary or item.result_excerpt).replace("\n", " "))
        _out(f"      {found[:200]}")


def cmd_diagnose(args: argparse.Namespace, paths: Paths) -> int:
    unit = _unit(args.unit)
    events: list[dict[str, Any]] = []
    verdict: PlanVerdict | NoteVerdict | None = None
    for item in diagnose_stream(
        paths.diagnose_socket, DiagnoseRequest(unit=unit, symptom=args.symptom)
    ):
        if isinstance(item, ErrorMessage):
            raise ExecutorError(f"diagnosis failed: {item.message}", hint=item.hint)
        if isinstance(item, VerdictMessage):
            verdict = item.verdict
            break
        events.append(item.model_dump(mode="json"))
        if not args.json:
            _print_event(item)
    if verdict is None:
        raise ExecutorError("the diagnosis service closed the connection without a verdict")
    if args.json:
        _json({"events": events, "verdict": verdict.model_dump(mode="json")})
        return 0
    if isinstance(verdict, PlanVerdict):
        _out(f"plan {verdict.plan_id} proposed: {printable(verdict.plan.goal)}")
        for index, (step, argv) in enumerate(
            zip(verdict.plan.steps, step_argv(verdict.plan), strict=True), 1
        ):
            _out(f"  {index}. {shlex.join(argv)}")
            if step.reason:
                _out(f"     why: {printable(step.reason)}")
        _out(f"approve it with: sudo opsbot approve {verdict.plan_id}")
    else:
        _out(f"no plan ({verdict.ended_by}):")
        for line in verdict.text.splitlines():
            _out(f"  {printable(line)}")
    return 0


def _watch_dropin(unit: str) -> Path:
    return Path("/etc/systemd/system") / f"{unit}.d" / "50-opsbot-watch.conf"


def cmd_watch(args: argparse.Namespace, paths: Paths) -> int:
    _require_root("watch")
    unit = _unit(args.unit)
    dropin = _watch_dropin(unit)
    dropin.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        dropin,
        b"# Written by `opsbot watch`; `opsbot unwatch` removes it.\n"
        b"[Unit]\nOnFailure=opsbot-onfailure@%n.service\n",
        mode=0o644,
    )
    _daemon_reload()
    log.info("unit.watched", unit=unit)
    _out(f"{unit}: a failure now starts opsbot-onfailure@{unit} ({dropin})")
    return 0


def cmd_unwatch(args: argparse.Namespace, paths: Paths) -> int:
    _require_root("unwatch")
    unit = _unit(args.unit)
    dropin = _watch_dropin(unit)
    try:
        dropin.unlink()
    except FileNotFoundError:
        raise UsageError(f"{unit} is not watched (no {dropin})") from None
    with contextlib.suppress(OSError):
        dropin.parent.rmdir()
    _daemon_reload()
    log.info("unit.unwatched", unit=unit)
    _out(f"{unit}: no longer watched")
    return 0


def _daemon_reload() -> None:
    result = run(["systemctl", "daemon-reload"], timeout=60)
    if not result.ok:
        raise ExecutorError(f"systemctl daemon-reload failed: {result.error or result.output}")


# -- config -----------------------------------------------------------------------------


def cmd_check_config(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    mode = privilege_mode()
    rule_current = RULE_PATH.exists() and RULE_PATH.read_text() == render_rule(config.executor)
    info = {
        "config": str(paths.config),
        "config_exists": paths.config.exists(),
        "allow": allowed_verbs(config.executor),
        "privilege_mode": mode,
        "polkit_rule_current": rule_current,
        "step_timeout_seconds": config.executor.step_timeout_seconds,
        "plan_ttl_seconds": config.executor.plan_ttl_seconds,
        "approval_ttl_seconds": config.executor.approval_ttl_seconds,
        "watch": config.diagnose.watch,
        "health_targets": sorted(config.diagnose.health),
        "model": config.diagnose.model.kind,
    }
    if args.json:
        _json(info)
    else:
        _out(f"{paths.config}: valid" + ("" if info["config_exists"] else " (absent: defaults)"))
        for verb, units in info["allow"].items():  # type: ignore[attr-defined]
            _out(f"  may {verb}: {', '.join(units)}")
        if not info["allow"]:
            _out("  may do nothing: [executor.allow] is empty")
        _out(f"privilege mode: {mode}")
        if mode == "polkit" and not rule_current:
            _out(
                f"  warning: {RULE_PATH} does not match the policy; run "
                "`opsbot polkit-rule --write`"
            )
        if mode == "polkit-rule-missing":
            _out(
                "  warning: polkit is installed but no opsbot rule: run "
                "`opsbot polkit-rule --write`"
            )
        if mode == "none":
            _out("  warning: no polkit and no root drop-in: the executor cannot act on units")
    return 0 if mode in ("polkit", "root-without-capabilities") or not config.executor.allow else 1


def cmd_polkit_rule(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    rule = render_rule(config.executor)
    if not args.write:
        sys.stdout.write(rule)
        return 0
    _require_root("polkit-rule --write")
    RULE_PATH.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(RULE_PATH, rule.encode(), mode=0o644)
    _out(f"wrote {RULE_PATH}; polkit reloads its rules by itself")
    return 0


# -- main -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsbot",
        description="Review, approve and apply the fixes opsbot proposes for failed "
        "systemd services. Nothing changes on the host until root approves a plan's exact "
        "sha256 with `opsbot approve`.",
        epilog="Typical session: opsbot plans; opsbot show ID; sudo opsbot approve ID; "
        "opsbot audit ID",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        return p

    p = add("plans", "list plans with their states")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plans)
    p = add("show", "show one plan: goal, steps as argv, history")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--argv", action="store_true", help="print only each step's argv, one a line")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)
    p = add("approve", "(root) approve a plan: binds an approval to its sha256, with expiry")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument(
        "--ttl",
        type=int,
        help="seconds the approval holds (at most the config's approval_ttl_seconds)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_approve)
    p = add("reject", "(root) refuse a plan; it will never run")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--reason", help="why, for the audit trail")
    p.set_defaults(func=cmd_reject)
    p = add("apply", "run approved plans now (opsbot-apply.timer and .path do this)")
    p.add_argument("--dry-run", action="store_true", help="print what would run and run nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_apply)
    p = add("audit", "tell a plan's story from the journal (trusted entries only)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)
    p = add("diagnose", "ask the diagnosis service why a unit is down; shows each step live")
    p.add_argument("unit", metavar="UNIT", help="e.g. nginx.service (.service may be left out)")
    p.add_argument("--symptom", default="", help="what you saw, e.g. 'nginx returns 502'")
    p.add_argument("--json", action="store_true", help="events and verdict as one JSON object")
    p.set_defaults(func=cmd_diagnose)
    p = add("watch", "(root) diagnose UNIT automatically when it fails (OnFailure= drop-in)")
    p.add_argument("unit", metavar="UNIT")
    p.set_defaults(func=cmd_watch)
    p = add("unwatch", "(root) remove the drop-in `opsbot watch` wrote")
    p.add_argument("unit", metavar="UNIT")
    p.set_defaults(func=cmd_unwatch)
    p = add("check-config", "validate the config and report the privilege mode")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check_config)
    p = add("polkit-rule", "print (or --write) the polkit rule generated from the policy")
    p.add_argument("--write", action="store_true", help=f"write it to {RULE_PATH}")
    p.set_defaults(func=cmd_polkit_rule)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure()
    try:
        status: int = args.func(args, Paths.from_env())
        return status
    except ExecutorError as exc:
        print(f"opsbot: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"opsbot: hint: {exc.hint}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
