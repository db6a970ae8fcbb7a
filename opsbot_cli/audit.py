"""``opsbot audit ID``: the plan's story from the journal, trusted entries only."""

from __future__ import annotations

import argparse

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, plan_id_arg, printable
from opsbot_cli.story import read_story
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "audit", "tell a plan's story from the journal (trusted entries only)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    plan_id = plan_id_arg(args.plan_id)
    entries, ignored = read_story(plan_id)
    if args.json:
        json_out(
            {
                "plan_id": plan_id,
                "entries": [e.as_json() for e in entries],
                "ignored_untrusted": ignored,
            }
        )
        return 0 if entries else 1
    if not entries:
        raise ConsoleError(
            f"no journal entries from opsbot for plan {plan_id}",
            hint="reading the journal needs root or group systemd-journal",
        )
    for e in entries:
        # A root-run service may log PLAN_ID= too; what it wrote is shown, never obeyed.
        details = " ".join(f"{k.lower()}={printable(v)}" for k, v in e.fields.items())
        out(
            f"{e.time.astimezone():%Y-%m-%d %H:%M:%S}  {printable(e.event):<18} {details}  "
            f"[{printable(e.source)}]"
        )
    if ignored:
        out(f"({ignored} entries naming this plan were ignored: not written by opsbot)")
    return 0
