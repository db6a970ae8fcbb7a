"""``opsbot watch UNIT`` / ``opsbot unwatch UNIT`` (root): diagnose a unit automatically
whenever it fails (an OnFailure= drop-in that opsbot_cli.onfailure writes), or stop that."""

from __future__ import annotations

import argparse

from opsbot_cli.onfailure import unwatch, watch, watcher
from opsbot_cli.output import command, json_out, out, require_root, unit_arg
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "watch", "(root) diagnose UNIT automatically when it fails (OnFailure= drop-in)"
    )
    p.add_argument("unit", metavar="UNIT")
    p.add_argument("--json", action="store_true", help="the unit and its drop-in")
    p.set_defaults(func=run_watch)
    p = command(sub, "unwatch", "(root) remove the drop-in `opsbot watch` wrote")
    p.add_argument("unit", metavar="UNIT")
    p.add_argument("--json", action="store_true", help="the unit and the drop-in removed")
    p.set_defaults(func=run_unwatch)


def run_watch(args: argparse.Namespace, paths: Paths) -> int:
    require_root("watch")
    unit = unit_arg(args.unit)
    dropin = watch(unit)
    if args.json:
        json_out({"unit": unit, "watched": True, "dropin": str(dropin), "starts": watcher(unit)})
    else:
        out(f"{unit}: watched; a failure starts a diagnosis")
        out(f"  unit:    {watcher(unit)}")
        out(f"  drop-in: {dropin}")
    return 0


def run_unwatch(args: argparse.Namespace, paths: Paths) -> int:
    require_root("unwatch")
    unit = unit_arg(args.unit)
    dropin = unwatch(unit)
    if args.json:
        json_out({"unit": unit, "watched": False, "dropin": str(dropin)})
    else:
        out(f"{unit}: no longer watched")
    return 0
