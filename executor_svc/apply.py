"""Applying approved plans: the only place where a step runs.

For each stored plan, under the apply lock, plans.gate.decide says what may happen, and
this module does it (the one place it matches the decision for real; the dry run,
plans.preview, matches it once more and only says): an APPLYING plan left by a dead
apply becomes INTERRUPTED; an old plan, or one whose approval ran out, EXPIRED; a plan
today's policy refuses STALE; a refused approval is logged once and the plan keeps
waiting; so does an approved plan outside its apply window, its status saying when the
window opens (written when that changes, for ``opsbot show`` and ``opsbot plans``). A
plan that may run has its approval consumed, every step's ``expect`` re-checked against
live state (any mismatch: STALE, nothing runs), then its steps run in order, each recorded
before and after it runs. A plan without a valid approval never runs; no flag relaxes
that.
"""

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import assert_never

import structlog

from plans import (
    AwaitApproval,
    AwaitWindow,
    Expire,
    Interrupted,
    NotFinal,
    Outcome,
    PlanStore,
    Refuse,
    Run,
    Skip,
    Stale,
    StatusRecord,
    decide,
    mark_applied,
    precondition_mismatch,
    transition,
    window_wait,
)
from shared_io.errors import OpsbotError
from shared_io.run import RunResult, run
from shared_io.unit_show import UnitState, read_unit_state
from shared_schema import ExecutorPolicy, Plan, PlanState, StepRecord

__all__ = ["Applier"]

log = structlog.get_logger("opsbot.executor.apply")
#: How many more passes one run makes when approvals changed during the last one.
RESCANS = 3


def run_step(argv: list[str], timeout: float) -> RunResult:
    """One step: its argv, stdout and stderr together in the order they were written."""
    return run(argv, timeout=timeout, merge_stderr=True)


