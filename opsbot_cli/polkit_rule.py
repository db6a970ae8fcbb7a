"""``opsbot polkit-rule [--write]``: the polkit rule generated from the policy, which lets
the executor's user act on exactly the allowed units with exactly the allowed verbs, and
answers NO to opsbot's users for every other action. ``--write`` replaces the rule file
atomically, owned by root:root with mode 0644."""

from __future__ import annotations

import argparse
import sys

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, require_root
from plans import RULE_PATH, render_rule, write_rule
from shared_io.config import load_config
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "polkit-rule", "print (or --write) the polkit rule generated from the policy")
    p.add_argument("--write", action="store_true", help=f"write it to {RULE_PATH}")
    p.add_argument("--json", action="store_true", help="the rule and where it goes, as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    rule = render_rule(load_config(paths.config).executor)
    if not args.write:
        if args.json:
            json_out({"path": str(RULE_PATH), "rule": rule, "written": False})
        else:
            sys.stdout.write(rule)
        return 0
    require_root("polkit-rule --write")
    try:
        write_rule(rule)
    except OSError as exc:
        raise ConsoleError(
            f"cannot write {RULE_PATH}: {exc.strerror or exc}",
            hint=f"is {RULE_PATH.parent} a directory on a writable file system?",
        ) from exc
    if args.json:
        json_out({"path": str(RULE_PATH), "rule": rule, "written": True})
    else:
        out(f"wrote {RULE_PATH} (root:root 0644); polkit reloads its rules by itself")
    return 0
