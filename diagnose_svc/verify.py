"""``opsbot-diagnose verify``: did an applied plan fix it? (what opsbot-verify.service runs)

A plan whose steps all ran is APPLIED; that says only that its steps exited 0. This asks
the executor for the plans awaiting verification, watches each plan's units (with
read_unit_status) and the health targets they serve (with http_get_health) from its last
step until ``settle_seconds`` after it, and reports each to the executor:

* VERIFIED: the symptom is gone and the fix holds. The health targets of the plan's
  symptom (those that failed when it was diagnosed) and those its units serve are
  probed at every look, and every answer of the last ``settle_seconds`` passed; at the
  end every unit is in the state its steps leave it in (the write tools' table says
  which: active, inactive after a stop, not failed after a reset; a oneshot job a start
  ran to a clean end, Result=success, counts as started), and no unit failed or was
  restarted by systemd meanwhile. A target that failed late in the window moves its end
  (a failed answer must be followed by ``settle_seconds`` of good ones), up to
  ``EXTENSION`` windows after the last step;
* UNRESOLVED: a unit failed again, systemd restarted it (NRestarts grew, or its main
  process began after the last step: it failed meanwhile), it never became active, or a
  target of the symptom still fails when the window can move no further; with what was
  seen, each target with its answers.

An UNRESOLVED plan may start one follow-up diagnosis of the unit that did not come back
(``[diagnose.verify] follow_up``: for watched units by default), told what was tried: it
cannot propose the same steps again (the runbook refuses to, and the executor refuses
such a plan within the restart budget's window).

It runs as the diagnose user: the read tools, loopback for health probes, and the two
verification messages of the executor socket; the apply unit has no network.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog

from diagnose_svc.actions import TriedPlan
from diagnose_svc.tools import (
    HealthArgs,
    HealthResult,
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutput,
    UnitArgs,
    UnitStatus,
)
from diagnose_svc.tools._systemctl import show
from shared_io.errors import UnitStateError
from shared_schema import AwaitingPlan, DiagnoseSettings, ReportVerification, write_tools
from shared_schema.executor_socket import SETTLE_WINDOWS_AT_MOST

log = structlog.get_logger("opsbot.verify")

#: Seconds between two looks at a plan's units while its window lasts.
SAMPLE_INTERVAL = 1.0
#: Slack between the end of a plan's last step and the time the executor records it:
#: a unit whose main process began later than this was not started by the plan.
STARTED_BY_PLAN = timedelta(seconds=0.5)
ONFAILURE = "opsbot-onfailure@"
#: How far a failing health answer may move a plan's window: this many windows after
#: the last step, the symptom is still there.
EXTENSION = SETTLE_WINDOWS_AT_MOST


def expected_states(plan: AwaitingPlan) -> dict[str, str]:
    """Each unit of the plan and the state its steps leave it in (the write tools' table
    says what each step leaves: shared_schema.write_tools)."""
    return dict(write_tools.expected_states([(s.tool, s.unit) for s in plan.steps]))


def ran_to_end(status: UnitStatus) -> bool:
    """A oneshot job (Type=oneshot, no RemainAfterExit=) that a start ran to a clean
    end: inactive, Result=success. A start that exits 0 ran it so; it has nothing left
    to stay up for (a later failed run shows as failed)."""
    return (
        status.service_type == "oneshot"
        and status.active_state == "inactive"
        and status.result == "success"
    )


@dataclass
class PlanWatch:
    """One plan's window: its units' first state seen, and what went wrong, if anything."""

    plan: AwaitingPlan
    deadline: datetime
    targets: list[str]
    #: The window cannot move past this (EXTENSION windows after the last step).
    cap: datetime | None = None
    settle: timedelta = timedelta(0)
    baseline: dict[str, UnitStatus] = field(default_factory=dict)
    #: Each health target's answers so far ("200", "503", "refused"...), in order.
    answers: dict[str, list[str]] = field(default_factory=dict)
    #: When each target last failed to answer as expected.
    failed_at: dict[str, datetime] = field(default_factory=dict)

    @property
    def last_failed(self) -> tuple[str, datetime] | None:
        """The target that failed last, and when."""
        if not self.failed_at:
            return None
        name = max(self.failed_at, key=lambda n: self.failed_at[n])
        return name, self.failed_at[name]

    evidence: list[str] = field(default_factory=list)
    result: str = ""  # "" while watching, then "verified" or "unresolved"
    failing_unit: str = ""
    finished_at: datetime | None = None

    def finish(self, result: str, at: datetime, unit: str = "") -> None:
        self.result, self.finished_at, self.failing_unit = result, at, unit

    def report(self) -> ReportVerification:
        end = self.finished_at or self.deadline
        return ReportVerification(
            plan_id=self.plan.plan_id,
            sha256=self.plan.sha256,
            result="verified" if self.result == "verified" else "unresolved",
            evidence=[e[:300] for e in self.evidence[:20]],
            seconds=round(max(0.0, (end - self.plan.applied_at).total_seconds()), 2),
            targets=list(self.plan.symptom.health) if self.plan.symptom else [],
        )


class Verifier:
    """Watches plans with the read tools; ``now`` and ``sleep`` are injected (tests)."""

    def __init__(
        self,
        settings: DiagnoseSettings,
        tools: Mapping[str, Tool],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.tools = tools
        self.context = ToolContext(settings=settings)
        self.now = now
        self.sleep = sleep

    def _read(self, tool: str, args: ToolArgs) -> ToolOutput | str:
        """One read tool's answer, or the operator's message of why it could not read."""
        return self.tools[tool].answer(args, self.context)

    def _status(self, unit: str) -> UnitStatus | str:
        out = self._read("read_unit_status", UnitArgs(unit=unit))
        assert isinstance(out, UnitStatus | str)
        return out

    def _health(self, target: str) -> HealthResult | str:
        out = self._read("http_get_health", HealthArgs(target=target))
        assert isinstance(out, HealthResult | str)
        return out

    def watch(self, plans: list[AwaitingPlan], settle_seconds: float) -> list[PlanWatch]:
        """Watch every plan until its window ends (or it fails); bounded by the windows."""
        watches = []
        settle = timedelta(seconds=settle_seconds)
        for plan in plans:
            watches.append(
                PlanWatch(
                    plan,
                    plan.applied_at + settle,
                    self.targets(plan),
                    cap=plan.applied_at + EXTENSION * settle,
                    settle=settle,
                )
            )
        while True:
            at = self.now()
            open_ = [w for w in watches if not w.result]
            for w in open_:
                self._sample(w, at)
            if all(w.result for w in watches):
                return watches
            self.sleep(SAMPLE_INTERVAL)

    def targets(self, plan: AwaitingPlan) -> list[str]:
        """The health targets a plan is judged by: its symptom's (those that failed when
        it was diagnosed) and those its units serve."""
        units = set(expected_states(plan))
        served = {n for n, t in self.settings.health.items() if t.unit in units}
        return sorted(served | set(plan.symptom.health if plan.symptom else ()))

    def _probe(self, w: PlanWatch, at: datetime) -> None:
        """One look at every target of the plan; a failed answer moves the window's end
        to ``settle`` after it (within the cap)."""
        for name in w.targets:
            result = self._health(name)
            if isinstance(result, str):
                answer, ok = "unreadable", False
            else:
                ok = result.outcome == "ok"
                answer = str(result.status) if result.status else result.outcome
            w.answers.setdefault(name, []).append(answer)
            if not ok:
                w.failed_at[name] = at
        if w.failed_at and w.cap is not None:
            w.deadline = min(max(w.deadline, max(w.failed_at.values()) + w.settle), w.cap)

    def _sample(self, w: PlanWatch, at: datetime) -> None:
        self._probe(w, at)
        final = at >= w.deadline
        for unit, wanted in expected_states(w.plan).items():
            status = self._status(unit)
            if isinstance(status, str):
                w.evidence.append(f"{unit}: its state could not be read: {status}")
                w.finish("unresolved", at, unit)
                return
            first = w.baseline.setdefault(unit, status)
            state = f"{status.active_state}/{status.sub_state}"
            if wanted == "active":
                if status.active_state == "failed":
                    w.evidence.append(
                        f"{unit} failed again {self._since(w, at)} after the last step "
                        f"({state}, Result={status.result}"
                        + (f", {status.main_exit()}" if status.main_exit() else "")
                        + ")"
                    )
                    w.finish("unresolved", at, unit)
                    return
                if status.n_restarts > first.n_restarts:
                    w.evidence.append(
                        f"systemd restarted {unit} {status.n_restarts - first.n_restarts} "
                        f"time(s) within {self._since(w, at)} of the last step: it keeps failing"
                    )
                    w.finish("unresolved", at, unit)
                    return
                began = status.exec_main_start_timestamp
                if began is not None and began > w.plan.applied_at + STARTED_BY_PLAN:
                    # The plan's steps were over by applied_at; a main process begun after
                    # that is systemd's restart of a unit that failed meanwhile (perhaps
                    # before the first look, which NRestarts alone would not show).
                    w.evidence.append(
                        f"{unit} was started again "
                        f"{(began - w.plan.applied_at).total_seconds():.1f} s after the "
                        f"last step (NRestarts={status.n_restarts}): it failed meanwhile"
                    )
                    w.finish("unresolved", at, unit)
                    return
                if final and status.active_state != "active" and not ran_to_end(status):
                    w.evidence.append(
                        f"{unit} is {state}, not active, {self._since(w, at)} after the last step"
                    )
                    w.finish("unresolved", at, unit)
                    return
            elif wanted == "inactive" and final and status.active_state not in ("inactive",):
                w.evidence.append(f"{unit} is {state}; its plan stopped it")
                w.finish("unresolved", at, unit)
                return
            elif wanted == "not-failed" and final and status.active_state == "failed":
                w.evidence.append(f"{unit} is {state} again")
                w.finish("unresolved", at, unit)
                return
            if final:
                w.evidence.append(
                    f"{unit} is {state} (NRestarts={status.n_restarts}, invocation "
                    f"{status.invocation_id[:12] or '-'}) {self._since(w, at)} after the last step"
                )
        if not final:
            return
        for name in w.targets:
            w.evidence.append(f"health target {name} answered {_runs(w.answers.get(name, []))}")
        last = w.last_failed
        if last is not None and at - last[1] < w.settle:
            name, when = last
            w.evidence.insert(
                0,
                f"the symptom is still there: health target {name} failed to answer as "
                f"expected {self._since(w, when)} after the last step "
                f"({w.answers[name][-1]}); no {w.settle.total_seconds():g} s of good "
                f"answers within {self._since(w, at)}",
            )
            # The follow-up diagnoses what the operator asked about, knowing what ran.
            target = self.settings.health.get(name)
            symptom = w.plan.symptom
            unit = symptom.unit if symptom else (target.unit if target else "") or ""
            w.finish("unresolved", at, unit)
            return
        w.finish("verified", at)

    @staticmethod
    def _since(w: PlanWatch, at: datetime) -> str:
        return f"{max(0.0, (at - w.plan.applied_at).total_seconds()):.1f} s"


def _runs(answers: list[str]) -> str:
    """``["503", "503", "200"]`` as "503 x2, then 200"."""
    parts: list[list[object]] = []
    for answer in answers:
        if parts and parts[-1][0] == answer:
            parts[-1][1] = int(str(parts[-1][1])) + 1
        else:
            parts.append([answer, 1])
    words = [f"{a}" + (f" x{n}" if int(str(n)) > 1 else "") for a, n in parts]
    return ", then ".join(words[-4:]) or "nothing"


def is_watched(unit: str) -> bool:
    """Whether ``opsbot watch`` watches ``unit`` (its OnFailure= names opsbot-onfailure@)."""
    try:
        [props] = show([unit], ("OnFailure",))
    except UnitStateError:
        return False
    return ONFAILURE in props.get("OnFailure", "")


def wants_follow_up(settings: DiagnoseSettings, unit: str) -> bool:
    mode = settings.verify.follow_up
    return mode == "always" or (mode == "watched" and bool(unit) and is_watched(unit))


def tried_plan(watch: PlanWatch) -> TriedPlan:
    symptom = watch.plan.symptom
    return TriedPlan(
        plan_id=watch.plan.plan_id,
        steps=tuple((s.tool, s.unit) for s in watch.plan.steps),
        evidence=tuple(watch.evidence[:3]),
        symptom=symptom.model_dump(mode="json") if symptom is not None else None,
    )
