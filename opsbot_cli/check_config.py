"""``opsbot check-config``: validate the config and report how the executor gets the right
to act on units (the privilege mode)."""

from __future__ import annotations

import argparse
from typing import Any

from executor_svc.polkit import RULE_PATH, allowed_verbs, privilege_mode, render_rule
from opsbot_cli.output import command, json_out, out
from shared_io.config import load_config
from shared_io.paths import Paths

WRITE_RULE = "`opsbot polkit-rule --write`"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "check-config", "validate the config and report the privilege mode")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    mode = privilege_mode()
    rule_current = RULE_PATH.exists() and RULE_PATH.read_text() == render_rule(config.executor)
    allow = allowed_verbs(config.executor)
    info: dict[str, Any] = {
        "config": str(paths.config),
        "config_exists": paths.config.exists(),
        "allow": allow,
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
        json_out(info)
    else:
        out(f"{paths.config}: valid" + ("" if info["config_exists"] else " (absent: defaults)"))
        for verb, units in allow.items():
            out(f"  may {verb}: {', '.join(units)}")
        if not allow:
            out("  may do nothing: [executor.allow] is empty")
        out(f"privilege mode: {mode}")
        if mode == "polkit" and not rule_current:
            out(f"  warning: {RULE_PATH} does not match the policy; run {WRITE_RULE}")
        if mode == "polkit-rule-missing":
            out(f"  warning: polkit is installed but no opsbot rule: run {WRITE_RULE}")
        if mode == "none":
            out("  warning: no polkit and no root drop-in: the executor cannot act on units")
    return 0 if mode in ("polkit", "root-without-capabilities") or not config.executor.allow else 1
