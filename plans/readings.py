"""What root's side reads of a plan's units before a standing rule may approve it: never
the plan's own words.

A plan says what diagnosis saw (its symptom, its cause, each step's precondition); all of
it is the proposer's, and a subverted diagnosis can write any of it. A rule acts only on
what root reads itself, when it is asked:

- each step's unit as systemd says now (the one ``systemctl show`` reader): its
  ActiveState, SubState and Result=;
- for a unit that runs (active, reloading), the health targets root's config says it serves
  (``[diagnose.health.<name>] unit = ...``), probed by root now (shared_io.health).

Each step's precondition must hold against the same reading: a plan whose step would go
STALE at once is not a rule's to approve (it would spend the unit's budget on nothing).

A unit **shows a failure** when systemd says it failed (``failed``; or stopped or
starting again after a Result= other than ``success``; or waiting to restart), or when one
of its own health targets answers wrong, not in time or refuses the connection as root
probes it. A target root could not reach (no route, a filter) shows nothing. A unit that
runs and has no health target of its own shows no failure root can see: a fix of it waits
for a human.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shared_io import health
from shared_io.errors import UnitStateError
from shared_io.unit_show import UnitProperties, UnitState, show
from shared_schema import HealthTarget

__all__ = ["ProbesSpent", "Reading", "RunProbes", "TargetReading", "UnitReading", "read_units"]

#: What is read of each unit.
PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "InvocationID")
#: Health targets probed per unit at most (each within its own timeout).
MAX_TARGETS = 4
#: Seconds one run of the rules may spend probing (root's approver holds its lock
#: meanwhile): past them, the plans left are asked about in the next run.
PROBE_BUDGET_SECONDS = 10.0
#: The states of a unit that runs: only its health targets say something of it.
RUNNING = frozenset({"active", "reloading"})
#: Seconds ``systemctl show`` may take here.
SHOW_TIMEOUT = 10.0

Show = Callable[[Sequence[str], Sequence[str]], list[UnitProperties]]
Prober = Callable[[HealthTarget], health.Probe]


@dataclass(frozen=True)
class TargetReading:
    """One of a unit's health targets as root probed it."""

    name: str
    outcome: str
    error: str = ""

    @property
    def failing(self) -> bool:
        return self.outcome in health.FAILING

    def words(self) -> str:
        said = f" ({self.error})" if self.error and not self.failing else ""
        return f"health target {self.name}: {self.outcome}{said}"


@dataclass(frozen=True)
class UnitReading:
    """A unit as root read it: systemd's states and Result=, and its own health targets
    (probed only when it runs); ``error`` where systemd could not say."""

    unit: str
    active_state: str = ""
    sub_state: str = ""
    result: str = ""
    invocation_id: str = ""
    targets: tuple[TargetReading, ...] = ()
    error: str = ""

    def state(self) -> UnitState:
        """The unit's state as the executor's precondition check reads it."""
        return UnitState(self.unit, "loaded", self.active_state, self.sub_state, self.invocation_id)

    @property
    def down(self) -> bool:
        """systemd says the unit failed, or it is down or coming back after a failure."""
        if self.error:
            return False
        if self.active_state == "failed" or self.sub_state == "auto-restart":
            return True
        ended_badly = self.result not in ("", "success")
        return self.active_state in ("inactive", "activating", "deactivating") and ended_badly

    @property
    def shows_failure(self) -> bool:
        return self.down or any(target.failing for target in self.targets)

    def words(self) -> str:
        """What root read, in one line."""
        if self.error:
            return f"{self.unit}: live state unknown ({self.error})"
        state = f"{self.unit} is {self.active_state}/{self.sub_state} (Result={self.result})"
        if not self.targets:
            return state + (", no health target of its own" if not self.down else "")
        return state + ", " + ", ".join(target.words() for target in self.targets)


@dataclass(frozen=True)
class Reading:
    """Root's reading of a plan's units, by unit."""

    units: Mapping[str, UnitReading] = field(default_factory=dict)

    def of(self, unit: str) -> UnitReading:
        return self.units.get(unit) or UnitReading(unit, error="not read")


class ProbesSpent(Exception):
    """The run's time for probes is spent: the plan is asked about again next run."""


class RunProbes:
    """The probes of one run of the rules: each target probed at most once (a flood of
    plans of one unit costs one probe), and none once ``budget`` seconds were spent
    probing (:class:`ProbesSpent`)."""

    def __init__(
        self,
        prober: Prober = health.probe,
        budget: float = PROBE_BUDGET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prober, self.budget, self.clock = prober, budget, clock
        self.spent = 0.0
        self.answers: dict[tuple[str, int, float], health.Probe] = {}

    def __call__(self, target: HealthTarget) -> health.Probe:
        key = (str(target.url), target.expect_status, target.timeout_seconds)
        known = self.answers.get(key)
        if known is not None:
            return known
        if self.spent >= self.budget:
            raise ProbesSpent(f"{self.spent:.1f} s of probes spent in this run")
        started = self.clock()
        try:
            got = self.answers[key] = self.prober(target)
        finally:
            self.spent += self.clock() - started
        return got


def read_units(
    units: Sequence[str],
    targets: Mapping[str, HealthTarget],
    read: Show | None = None,
    prober: Prober = health.probe,
    worth_probing: Callable[[UnitReading], bool] = lambda reading: True,
) -> Reading:
    """Root's reading of ``units`` now: systemd's word on each (one ``systemctl show``),
    and, for each that runs (``active`` or ``reloading``: a unit stopped or starting has
    no listener, and a refused probe of it says nothing), its own health targets among
    ``targets`` probed, where ``worth_probing`` says so of what systemd said (the caller's
    precondition: a probe costs seconds, a plan that would go STALE needs none)."""
    try:
        shown = (read or _show)(list(units), PROPERTIES)
    except UnitStateError as exc:
        return Reading({unit: UnitReading(unit, error=exc.message[:200]) for unit in units})
    readings: dict[str, UnitReading] = {}
    for values in shown:
        reading = UnitReading(
            values.unit,
            active_state=values.get("ActiveState", ""),
            sub_state=values.get("SubState", ""),
            result=values.get("Result", ""),
            invocation_id=values.get("InvocationID", ""),
        )
        if values.get("LoadState", "") != "loaded":
            reading = UnitReading(values.unit, error=f"LoadState={values.get('LoadState', '')}")
        elif reading.active_state in RUNNING and worth_probing(reading):
            own = sorted(name for name, target in targets.items() if target.unit == values.unit)
            probed = []
            for name in own[:MAX_TARGETS]:
                got = prober(targets[name])
                probed.append(TargetReading(name, got.outcome, got.error or ""))
                if got.failing:
                    break
            reading = replace(reading, targets=tuple(probed))
        readings[values.unit] = reading
    return Reading(readings)


def _show(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
    return show(units, properties, timeout=SHOW_TIMEOUT)
