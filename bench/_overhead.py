"""The diagnosis runtime's own cost per step: run_diagnosis with a scripted in-process
policy and tools that return prepared outputs at once, minus the (tiny) time spent inside
the policy and the tools. What is left is the loop itself: argument validation, cycle
bookkeeping, redaction and truncation of each observation, evidence, plan validation and
the readiness rule, events and their log lines.

Used by bench.diagnosis_cost (run inside the container, so the log lines go to journald as
in the daemon); runnable anywhere opsbot's packages import.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from diagnose_svc.actions import Action, CallTool, Proposal, SubmitPlan, ToolSpec, Transcript
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools import (
    JournalArgs,
    JournalLine,
    NoArgs,
    ToolContext,
    ToolOutput,
    UnitArgs,
    make_tool,
)
from diagnose_svc.tools.list_failed_units import parse_failed_units
from diagnose_svc.tools.read_unit_status import parse_unit_status
from diagnose_svc.tools.tail_journal import fit
from shared_schema import Accept, DiagnoseSettings, Plan


def _show(unit: str, state: str, result: str) -> dict[str, str]:
    return {
        "Id": unit,
        "LoadState": "loaded",
        "ActiveState": state,
        "SubState": state,
        "Result": result,
        "MainPID": "0",
        "NRestarts": "3",
        "ExecMainCode": "1",
        "ExecMainStatus": "1",
        "ActiveEnterTimestamp": "Sun 2026-11-29 21:44:38.559839 UTC",
        "InactiveEnterTimestamp": "Sun 2026-11-29 21:44:40.629087 UTC",
        "StateChangeTimestamp": "Sun 2026-11-29 21:44:40.629087 UTC",
        "InvocationID": "82d3ba5b3fec48d39ed2be89fe58647a",
        "UnitFileState": "enabled",
        "Requires": "sysinit.target system.slice db.service",
        "Wants": "network-online.target",
        "BindsTo": "",
        "After": "sysinit.target basic.target systemd-journald.socket "
        "system.slice network-online.target db.service",
        "Restart": "on-failure",
        "FragmentPath": f"/etc/systemd/system/{unit}",
        "NeedDaemonReload": "no",
        "LoadError": "",
    }


def prepared_outputs() -> dict[str, ToolOutput]:
    """Realistic outputs, built once (building them is the tools' work, not the loop's)."""
    now = datetime(2026, 11, 29, 21, 44, tzinfo=UTC)
    lines = [
        JournalLine(
            time=(now - timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
            priority="err" if i % 9 == 0 else "info",
            source="app",
            message=f"request {i} failed: upstream db.service:5432 refused connection "
            f"(attempt {i % 5}, token=abc{i}def, backoff {i % 7}s)",
        )
        for i in range(50)
    ]
    failed = parse_failed_units(
        '[{"unit":"db.service","load":"loaded","active":"failed","sub":"failed",'
        '"description":"database"},{"unit":"app.service","load":"loaded","active":"failed",'
        '"sub":"failed","description":"application"}]'
    )
    return {
        "app": parse_unit_status(_show("app.service", "failed", "exit-code"), []),
        "db": parse_unit_status(_show("db.service", "failed", "exit-code"), []),
        "journal": fit("app.service", None, lines, 1800),
        "failed": failed,
    }


class _Clock:
    def __init__(self) -> None:
        self.spent = 0.0


class ScriptedPolicy:
    """Replays a fixed list of actions, instantly."""

    name = "scripted"

    def __init__(self, actions: Sequence[Action], clock: _Clock) -> None:
        self.actions = list(actions)
        self.index = 0
        self.clock = clock

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        started = time.perf_counter()
        action = self.actions[self.index]
        self.index += 1
        proposal = Proposal(action=action, prompt_tokens=900, completion_tokens=40)
        self.clock.spent += time.perf_counter() - started
        return proposal


class InstantSubmitter:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def submit(self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()) -> Accept:
        started = time.perf_counter()
        reply = Accept(plan_id="20261129-220000-0a1b2c3d", sha256=plan.fingerprint())
        self.clock.spent += time.perf_counter() - started
        return reply


def _tools(outputs: dict[str, ToolOutput], clock: _Clock) -> dict[str, Any]:
    def read_unit_status(args: UnitArgs, context: ToolContext) -> ToolOutput:
        """Read the live state of one systemd unit."""
        started = time.perf_counter()
        out = outputs["app" if args.unit == "app.service" else "db"]
        clock.spent += time.perf_counter() - started
        return out

    def tail_journal(args: JournalArgs, context: ToolContext) -> ToolOutput:
        """Read the newest journal lines of one unit."""
        started = time.perf_counter()
        out = outputs["journal"]
        clock.spent += time.perf_counter() - started
        return out

    def list_failed_units(args: NoArgs, context: ToolContext) -> ToolOutput:
        """List the failed units."""
        started = time.perf_counter()
        out = outputs["failed"]
        clock.spent += time.perf_counter() - started
        return out

    return {
        "read_unit_status": make_tool(UnitArgs, read_unit_status),
        "tail_journal": make_tool(JournalArgs, tail_journal),
        "list_failed_units": make_tool(NoArgs, list_failed_units),
    }


ACTIONS: list[Action] = [
    CallTool("read_unit_status", {"unit": "app.service"}),
    CallTool("tail_journal", {"unit": "app.service", "lines": 50}),
    CallTool("read_unit_status", {"unit": "db.service"}),
    CallTool("list_failed_units", {}),
    SubmitPlan(
        {
            "goal": "Restart db.service, then app.service",
            "steps": [
                {
                    "tool": "restart_unit",
                    "args": {"unit": "db.service"},
                    "expect": {"active_state": ["failed"]},
                    "reason": "db failed once",
                },
                {
                    "tool": "restart_unit",
                    "args": {"unit": "app.service"},
                    "expect": {"active_state": ["failed"]},
                    "reason": "app needs db",
                },
            ],
        }
    ),
]


def _drop(logger: Any, name: str, event_dict: Any) -> Any:
    raise structlog.DropEvent


def _one_run(outputs: dict[str, ToolOutput], settings: DiagnoseSettings) -> tuple[float, int]:
    clock = _Clock()
    tools = _tools(outputs, clock)
    started = time.perf_counter()
    verdict = run_diagnosis(
        "app.service",
        "502 from nginx",
        ScriptedPolicy(ACTIONS, clock),
        tools,
        InstantSubmitter(clock),
        settings,
    )
    elapsed = time.perf_counter() - started - clock.spent
    if verdict.kind != "plan":
        raise RuntimeError(f"the scripted run did not end with a plan: {verdict}")
    return elapsed, verdict.steps_used


def measure_overhead(runs: int) -> dict[str, Any]:
    """Per-step overhead (ms) of ``runs`` diagnoses, with logging as configured by the
    caller, and again with every log event dropped (to show what logging costs)."""
    outputs = prepared_outputs()
    settings = DiagnoseSettings()
    result: dict[str, Any] = {"steps_per_run": len(ACTIONS), "runs": runs}
    for label in ("per_step_ms", "per_step_ms_no_logging"):
        if label == "per_step_ms_no_logging":
            structlog.configure(processors=[_drop])
        for _ in range(20):  # warm-up
            _one_run(outputs, settings)
        per_step = []
        for _ in range(runs):
            elapsed, steps = _one_run(outputs, settings)
            per_step.append(elapsed / steps * 1000)
        result[label] = per_step
        result[label.replace("_ms", "_median_ms")] = statistics.median(per_step)
    return result


if __name__ == "__main__":
    from shared_io import log as diagnose_log

    diagnose_log.configure("opsbot-diagnose")
    r = measure_overhead(200)
    print({k: v for k, v in r.items() if not isinstance(v, list)})
