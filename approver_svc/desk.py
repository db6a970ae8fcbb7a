"""What root's approver works with, whichever request it answers: the config in force, the
store, its own state file, the road to an approval (plans.road) and how it reads the host.

The requests (approver_svc.service), the standing rules (approver_svc.rules) and the news
(approver_svc.news) each take a :class:`Desk`; none of them takes another's object or
calls back into it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from approver_svc.state import StateFile
from approver_svc.view import ReadState, live_state, plan_view
from plans import (
    Accepted,
    Analyzer,
    PlanError,
    PlanRecord,
    PlanStore,
    StatusRecord,
    accepted as journal_accepted,
    apply_running,
    members,
    systemd_analyze,
    utcnow,
)
from plans.readings import Reading, RunProbes, UnitReading, read_units
from plans.road import Road, StartApply, WindowApply
from shared_schema import ExecutorPolicy, OpsbotConfig, Plan
from shared_schema.approver_socket import PlanView

__all__ = ["Desk"]


@dataclass
class Desk:
    """The approver's store, approvals directory, state and config; the host's apply, the
    journal witness, systemd-analyze and the units' live state as injected (the daemon's
    are the host's, a test's are scripted)."""

    config: OpsbotConfig
    store: PlanStore
    approvals_dir: Path
    state: StateFile
    credentials: Path | None
    #: After an approval: what will apply the plan, in words (plans.start_apply).
    start_apply: StartApply
    #: What applies a plan that waits for its window, in words (plans.window_apply).
    window_apply: WindowApply
    now: Callable[[], datetime] = utcnow
    witness: Callable[[str], Accepted] = journal_accepted
    #: Before an approval: whether an apply runs now (plans.apply_running).
    apply_busy: Callable[[], bool] = apply_running
    read_state: ReadState = live_state
    #: Before a rule approves: root's reading of the plan's units (plans.readings).
    read_units: Callable[[list[str]], Reading] | None = None
    #: systemd-analyze calendar, for the apply windows (plans.windows).
    analyze: Analyzer = systemd_analyze
    host: str = field(default_factory=socket.gethostname)
    #: The config digest the page sent with its last relay, and when (check-config).
    web_config: tuple[str, datetime] | None = None
    #: Held for each request: one at a time, as each reads and writes the one state file.
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def policy(self) -> ExecutorPolicy:
        return self.config.executor

    def reading(
        self,
        units: list[str],
        worth_probing: Callable[[UnitReading], bool],
        probes: RunProbes,
    ) -> Reading:
        """Root's reading of ``units`` now: systemd's word, and their own health targets
        probed (``[diagnose.health]``, root's config) where ``worth_probing`` says so,
        through the run's ``probes``."""
        if self.read_units is not None:
            return self.read_units(units)
        return read_units(
            units, self.config.diagnose.health, prober=probes, worth_probing=worth_probing
        )

    @property
    def road(self) -> Road:
        """The road to an approval, under the config in force now."""
        return Road(
            store=self.store,
            approvals_dir=self.approvals_dir,
            policy=self.policy,
            start_apply=self.start_apply,
            window_apply=self.window_apply,
            witness=self.witness,
            apply_busy=self.apply_busy,
            analyze=self.analyze,
        )

    def plan_view(
        self, record: PlanRecord, status: StatusRecord, plan: Plan, now: datetime
    ) -> PlanView:
        """``plan`` as the page and a message show it, read now (for a follow-up, with
        the plan it follows and its place in the incident)."""
        earlier, number = None, 1
        if plan.follows is not None:
            try:
                earlier = self.store.verified_plan(self.store.load(plan.follows))
                number = members(self.store, record.incident_id).index(record.plan_id) + 1
            except (PlanError, ValueError):
                earlier, number = None, 2
        return plan_view(
            record,
            status,
            plan,
            policy=self.policy,
            now=now,
            host=self.host,
            read_state=self.read_state,
            analyze=self.analyze,
            earlier=earlier,
            number=number,
        )
