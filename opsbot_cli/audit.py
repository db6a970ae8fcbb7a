"""``opsbot audit ID``: the plan's story from the journal, trusted entries only."""

from __future__ import annotations

import argparse

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, fit, json_out, plan_id_arg, printable, when
from opsbot_cli.screen import show
from opsbot_cli.story import read_story
from shared_io.paths import Paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "audit", "tell a plan's story from the journal (trusted entries only)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--json", action="store_true", help="the trusted entries, whole")
    p.add_argument("-v", "--verbose", action="store_true", help="every field whole (sha256s, argv)")
    p.add_argument(
        "--no-pager", action="store_true", help="print, never through a pager (as journalctl)"
    )
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
    lines: list[str] = []
    for e in entries:
        # A root-run service may log PLAN_ID= too; what it wrote is shown, never obeyed.
        lines.append(f"{when(e.time)}  {printable(e.event):<18} [{printable(e.source)}]")
        details = " ".join(
            f"{k.lower()}={_short(k, printable(v), args.verbose)}" for k, v in e.fields.items()
        )
        lines += fit(details, "    ", lines=3, verbose=args.verbose)
    if ignored:
        lines.append(f"({ignored} entries naming this plan were ignored: not written by opsbot)")
    show(lines, no_pager=args.no_pager)  # a long story pages on a terminal, as journalctl's
    return 0


def _short(key: str, value: str, verbose: bool) -> str:
    """A sha256 as its first 16 digits unless ``verbose`` (``--json`` has them whole)."""
    if not verbose and key.endswith("SHA256") and len(value) == 64:
        return value[:16] + "..."
    return value
