"""``opsbot archive-approvals`` (root): move the approvals an apply has used out of the
directory the apply reads, into ``/var/lib/opsbot-approvals/used/`` (root's, 0700).

opsbot-archive.service runs it, started by opsbot-archive.path whenever the executor's
consumed markers (``/var/lib/opsbot/consumed``) change, and by opsbot-archive.timer to
catch up. An approval counts as used when its consumed marker exists or when the apply
logged ``approval.consumed`` for it (plans/witness.py): the executor's uid
may delete the marker, not the journal entry. Once moved, a replay needs root: the
executor's uid can rewrite its status and markers, never bring the file back.

It also moves an ``opsbot approve --now`` approval that expired, once the apply has ended
its plan (EXPIRED: plans.grants.ended_by_expiry): no apply can use it any more.

When it moved an approval that may be an ``--now`` one (the only kind root writes a grant
for), it starts opsbot-polkit-rule.service, which first removes the polkit grant
(plans/grants.py) whose approval no longer holds: this unit has no capability to write
polkit's directory (polkitd's, 0700), that one has. Moving only plain approvals starts no
such run (a root process that writes the whole rule again: opsbot-polkit-rule.timer's
daily run still sweeps whatever is left).
So a ``--now`` grant's file goes within a minute or two of its approval's use or expiry
(polkit stops honouring it at the expiry itself); a reject removes it at once.

It runs inside opsbot-apply.service's stop (ExecStopPost= waits for it), after every apply
that found an approval: it loads no model where no approval may be an ``--now`` one
(plans.approval_archive reads the consumed markers and the files' own JSON), and the plan
store, the approval model and the grants' checks only for those that may be.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from opsbot_cli.output import command, json_out, out, require_root
from plans import witness
from plans.approval_archive import archive_used, is_consumed, maybe_now, used_dir
from plans.names import POLKIT_RULE_UNIT
from shared_io.paths import Paths
from shared_io.run import run as run_program


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
    uids = witness.executor_uids()
    synced = False

    def is_used(plan_id: str) -> bool:
        nonlocal synced
        if is_consumed(paths.state_dir, plan_id):
            return True
        if not synced:  # an apply that just logged it: make sure journald wrote it
            witness.sync_journal()
            synced = True
        return witness.consumed(plan_id, uids=uids)

    now, expired, nows = datetime.now(UTC), set[str](), set[str]()

    def is_done(plan_id: str) -> bool:
        if not maybe_now(paths.approvals_dir, plan_id):
            return is_used(plan_id)  # neither rule below holds of it: no model to build
        nows.add(plan_id)
        from plans.grants import ended_by_expiry, still_applying
        from plans.store import PlanStore

        store = PlanStore(paths.state_dir)
        if ended_by_expiry(paths.approvals_dir, store, plan_id, now):
            expired.add(plan_id)
            return True
        # An --now approval stays while its plan's steps run: its grant with it.
        return is_used(plan_id) and not still_applying(paths.approvals_dir, store, plan_id)

    moved = archive_used(paths.approvals_dir, is_done)
    if moved:
        # structlog is loaded (and configured) only to say what moved: a run that moved
        # nothing (the apply's ExecStopPost= after its approval was archived) pays nothing.
        from shared_io.log import get_logger

        log = get_logger("opsbot.archive", "opsbot")
        if nows.intersection(moved):  # a grant may stand on one of them: sweep it now
            argv = ["systemctl", "start", "--no-block", POLKIT_RULE_UNIT]
            started = run_program(argv, timeout=30)
            if not started.ok:
                log.warning("grant.sweep_failed", unit=POLKIT_RULE_UNIT, error=started.failure())
        for plan_id in moved:
            log.info("approval.archived", plan_id=plan_id, to=str(used_dir(paths.approvals_dir)))
            if not args.json:
                how = "expired (--now)" if plan_id in expired else "used"
                out(f"{plan_id}  approval {how}: moved to {used_dir(paths.approvals_dir)}")
    if args.json:
        json_out({"moved": moved, "to": str(used_dir(paths.approvals_dir))})
    return 0
