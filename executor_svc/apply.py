"""Applying approved plans: the only place where a step runs.

For each plan, under the apply lock: an APPLYING plan left by a dead apply becomes
INTERRUPTED; an old plan EXPIRED; an APPROVED plan is checked (stored bytes against its
fingerprint, the approval file, today's policy), its approval consumed, every step's
``expect`` re-checked against live state (any mismatch: STALE, nothing runs), then its
steps run in order, each recorded before and after it runs. A plan without a valid
approval never runs; no flag relaxes that (``dry_run`` runs nothing at all).
"""

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import structlog

from executor_svc.approvals import check_approval
from executor_svc.errors import ApprovalRefused, ExecutorError, TamperedPlan
from executor_svc.policy import policy_errors, step_argv
from executor_svc.records import PlanRecord, StatusRecord
from executor_svc.run import RunResult, run
from executor_svc.states import transition
from executor_svc.store import PlanStore
from executor_svc.unit_state import UnitState, UnitStateError, expectation_mismatch, read_unit_state
from shared_schema import ExecutorPolicy, Plan, PlanState, StepRecord

log = structlog.get_logger("opsbot.executor.apply")


@dataclass(frozen=True)
class Outcome:
    """What one apply did (or would do) with one plan."""

    plan_id: str
    state: PlanState
    message: str
    argv: list[list[str]] = field(default_factory=list)
    ran: bool = False


