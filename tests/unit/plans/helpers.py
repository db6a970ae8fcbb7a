"""Small verbs the executor tests share: plans, a clock, a scripted systemctl."""

import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from executor_svc.apply import Applier
from plans import Outcome, PlanRecord, PlanStore, Provenance, dry_run, transition, write_approval
from plans.readings import Reading, read_units
from shared_io.run import RunResult
from shared_io.unit_show import UnitProperties, UnitState
from shared_schema import ExecutorPolicy, Plan, PlanState

NOW = datetime(2026, 11, 29, 21, 35, tzinfo=UTC)
INVOCATION = "0123456789abcdef0123456789abcdef"
DIAGNOSE = Provenance(uid=998, user="opsbot-diagnose", pid=4242, run_id="run-7")
ALLOWED_UNITS = ["nginx.service", "app.service", "worker@1.service"]
POLICY = ExecutorPolicy(
    allow={
        "restart_unit": ALLOWED_UNITS,
        "reload_unit": ALLOWED_UNITS,
        "start_unit": ALLOWED_UNITS,
        "stop_unit": ALLOWED_UNITS,
        "reset_failed_unit": ALLOWED_UNITS,
    },
    plan_ttl_seconds=86400,
    approval_ttl_seconds=3600,
)


def step(tool: str, unit: str, **extra: Any) -> dict[str, Any]:
    return {"tool": tool, "args": {"unit": unit}, **extra}


def plan_of(
    *steps: dict[str, Any], goal: str = "bring nginx back", stop_on_error: bool = True
) -> Plan:
    """A validated plan of ``steps`` (one restart of nginx.service by default)."""
    return Plan.model_validate(
        {
            "goal": goal,
            "steps": list(steps) or [step("restart_unit", "nginx.service")],
            "stop_on_error": stop_on_error,
        }
    )


class Clock:
    """A ``now`` the test moves by hand."""

    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def submitted(store: PlanStore, plan: Plan, at: datetime = NOW) -> PlanRecord:
    """``plan`` as diagnosis submitted it at ``at``: stored, PROPOSED."""
    plan_id, _, duplicate = store.add(plan, DIAGNOSE, at)
    assert not duplicate
    return store.load(plan_id)


def approved(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    at: datetime = NOW,
    ttl: int = 3600,
) -> None:
    """What ``opsbot approve`` does: a root-written approval, and the plan APPROVED."""
    write_approval(approvals_dir, record, "alice", at, ttl)
    status = store.status(record.plan_id, record)
    if status.state is PlanState.PROPOSED:
        store.save_status(
            transition(status, PlanState.APPROVED, by="alice", at=at, approved_by="alice")
        )


def edit_record(store: PlanStore, plan_id: str, **changes: Any) -> None:
    """Rewrite fields of plans/<id>.json in place, as someone with write access might."""
    path = store.plans / f"{plan_id}.json"
    data = json.loads(path.read_bytes())
    data.update(changes)
    path.write_text(json.dumps(data))


def unit_in(active: str, sub: str | None = None, invocation: str = INVOCATION) -> Any:
    """A ``read_state`` that reports every unit as ``active``/``sub``."""

    def read_state(unit: str) -> UnitState:
        return UnitState(unit, "loaded", active, sub or active, invocation)

    return read_state


@dataclass
class Systemctl:
    """A scripted stand-in for running a step: records each argv and answers with the
    exit status scripted for its unit (0 unless told otherwise)."""

    exit_status: dict[str, int] = field(default_factory=dict)
    output: str = ""
    calls: list[list[str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, argv: list[str], timeout: float) -> RunResult:
        with self.lock:
            self.calls.append(list(argv))
        status = self.exit_status.get(argv[-1], 0)
        output = self.output or ("" if status == 0 else f"Job for {argv[-1]} failed.\n")
        return RunResult(tuple(argv), status, output, "", 0.01)


def restart_argv(unit: str) -> list[str]:
    return ["systemctl", "restart", "--no-ask-password", "--", unit]


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` with its mode, size and mtime (ns), to compare."""
    out: dict[str, tuple[int, int, int]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory, name)
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def names(directory: Path) -> Iterator[str]:
    return iter(sorted(os.listdir(directory)))


def dry_run_of(applier: Applier) -> list[Outcome]:
    """What ``opsbot apply --dry-run`` says of the plans ``applier`` would apply: the same
    store, approvals, policy, clock and live states (plans.dry_run)."""
    return dry_run(
        applier.store,
        applier.approvals_dir,
        applier.policy,
        now=applier.now(),
        read_state=applier.read_state,
    )


def systemd_says_failed(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
    """``systemctl show`` as root's reading asks it (plans.readings), on a host where every
    unit asked about failed with Result=exit-code."""
    said = {"LoadState": "loaded", "ActiveState": "failed", "SubState": "failed"}
    return [UnitProperties(unit, {**said, "Result": "exit-code"}) for unit in units]


def root_reads_failed(units: Sequence[str]) -> Reading:
    """Root's reading (plans.readings) of ``units``, each failed: what lets a rule act."""
    return read_units(units, {}, read=systemd_says_failed)
