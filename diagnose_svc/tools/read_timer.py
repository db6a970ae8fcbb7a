"""read_timer: a timer's schedule and how the service it triggers last ended.

A job that "did not run" is a timer that did not elapse, or a service that ran and
failed: this tells which, from the timer's LastTriggerUSec and NextElapseUSecRealtime
and its service's Result.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import Field

from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_int, parse_timespan, parse_timestamp, show
from shared_schema import UnitName

TIMER_PROPERTIES = (
    "Id",
    "ActiveState",
    "Unit",
    "LastTriggerUSec",
    "NextElapseUSecRealtime",
    "NextElapseUSecMonotonic",
    "Result",
)
SERVICE_PROPERTIES = (
    "Id",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainStatus",
    "InactiveEnterTimestamp",
)


class TimerArgs(UnitToolArgs):
    gives = "timer"
    unit: Annotated[UnitName, Field(pattern=r"\.timer$")]


class TimerState(ToolOutput):
    """A timer: whether it is active, when it last fired and fires next, and the state and
    last result of the service it starts."""

    unit: str
    active_state: str
    result: str
    triggers: str
    last_trigger: datetime | None
    next_elapse: datetime | None
    service_active_state: str
    service_result: str
    service_exit_status: int
    service_last_run_ended: datetime | None

    def summary(self) -> str:
        last = f"{self.last_trigger:%Y-%m-%d %H:%M:%S} UTC" if self.last_trigger else "never"
        nxt = f"{self.next_elapse:%Y-%m-%d %H:%M:%S} UTC" if self.next_elapse else "not scheduled"
        return (
            f"{self.unit} is {self.active_state}; last fired {last}, next {nxt}; "
            f"{self.triggers} is {self.service_active_state} (Result={self.service_result}, "
            f"exit status {self.service_exit_status})"
        )


def next_elapse(
    props: Mapping[str, str], now: datetime | None = None, monotonic: float | None = None
) -> datetime | None:
    """When the timer fires next, in UTC: its calendar time (OnCalendar=), or its
    monotonic one (OnBootSec=, OnUnitActiveSec=, ...: a time since boot, on the clock
    time.monotonic() reads) turned into wall time."""
    calendar = parse_timestamp(props.get("NextElapseUSecRealtime", ""))
    since_boot = parse_timespan(props.get("NextElapseUSecMonotonic", ""))
    if since_boot is None:
        return calendar
    now = now or datetime.now(UTC)
    wall = now + timedelta(seconds=since_boot - (monotonic or time.monotonic()))
    return min(calendar, wall) if calendar else wall


@read_tool(TimerArgs)
def read_timer(args: TimerArgs, context: ToolContext) -> TimerState:
    """Read one timer (a .timer unit): its state and result, when it last fired and
    fires next (UTC), which service it starts, and that service's state, last result,
    exit status and when its last run ended.
    """
    [timer] = show([args.unit], TIMER_PROPERTIES)
    service = timer.get("Unit", "")
    props = show([service], SERVICE_PROPERTIES)[0] if service else {}
    return TimerState(
        unit=timer.get("Id", args.unit),
        active_state=timer.get("ActiveState", ""),
        result=timer.get("Result", ""),
        triggers=service,
        last_trigger=parse_timestamp(timer.get("LastTriggerUSec", "")),
        next_elapse=next_elapse(timer),
        service_active_state=props.get("ActiveState", ""),
        service_result=props.get("Result", ""),
        service_exit_status=parse_int(props.get("ExecMainStatus", "")),
        service_last_run_ended=parse_timestamp(props.get("InactiveEnterTimestamp", "")),
    )