@dataclass
class Applier:
    store: PlanStore
    approvals_dir: Path
    policy: ExecutorPolicy
    actor: str
    now: Callable[[], datetime]
    read_state: Callable[[str], UnitState] = read_unit_state
    run_step: Callable[[list[str], float], RunResult] = field(
        default=lambda argv, timeout: run(argv, timeout=timeout)
    )

    def apply_all(self, *, dry_run: bool = False) -> list[Outcome]:
        if dry_run:
            return [o for o in (self._dry_run(pid) for pid in self.store.ids()) if o]
        outcomes: list[Outcome] = []
        with self.store.apply_lock():
            for plan_id in self.store.ids():
                with structlog.contextvars.bound_contextvars(plan_id=plan_id):
                    try:
                        outcome = self._apply_one(plan_id)
                    except ExecutorError as exc:
                        log.error("apply.error", error=exc.message)
                        outcome = Outcome(plan_id, PlanState.PROPOSED, exc.message)
                    finally:
                        # _apply_one binds this plan's sha256; it must not label the next.
                        structlog.contextvars.unbind_contextvars("sha256")
                if outcome is not None:
                    outcomes.append(outcome)
        return outcomes

    # -- one plan -----------------------------------------------------------------------

    def _save(self, status: StatusRecord) -> StatusRecord:
        self.store.save_status(status)
        return status

    def _move(
        self, status: StatusRecord, new: PlanState, reason: str = "", **kw: object
    ) -> StatusRecord:
        moved = transition(status, new, by=self.actor, at=self.now(), reason=reason, **kw)
        self._save(moved)
        log.info(f"plan.{new.lower()}", state=str(new), reason=reason or None)
        return moved

    def _refuse(self, status: StatusRecord, reason: str) -> Outcome:
        # Logged once per distinct reason, so a timer does not repeat it every minute.
        if status.refusal != reason:
            log.warning("approval.refused", reason=reason)
            self._save(status.model_copy(update={"refusal": reason}))
        return Outcome(status.plan_id, status.state, f"not run: {reason}")

    def _apply_one(self, plan_id: str) -> Outcome | None:
        record = self.store.load(plan_id)
        status = self.store.status(plan_id, record)
        structlog.contextvars.bind_contextvars(sha256=record.sha256)
        if status.state is PlanState.APPLYING:
            steps = [
                s.model_copy(update={"outcome": "failed", "output": s.output + "\n[apply died]"})
                if s.outcome == "running"
                else s
                for s in status.steps
            ]
            done = self._move(
                status,
                PlanState.INTERRUPTED,
                "an earlier apply stopped half-way; it is never resumed: diagnose again",
                steps=steps,
            )
            return Outcome(plan_id, done.state, done.reason)
        if status.state.is_final:
            return None
        if self.now() - record.submitted_at > timedelta(seconds=self.policy.plan_ttl_seconds):
            done = self._move(
                status,
                PlanState.EXPIRED,
                f"older than plan_ttl_seconds={self.policy.plan_ttl_seconds}",
            )
            return Outcome(plan_id, done.state, done.reason)
        if status.state is PlanState.PROPOSED:
            return Outcome(plan_id, status.state, "waiting for approval")
        return self._apply_approved(record, status)

    def _apply_approved(self, record: PlanRecord, status: StatusRecord) -> Outcome:
        plan_id = record.plan_id
        try:
            plan = self.store.verified_plan(record)
            checked = check_approval(self.approvals_dir, record, self.store, self.now())
        except TamperedPlan as exc:
            return self._refuse(status, exc.message)
        except ApprovalRefused as exc:
            if exc.message.startswith("approval expired"):
                done = self._move(status, PlanState.EXPIRED, exc.message)
                return Outcome(plan_id, done.state, done.reason)
            return self._refuse(status, exc.message)
        argv = step_argv(plan)
        errors = policy_errors(plan, self.policy)
        if errors:
            reason = "today's policy refuses it: " + "; ".join(str(e) for e in errors)
            done = self._move(status, PlanState.STALE, reason)
            return Outcome(plan_id, done.state, reason, argv)
        if not self.store.consume(plan_id, checked.file_sha256, self.actor, self.now()):
            return self._refuse(status, "approval was already used by another apply")
        log.info("approval.consumed", approver=checked.approval.approver)
        mismatch = self._precondition_mismatch(plan)
        if mismatch:
            done = self._move(status, PlanState.STALE, mismatch)
            return Outcome(plan_id, done.state, mismatch, argv)
        return self._run_steps(plan, status, argv)

    def _precondition_mismatch(self, plan: Plan) -> str | None:
        for index, step in enumerate(plan.steps):
            if step.expect is None:
                continue
            try:
                state = self.read_state(step.args.unit)
            except UnitStateError as exc:
                return f"step {index + 1}: {exc.message}"
            mismatch = expectation_mismatch(step.expect, state)
            if mismatch:
                return f"step {index + 1}: {mismatch}"
        return None

    def _run_steps(self, plan: Plan, status: StatusRecord, argv: list[list[str]]) -> Outcome:
        records = [
            StepRecord(index=i + 1, tool=step.tool, argv=argv[i], outcome="not-run")
            for i, step in enumerate(plan.steps)
        ]
        status = self._move(status, PlanState.APPLYING, steps=records)
        failed: str | None = None
        for i, step_argv_ in enumerate(argv):
            started = records[i].model_copy(update={"outcome": "running", "started_at": self.now()})
            records[i] = started
            status = self._save(status.model_copy(update={"steps": list(records)}))
            log.info("step.started", step=i + 1, argv=step_argv_)
            result = self.run_step(step_argv_, self.policy.step_timeout_seconds)
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
                argv=step_argv_,
                exit_status=result.exit_status,
                outcome=outcome,
                output=result.output.strip()[:500] or None,
            )
            if not result.ok:
                failed = (
                    f"step {i + 1} ({shlex.join(step_argv_)}) {outcome}: "
                    f"{(result.error or result.output).strip()[:300]}"
                )
                if plan.stop_on_error:
                    break
        if failed:
            done = self._move(status, PlanState.FAILED, failed)
        else:
            done = self._move(status, PlanState.APPLIED, f"{len(argv)} step(s) ran")
        return Outcome(done.plan_id, done.state, done.reason, argv, ran=True)

    # -- dry run ------------------------------------------------------------------------

    def _dry_run(self, plan_id: str) -> Outcome | None:
        try:
            record = self.store.load(plan_id)
            status = self.store.status(plan_id, record)
            if status.state.is_final:
                return None
            plan = self.store.verified_plan(record)
            argv = step_argv(plan)
            ttl = self.policy.plan_ttl_seconds
            if self.now() - record.submitted_at > timedelta(seconds=ttl):
                return Outcome(
                    plan_id, status.state, f"would not run: older than plan_ttl_seconds={ttl}", argv
                )
            if status.state is not PlanState.APPROVED:
                return Outcome(plan_id, status.state, "would not run: not approved", argv)
            check_approval(self.approvals_dir, record, self.store, self.now())
        except ExecutorError as exc:
            return Outcome(plan_id, PlanState.PROPOSED, f"would not run: {exc.message}")
        errors = policy_errors(plan, self.policy)
        if errors:
            return Outcome(
                plan_id, status.state, "would not run: " + "; ".join(str(e) for e in errors), argv
            )
        return Outcome(plan_id, status.state, "would run (dry run: nothing was run)", argv)
