"""``opsbot apply --dry-run``: what the next apply would do with each plan, judged with
every check the apply makes (plans.gate.decide, the approval used or not, each step's
precondition against the live state) and running nothing. Read-only: it takes no lock,
writes nothing, and runs as whoever asks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import assert_never

from plans.gate import (
    AwaitApproval,
    AwaitWindow,
    Expire,
    Interrupted,
    NotFinal,
    Refuse,
    Run,
    Skip,
    Stale,
    decide,
    precondition_mismatch,
)
from plans.outcomes import LiveStates, Outcome, preview_steps
from plans.store import PlanStore, utcnow
from shared_io.config import load_config
from shared_io.errors import OpsbotError
from shared_io.paths import Paths
from shared_io.unit_show import UnitState, read_unit_state
from shared_schema import ExecutorPolicy, PlanState

__all__ = ["dry_run", "preview_plans"]


def preview_plans(paths: Paths) -> list[Outcome]:
    """What the next apply would do with every open plan in ``paths.state_dir``."""
    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    return dry_run(store, paths.approvals_dir, config.executor, now=utcnow())


def dry_run(
    store: PlanStore,
    approvals_dir: Path,
    policy: ExecutorPolicy,
    *,
    now: datetime,
    read_state: Callable[[str], UnitState] = read_unit_state,
) -> list[Outcome]:
    """One outcome per plan that is not final, in id order (the apply's order)."""
    outcomes = (_one(store, approvals_dir, policy, now, read_state, p) for p in store.ids())
    return [o for o in outcomes if o is not None]


def _one(
    store: PlanStore,
    approvals_dir: Path,
    policy: ExecutorPolicy,
    now: datetime,
    read_state: Callable[[str], UnitState],
    plan_id: str,
) -> Outcome | None:
    try:
        record = store.load(plan_id)
        status = store.status(plan_id, record)
        decision = decide(
            store, record, status, approvals_dir=approvals_dir, policy=policy, now=now
        )
    except OpsbotError as exc:
        # Unreadable: an error, not a state it is in (reported as PROPOSED, flagged).
        return Outcome(plan_id, PlanState.PROPOSED, f"would not run: {exc.message}", error=True)
    if isinstance(decision, Skip):
        return None
    plan = None if isinstance(decision, Interrupted) else decision.plan
    argv = [] if isinstance(decision, Interrupted) else decision.argv
    live = LiveStates(read_state)
    preview = preview_steps(plan, argv, live) if plan else []

    def would(message: str, what: str = decision.kind) -> Outcome:
        return Outcome(plan_id, status.state, message, argv, preview=preview, would=what)

    return _said(decision, would, store.apply_running(), store.is_consumed(plan_id), live)


def _said(
    decision: NotFinal,
    would: Callable[..., Outcome],
    running: bool,
    consumed: bool,
    live: LiveStates,
) -> Outcome:
    """The dry run's words for each decision: the one place it matches them."""
    match decision:
        case Interrupted() if running:
            return would("is being applied now, by an apply that holds the lock", "running")
        case Interrupted(reason=reason):
            return would(f"would become INTERRUPTED: {reason}")
        case AwaitWindow(reason=reason):
            return would(f"would not run now: {reason}")
        case AwaitApproval():
            return would("would not run: not approved")
        case Expire(reason=reason):
            return would(f"would become EXPIRED: {reason}")
        case Stale(reason=reason):
            return would(f"would become STALE: {reason}")
        case Refuse(reason=reason):
            return would(f"would not run: {reason}")
        case Run() if consumed:
            return would("would not run: approval was already used by another apply", "refuse")
        case Run(plan=plan, argv=argv):
            # The apply's own check right before the steps, on the states the preview shows.
            mismatch = precondition_mismatch(plan, live.read)
            if mismatch:
                return would(f"would become STALE: {mismatch}", "stale")
            steps = f"{len(argv)} step{'' if len(argv) == 1 else 's'}"
            return would(f"would run {steps} (dry run: nothing was run)")
        case _:
            assert_never(decision)
