"""Applying approved plans: the only place where a step runs.

For each stored plan, under the apply lock, :func:`executor_svc.gate.decide` says what
may happen; then: an APPLYING plan left by a dead apply becomes INTERRUPTED; an old plan,
or one whose approval ran out, EXPIRED; a plan today's policy refuses STALE; a refused
approval is logged once and the plan keeps waiting; so does an approved plan outside its
apply window, its status saying when the window opens (written when that changes, for
``opsbot show`` and ``opsbot plans``). A plan that may run has its approval
consumed, every step's ``expect`` re-checked against live state (any mismatch: STALE,
nothing runs), then its steps run in order, each recorded before and after it runs. A
plan without a valid approval never runs; no flag relaxes that (``dry_run`` makes the
same decisions and runs nothing at all).
"""

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog

from executor_svc.errors import ExecutorError
from executor_svc.gate import Decision, decide, precondition_mismatch, window_wait
from executor_svc.records import StatusRecord
from executor_svc.states import transition
from executor_svc.store import PlanStore
from executor_svc.unit_state import (
    Check,
    UnitState,
    UnitStateError,
    precondition_checks,
    read_unit_state,
)
from executor_svc.verification import mark_applied
from shared_io.run import RunResult, run
from shared_schema import ExecutorPolicy, Plan, PlanState, StepRecord
from shared_schema.write_tools import WRITE_TOOLS_BY_NAME

log = structlog.get_logger("opsbot.executor.apply")
#: How many more passes one run makes when approvals changed during the last one.
RESCANS = 3


@dataclass(frozen=True)
class StepPreview:
    """What a dry run says of one step: the argv, each precondition against the live state
    in words, and what the step does."""

    argv: list[str]
    checks: list[Check]
    does: str


@dataclass(frozen=True)
class Outcome:
    """What one apply did (or would do) with one plan."""

    plan_id: str
    state: PlanState
    message: str
    argv: list[list[str]] = field(default_factory=list)
    ran: bool = False
    #: Dry run: each step's preview, and what the apply would do (a Decision's action,
    #: or "running": an apply holds the lock now). A real apply sets ``would`` only to
    #: "wait", for an approved plan left waiting for its apply window.
    preview: list[StepPreview] = field(default_factory=list)
    would: str = ""
    #: The plan could not be read or judged (an error, not a state it is in).
    error: bool = False


class LiveStates:
    """Each unit's live state read once, for the preview and the verdict alike: what the
    dry run shows is what it judged (a read that failed is its message)."""

    def __init__(self, read_state: Callable[[str], UnitState]) -> None:
        self._read = read_state
        self._seen: dict[str, UnitState | str] = {}

    def get(self, unit: str) -> UnitState | str:
        if unit not in self._seen:
            try:
                self._seen[unit] = self._read(unit)
            except UnitStateError as exc:
                self._seen[unit] = exc.message
        return self._seen[unit]

    def read(self, unit: str) -> UnitState:
        """As ``read_state``: the state, or UnitStateError again."""
        state = self.get(unit)
        if isinstance(state, str):
            raise UnitStateError(state)
        return state


