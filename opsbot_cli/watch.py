"""``opsbot watch UNIT`` / ``opsbot unwatch UNIT`` (root): diagnose a unit automatically
whenever it fails (an OnFailure= drop-in that executor_svc.watch writes), or stop that."""

from __future__ import annotations

import argparse

from executor_svc.watch import unwatch, watch
from opsbot_cli.output import command, out, require_root, unit_arg
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "watch", "(root) diagnose UNIT automatically when it fails (OnFailure= drop-in)"
    )
    p.add_argument("unit", metavar="UNIT")
    p.set_defaults(func=run_watch)
    p = command(sub, "unwatch", "(root) remove the drop-in `opsbot watch` wrote")
    p.add_argument("unit", metavar="UNIT")
    p.set_defaults(func=run_unwatch)


def run_watch(args: argparse.Namespace, paths: Paths) -> int:
    require_root("watch")
    unit = unit_arg(args.unit)
    dropin = watch(unit)
    out(f"{unit}: a failure now starts opsbot-onfailure@{unit} ({dropin})")
    return 0


def run_unwatch(args: argparse.Namespace, paths: Paths) -> int:
    require_root("unwatch")
    unit = unit_arg(args.unit)
    unwatch(unit)
    out(f"{unit}: no longer watched")
    return 0
