"""``opsbot polkit-rule [--write]``: the polkit rule generated from the policy, which lets
the executor's user act on exactly the allowed units with exactly the allowed verbs."""

from __future__ import annotations

import argparse
import sys

from executor_svc.polkit import RULE_PATH, render_rule
from executor_svc.store import write_atomic
from opsbot_cli.output import command, out, require_root
from shared_io.config import load_config
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "polkit-rule", "print (or --write) the polkit rule generated from the policy")
    p.add_argument("--write", action="store_true", help=f"write it to {RULE_PATH}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    rule = render_rule(load_config(paths.config).executor)
    if not args.write:
        sys.stdout.write(rule)
        return 0
    require_root("polkit-rule --write")
    RULE_PATH.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(RULE_PATH, rule.encode(), mode=0o644)
    out(f"wrote {RULE_PATH}; polkit reloads its rules by itself")
    return 0
