"""``opsbot archive-approvals`` (root): move the approvals an apply has used out of the
directory the apply reads, into ``/var/lib/opsbot-approvals/used/`` (root's, 0700).

opsbot-archive.service runs it, started by opsbot-archive.path whenever the executor's
consumed markers (``/var/lib/opsbot/consumed``) change, and by opsbot-archive.timer to
catch up. An approval counts as used when its consumed marker exists or when the apply
logged ``approval.consumed`` for it (plans/witness.py): the executor's uid
may delete the marker, not the journal entry. Once moved, a replay needs root: the
executor's uid can rewrite its status and markers, never bring the file back.

When it moved an approval, it starts opsbot-polkit-rule.service, which removes the polkit
grant of ``opsbot approve --now`` (plans/polkit.py) whose approval is no longer waiting:
this unit has no capability to write polkit's directory (polkitd's, 0700), that one has.
"""

from __future__ import annotations

import argparse

import structlog

from opsbot_cli.output import command, json_out, out, require_root
from plans import PlanStore, archive_used, used_dir, witness
from plans.polkit import RULE_UNIT
from shared_io.paths import Paths
from shared_io.run import run as run_program

log = structlog.get_logger("opsbot.archive")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub,
        "archive-approvals",
        "(root) move used approvals where no apply reads them (opsbot-archive.service)",
    )
    p.add_argument("--json", action="store_true", help="the ids whose approvals moved")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    require_root("archive-approvals")
    store = PlanStore(paths.state_dir)
    uids = witness.executor_uids()
    synced = False

    def is_used(plan_id: str) -> bool:
        nonlocal synced
        if store.is_consumed(plan_id):
            return True
        if not synced:  # an apply that just logged it: make sure journald wrote it
            witness.sync_journal()
            synced = True
        return witness.consumed(plan_id, uids=uids)

    moved = archive_used(paths.approvals_dir, is_used)
    if moved:
        started = run_program(["systemctl", "start", "--no-block", RULE_UNIT], timeout=30)
        if not started.ok:
            log.warning("grant.sweep_failed", unit=RULE_UNIT, error=started.failure())
    for plan_id in moved:
        log.info("approval.archived", plan_id=plan_id, to=str(used_dir(paths.approvals_dir)))
        if not args.json:
            out(f"{plan_id}  approval used: moved to {used_dir(paths.approvals_dir)}")
    if args.json:
        json_out({"moved": moved, "to": str(used_dir(paths.approvals_dir))})
    return 0