def preview_steps(plan: Plan, argv: list[list[str]], live: LiveStates) -> list[StepPreview]:
    """Each step of ``plan`` with its preconditions checked against live state now, in
    the words ``opsbot apply --dry-run`` prints."""
    previews: list[StepPreview] = []
    for step, step_argv_ in zip(plan.steps, argv, strict=True):
        unit = step.args.unit
        tool = WRITE_TOOLS_BY_NAME.get(step.tool)
        does = f"{tool.verb} {unit}: {tool.summary}" if tool else f"{step.tool} {unit}"
        checks: list[Check] = []
        if step.expect is not None:
            state = live.get(unit)
            if isinstance(state, str):
                checks.append(Check(state, False))
            else:
                checks = precondition_checks(step.expect, state)
        previews.append(StepPreview(step_argv_, checks, does))
    return previews


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

    def apply_all(self, *, dry_run: bool = False) -> list[Outcome]:
        if dry_run:
            return [o for o in (self._dry_run(pid) for pid in self.store.ids()) if o]
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
            except ExecutorError as exc:
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

    def _decide(self, plan_id: str) -> tuple[StatusRecord, Decision]:
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
        return status, decision

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

    def _ended(self, status: StatusRecord, new: PlanState, decision: Decision) -> Outcome:
        done = self._move(status, new, decision.reason)
        return Outcome(done.plan_id, done.state, done.reason, decision.argv)

    def _refuse(self, status: StatusRecord, reason: str) -> Outcome:
        # Logged once per distinct reason, so a timer does not repeat it every minute.
        if status.refusal != reason or status.waits_for_window is not None:
            if status.refusal != reason:
                log.warning("approval.refused", reason=reason)
            self._save(status.model_copy(update={"refusal": reason, "waits_for_window": None}))
        return Outcome(status.plan_id, status.state, f"not run: {reason}")

    def _wait(self, status: StatusRecord, decision: Decision) -> Outcome:
        if decision.window is not None:
            # Written (and logged) when it changes, so a timer does not repeat it.
            waits = window_wait(decision.window)
            if status.waits_for_window != waits:
                opens = waits.opens_at if waits else None
                log.info("plan.waiting", opens_at=opens.isoformat() if opens else None)
                self._save(status.model_copy(update={"waits_for_window": waits}))
            # APPROVED and not run, yet nothing refused: `opsbot apply` exits "waiting".
            return Outcome(status.plan_id, status.state, decision.reason, would="wait")
        return Outcome(status.plan_id, status.state, decision.reason)

    def _apply_one(self, plan_id: str) -> Outcome | None:
        status, decision = self._decide(plan_id)
        if decision.action == "skip":
            return None
        if decision.action == "interrupt":
            steps = [
                s.model_copy(update={"outcome": "failed", "output": s.output + "\n[apply died]"})
                if s.outcome == "running"
                else s
                for s in status.steps
            ]
            done = self._move(status, PlanState.INTERRUPTED, decision.reason, steps=steps)
            return Outcome(plan_id, done.state, done.reason)
        if decision.action == "expire":
            return self._ended(status, PlanState.EXPIRED, decision)
        if decision.action == "wait":
            return self._wait(status, decision)
        if decision.action == "refuse":
            return self._refuse(status, decision.reason)
        if decision.action == "stale":
            return self._ended(status, PlanState.STALE, decision)
        assert decision.plan is not None and decision.approval is not None
        checked = decision.approval
        if not self.store.consume(plan_id, checked.file_sha256, self.actor, self.now()):
            return self._refuse(status, "approval was already used by another apply")
        log.info("approval.consumed", approver=checked.approval.approver)
        mismatch = precondition_mismatch(decision.plan, self.read_state)
        if mismatch:
            done = self._move(status, PlanState.STALE, mismatch)
            return Outcome(plan_id, done.state, mismatch, decision.argv)
        return self._run_steps(decision.plan, status, decision.argv)

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
                said = " ".join((result.error or result.output).split())[:300]
                failed = f"step {i + 1} ({shlex.join(step_argv_)}) {outcome}: {said}"
                if plan.stop_on_error:
                    break
        if failed:
            done = self._move(status, PlanState.FAILED, failed)
        else:
            # The marker after the transition: opsbot-verify.path starts the check on it,
            # and the check must find the plan APPLIED (a path unit does not watch while
            # the service it started runs, so a second marker could go unseen).
            done = self._move(status, PlanState.APPLIED, f"{len(argv)} step(s) ran")
            mark_applied(self.store, done.plan_id)
        return Outcome(done.plan_id, done.state, done.reason, argv, ran=True)

    # -- dry run ------------------------------------------------------------------------

    def _dry_run(self, plan_id: str) -> Outcome | None:
        try:
            status, decision = self._decide(plan_id)
        except ExecutorError as exc:
            state = PlanState.PROPOSED
            return Outcome(plan_id, state, f"would not run: {exc.message}", error=True)
        finally:
            structlog.contextvars.unbind_contextvars("sha256")
        state, argv, action = status.state, decision.argv, str(decision.action)
        if decision.action == "skip":
            return None
        live = LiveStates(self.read_state)
        preview = preview_steps(decision.plan, argv, live) if decision.plan else []

        def would(message: str, what: str = action) -> Outcome:
            return Outcome(plan_id, state, message, argv, preview=preview, would=what)

        if decision.action == "interrupt" and self.store.apply_running():
            return would("is being applied now, by an apply that holds the lock", "running")
        if decision.action == "wait" and decision.window is not None:
            return would(f"would not run now: {decision.reason}")
        if decision.action == "wait":
            return would("would not run: not approved")
        if decision.action == "interrupt":
            return would(f"would become INTERRUPTED: {decision.reason}")
        if decision.action == "expire":
            return would(f"would become EXPIRED: {decision.reason}")
        if decision.action == "stale":
            return would(f"would become STALE: {decision.reason}")
        if decision.action == "refuse":
            return would(f"would not run: {decision.reason}")
        if self.store.is_consumed(plan_id):
            return would("would not run: approval was already used by another apply", "refuse")
        # The apply's own check right before the steps, on the states the preview shows.
        assert decision.plan is not None
        mismatch = precondition_mismatch(decision.plan, live.read)
        if mismatch:
            return would(f"would become STALE: {mismatch}", "stale")
        return would(f"would run {len(argv)} step(s) (dry run: nothing was run)")
