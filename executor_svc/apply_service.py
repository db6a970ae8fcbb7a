"""``opsbot-apply``: what opsbot-apply.service runs when its timer fires, an approval
appears (opsbot-apply.path) or root runs ``opsbot apply`` (which starts this unit, so that
steps always run as the executor's user, in its sandbox, held by polkit). It applies
every approved plan once, expires old ones, and prints one line per plan it looked at;
the journal keeps each step's story, and one ``apply.outcomes`` entry per run holds what
it did to each plan (``opsbot apply`` prints it).

Exit status: 0 when no step failed, 1 when one did, the error's own status (78 for a bad
config, 74 for a state directory that cannot be written) when nothing could be applied
(then an ``apply.failed`` entry says why).
"""

import argparse
import json
import os
import pwd
import sys
from datetime import timedelta
from pathlib import Path

import structlog

from executor_svc.apply import Applier
from plans import Outcome, PlanStore, failed, outcome_json, utcnow
from plans.verification import VERIFY_HORIZON, sweep_unmarked
from shared_io import log as logsetup
from shared_io.config import load_config
from shared_io.errors import OpsbotError
from shared_io.paths import Paths
from shared_io.startup import imports_done
from shared_schema.text import printable

log = structlog.get_logger("opsbot.apply")


def apply_plans(paths: Paths, *, actor: str) -> list[Outcome]:
    """Apply every approved plan in ``paths.state_dir`` once."""
    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    store.ensure()
    applier = Applier(store, paths.approvals_dir, config.executor, actor=actor, now=utcnow)
    seen = _approvals(paths.approvals_dir)
    outcomes = applier.apply_all()
    for _ in range(MAX_ROUNDS - 1):
        # An approval written while this run went on starts no second run (systemd merges
        # the path unit's start into this one): it is applied now, not by the timer.
        now_there = _approvals(paths.approvals_dir)
        if now_there <= seen:
            break
        seen |= now_there
        again = {o.plan_id: o for o in [*outcomes, *applier.apply_all()]}  # the last word
        outcomes = list(again.values())
    now = utcnow()
    # An apply killed between APPLIED and its marker: the plan is marked here, at the
    # next run (the timer's, within a minute), so it is still verified.
    submitted_since = now - timedelta(seconds=config.executor.plan_ttl_seconds) - VERIFY_HORIZON
    for plan_id in sweep_unmarked(store, now, submitted_since):
        log.warning("plan.marked_again", plan_id=plan_id, reason="APPLIED without its marker")
    retire(store, config.executor.retention_days)
    return outcomes


#: Runs of the store per start at most (approvals that keep coming wait for the next).
MAX_ROUNDS = 5


def _approvals(approvals_dir: Path) -> set[tuple[str, int]]:
    """The approval files there now, each with its mtime (a renewed one is new)."""
    try:
        with os.scandir(approvals_dir) as entries:
            return {
                (e.name, e.stat(follow_symlinks=False).st_mtime_ns)
                for e in entries
                if e.name.endswith(".approval")
            }
    except OSError:
        return set()


def retire(store: PlanStore, retention_days: int) -> None:
    """Move the plans older than the retention out of the live store (plans/store.py),
    each said in the journal, which keeps their story."""
    before = utcnow() - timedelta(days=retention_days)
    for plan_id in store.retire(before):
        log.info("plan.archived", plan_id=plan_id, retention_days=retention_days)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-apply",
        description="Apply every approved plan once (what opsbot-apply.service runs).",
    )
    parser.add_argument("--verbose", action="store_true", help="log debug events")
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    args = parser.parse_args(argv)
    if argv is None:  # the program itself (opsbot-apply.service), not a test
        imports_done()
    logsetup.configure("opsbot-apply", verbose=args.verbose)
    try:
        outcomes = apply_plans(Paths.from_env(), actor=pwd.getpwuid(os.getuid()).pw_name)
    except OpsbotError as exc:
        log.error("apply.failed", error=exc.message, hint=exc.hint, exit_status=exc.exit_status)
        print(f"opsbot-apply: {exc.message}", file=sys.stderr)
        return exc.exit_status
    # No PLAN_ID field: this is the run's summary, not a line of each plan's story.
    log.info(
        "apply.outcomes",
        plans=len(outcomes),
        failed=failed(outcomes),
        outcomes=json.dumps([outcome_json(o) for o in outcomes], sort_keys=True),
    )
    if args.json:
        print(json.dumps([outcome_json(o) for o in outcomes], indent=2, sort_keys=True))
    else:
        for o in outcomes:
            print(f"{o.plan_id}  {o.state:<11} {printable(o.message)}")
    return 1 if failed(outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
