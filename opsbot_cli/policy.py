"""``opsbot policy check|test ID``: the standing approval rules (``[[approve.rule]]`` in
opsbot.toml, shared_schema/standing.py) as the config holds them, and which rule would
approve a stored plan now and why each other would not (plans/standing.py decides).

``check`` says, per rule, what it reaches now: each tool with the allowlisted units its
patterns match (a pattern that reaches none is a warning, exit 1). ``test ID`` (root: it
reads the plan store) asks the rules about one plan, as they would be asked when it was
proposed, but as the store, the config and the clock stand now: exit 0 when a rule would
approve it, 3 when it waits for a human.

Rules only explain for now: none writes an approval (every rule is in shadow), so every
plan still waits for a human.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from opsbot_cli.errors import UsageError
from opsbot_cli.output import command, json_out, out, plan_id_arg, require_root
from shared_io.config import load_config
from shared_io.exit_codes import ERROR, OK, WAITING
from shared_io.paths import Paths

SUMMARY = "the standing approval rules: check them, or test which would approve a plan"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "policy", SUMMARY)
    p.add_argument(
        "verb",
        choices=("check", "test"),
        metavar="check|test",
        help="check: each [[approve.rule]] and the allowlisted units it reaches now; "
        "test ID: (root) which rule would approve plan ID now, and why the others would not",
    )
    p.add_argument("plan_id", metavar="ID", nargs="?", help="(test) the plan")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    if args.verb == "check":
        if args.plan_id is not None:
            raise UsageError("`opsbot policy check` takes no ID (`opsbot policy test ID` does)")
        return run_check(args, paths)
    if args.plan_id is None:
        raise UsageError("`opsbot policy test` needs the plan's ID (`opsbot plans` lists them)")
    require_root(f"policy test {args.plan_id}")
    return run_test(args, paths, plan_id_arg(args.plan_id))


def run_check(args: argparse.Namespace, paths: Paths) -> int:
    from plans.standing import reach

    config = load_config(paths.config)
    rules = config.approve.rule
    found: list[dict[str, Any]] = []
    warnings: list[str] = []
    for rule in rules:
        reaches = reach(rule, config.executor)
        for tool, units in reaches.items():
            allowed = config.executor.allow.get(tool, [])
            if not units:
                warnings.append(
                    f"rule {rule.name}: {tool} of {', '.join(rule.units)} reaches no unit "
                    f"[executor.allow] {tool} holds"
                )
            elif len(units) > 1 and len(units) == len(allowed) and _globs(rule.units):
                warnings.append(
                    f"rule {rule.name}: {tool} of {', '.join(rule.units)} reaches every unit "
                    f"[executor.allow] {tool} holds ({len(units)}): name them if that is not "
                    "meant (a unit allowed later is reached too)"
                )
        found.append(
            {
                "name": rule.name,
                "mode": rule.mode,
                "tools": list(rule.tools),
                "units": list(rule.units),
                "reaches": reaches,
                "windows": [w.model_dump() for w in rule.windows],
                "max_per_unit": rule.max_per_unit,
                "period": rule.period,
            }
        )
    if args.json:
        json_out({"config": str(paths.config), "rules": found, "warnings": warnings})
        return ERROR if warnings else OK
    if not rules:
        out(f"{paths.config}: no [[approve.rule]]: every plan waits for a human")
        return OK
    header = f"{paths.config}: {len(rules)} standing approval rule(s), asked in this order:"
    for line in textwrap.wrap(header, 100, subsequent_indent="  "):
        out(line)
    for rule, said in zip(rules, found, strict=True):
        named = f"{rule.name} ({rule.mode}): {', '.join(rule.tools)} of {', '.join(rule.units)}"
        for line in textwrap.wrap(named, 98, subsequent_indent="    "):
            out(f"  {line}")
        for tool, units in said["reaches"].items():
            reached = f"{tool} reaches now: {', '.join(units) or 'nothing'}"
            for line in textwrap.wrap(reached, 96, subsequent_indent="  "):
                out(f"    {line}")
        when = "; ".join(f"{w.start} for {w.duration}" for w in rule.windows) or "any time"
        out(f"    when: {when}; at most {rule.max_per_unit} a unit in {rule.period}")
    for warning in warnings:
        for line in textwrap.wrap(f"warning: {warning}", 98, subsequent_indent="  "):
            out(f"  {line}")
    out("rules only explain for now (`opsbot policy test ID`): every plan waits for a human")
    return ERROR if warnings else OK


def run_test(args: argparse.Namespace, paths: Paths, plan_id: str) -> int:
    from plans import PlanStore, utcnow
    from plans.standing import ForHumans, decide, recent_errors, unit_history

    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    record = store.load(plan_id)
    plan = store.verified_plan(record)
    status = store.status(plan_id, record)
    now = utcnow()
    decision = decide(
        plan,
        status.state,
        config.approve.rule,
        config.executor,
        history=lambda unit: unit_history(store, unit, skip=plan_id),
        recent=recent_errors(store, config.executor, now),
        now=now,
    )
    refused = decision.refused if isinstance(decision, ForHumans) else ()
    rule = None if isinstance(decision, ForHumans) else decision.rule
    if args.json:
        json_out(
            {
                "plan_id": plan_id,
                "state": str(status.state),
                "rule": None if rule is None else rule.name,
                "mode": None if rule is None else rule.mode,
                "refused": [{"rule": r.rule, "reason": r.reason} for r in refused],
            }
        )
        return WAITING if rule is None else OK
    out(f"plan {plan_id} ({status.state}): {plan.goal}"[:100])
    if rule is not None:
        out(f"  rule {rule.name} ({rule.mode}) would approve it")
    elif not refused:
        out("  no [[approve.rule]]: it waits for a human")
    else:
        out("  no rule would approve it; it waits for a human:")
        for r in refused:
            for line in textwrap.wrap(f"{r.rule}: {r.reason}", 96, subsequent_indent="  "):
                out(f"    {line}")
    return WAITING if rule is None else OK


def _globs(patterns: list[str]) -> bool:
    return any(c in pattern for pattern in patterns for c in "*?[")