@dataclass
class Applier:
    store: PlanStore
    approvals_dir: Path
    policy: ExecutorPolicy
    actor: str
    now: Callable[[], datetime]
    read_state: Callable[[str], UnitState] = read_unit_state
    run_step: Callable[[list[str], float], RunResult] = run_step

    def apply_all(self) -> list[Outcome]:
        outcomes: dict[str, Outcome] = {}
        with self.store.apply_lock():
            # An approval written while this run goes on, for a plan it has already looked
            # at, would wait for the timer (opsbot-apply.path cannot start a unit that is
            # still running): look again while the approvals changed, a bounded few times.
            for _ in range(1 + RESCANS):
                before = self._approvals_mark()
                for plan_id in self.store.ids():
                    outcome = self._apply_logged(plan_id)
                    if outcome is not None:
                        outcomes[plan_id] = outcome
                if self._approvals_mark() == before:
                    break
        return list(outcomes.values())

    def _apply_logged(self, plan_id: str) -> Outcome | None:
        with structlog.contextvars.bound_contextvars(plan_id=plan_id):
            try:
                return self._apply_one(plan_id)
            except OpsbotError as exc:
                log.error("apply.error", error=exc.message)
                state = PlanState.PROPOSED  # unknown: it could not be read
                return Outcome(plan_id, state, exc.message, error=True)
            finally:
                # _apply_one binds this plan's sha256; it must not label the next.
                structlog.contextvars.unbind_contextvars("sha256")

    def _approvals_mark(self) -> tuple[int, tuple[str, ...]]:
        """What the approvals directory holds now (its mtime and names), to tell whether
        an approval came or went during a pass."""
        try:
            return os.stat(self.approvals_dir).st_mtime_ns, tuple(
                sorted(os.listdir(self.approvals_dir))
            )
        except OSError:
            return 0, ()

    # -- one plan -----------------------------------------------------------------------

    def _save(self, status: StatusRecord) -> StatusRecord:
        self.store.save_status(status)
        return status

    def _move(
        self, status: StatusRecord, new: PlanState, reason: str = "", **kw: object
    ) -> StatusRecord:
        # Out of APPROVED, a plan waits for no window any more.
        kw.setdefault("waits_for_window", None)
        moved = transition(status, new, by=self.actor, at=self.now(), reason=reason, **kw)
        self._save(moved)
        log.info(f"plan.{new.lower()}", state=str(new), reason=reason or None)
        return moved

    def _ended(
        self, status: StatusRecord, new: PlanState, reason: str, argv: list[list[str]]
    ) -> Outcome:
        done = self._move(status, new, reason)
        return Outcome(done.plan_id, done.state, done.reason, argv)

    def _refuse(self, status: StatusRecord, reason: str) -> Outcome:
        # Logged once per distinct reason, so a timer does not repeat it every minute.
        if status.refusal != reason or status.waits_for_window is not None:
            if status.refusal != reason:
                log.warning("approval.refused", reason=reason)
            self._save(status.model_copy(update={"refusal": reason, "waits_for_window": None}))
        return Outcome(status.plan_id, status.state, f"not run: {reason}")

    def _wait_for_window(self, status: StatusRecord, decision: AwaitWindow) -> Outcome:
        # Written (and logged) when it changes, so a timer does not repeat it.
        waits = window_wait(decision.window)
        if status.waits_for_window != waits:
            opens = waits.opens_at if waits else None
            log.info("plan.waiting", opens_at=opens.isoformat() if opens else None)
            self._save(status.model_copy(update={"waits_for_window": waits}))
        # APPROVED and not run, yet nothing refused: `opsbot apply` exits "waiting".
        return Outcome(status.plan_id, status.state, decision.reason, would="wait")

    def _interrupted(self, status: StatusRecord, reason: str) -> Outcome:
        steps = [
            s.model_copy(update={"outcome": "failed", "output": s.output + "\n[apply died]"})
            if s.outcome == "running"
            else s
            for s in status.steps
        ]
        done = self._move(status, PlanState.INTERRUPTED, reason, steps=steps)
        return Outcome(status.plan_id, done.state, done.reason)

    def _apply_one(self, plan_id: str) -> Outcome | None:
        record = self.store.load(plan_id)
        status = self.store.status(plan_id, record)
        structlog.contextvars.bind_contextvars(sha256=record.sha256)
        decision = decide(
            self.store,
            record,
            status,
            approvals_dir=self.approvals_dir,
            policy=self.policy,
            now=self.now(),
        )
        if isinstance(decision, Skip):
            return None
        return self._act(status, decision)

    def _act(self, status: StatusRecord, decision: NotFinal) -> Outcome:
        """What the apply does for each decision: the one place it matches them."""
        match decision:
            case Interrupted(reason=reason):
                return self._interrupted(status, reason)
            case Expire(reason=reason, argv=argv):
                return self._ended(status, PlanState.EXPIRED, reason, argv)
            case Stale(reason=reason, argv=argv):
                return self._ended(status, PlanState.STALE, reason, argv)
            case Refuse(reason=reason):
                return self._refuse(status, reason)
            case AwaitApproval(reason=reason):
                return Outcome(status.plan_id, status.state, reason)
            case AwaitWindow():
                return self._wait_for_window(status, decision)
            case Run():
                return self._run(status, decision)
            case _:
                assert_never(decision)

    def _run(self, status: StatusRecord, decision: Run) -> Outcome:
        checked = decision.approval
        if not self.store.consume(status.plan_id, checked.file_sha256, self.actor, self.now()):
            return self._refuse(status, "approval was already used by another apply")
        log.info(
            "approval.consumed",
            approver=checked.approval.approver or None,
            approved_by_rule=checked.approval.approved_by_rule or None,
        )
        mismatch = precondition_mismatch(decision.plan, self.read_state)
        if mismatch:
            return self._ended(status, PlanState.STALE, mismatch, decision.argv)
        return self._run_steps(decision.plan, status, decision.argv)

    def _run_steps(self, plan: Plan, status: StatusRecord, argv: list[list[str]]) -> Outcome:
        records = [
            StepRecord(index=i + 1, tool=step.tool, argv=argv[i], outcome="not-run")
            for i, step in enumerate(plan.steps)
        ]
        status = self._move(status, PlanState.APPLYING, steps=records)
        failed: str | None = None
        for i, step_argv in enumerate(argv):
            started = records[i].model_copy(update={"outcome": "running", "started_at": self.now()})
            records[i] = started
            status = self._save(status.model_copy(update={"steps": list(records)}))
            log.info("step.started", step=i + 1, argv=step_argv)
            result = self.run_step(step_argv, self.policy.step_timeout_seconds)
            outcome = "ok" if result.ok else ("timeout" if result.timed_out else "failed")
            records[i] = started.model_copy(
                update={
                    "outcome": outcome,
                    "finished_at": self.now(),
                    "exit_status": result.exit_status,
                    "output": result.output or result.error,
                }
            )
            status = self._save(status.model_copy(update={"steps": list(records)}))
            log.info(
                "step.finished",
                step=i + 1,
                argv=step_argv,
                exit_status=result.exit_status,
                outcome=outcome,
                output=result.output.strip()[:500] or None,
            )
            if not result.ok:
                said = " ".join((result.error or result.output).split())[:300]
                failed = f"step {i + 1} ({shlex.join(step_argv)}) {outcome}: {said}"
                if plan.stop_on_error:
                    break
        if failed:
            done = self._move(status, PlanState.FAILED, failed)
        else:
            # The marker after the transition: opsbot-verify.path starts the check on it,
            # and the check must find the plan APPLIED (a path unit does not watch while
            # the service it started runs, so a second marker could go unseen).
            ran = f"{len(argv)} step{'' if len(argv) == 1 else 's'} ran"
            done = self._move(status, PlanState.APPLIED, ran)
            mark_applied(self.store, done.plan_id)
        return Outcome(done.plan_id, done.state, done.reason, argv, ran=True)
