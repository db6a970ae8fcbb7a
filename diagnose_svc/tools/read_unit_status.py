"""read_unit_status: one unit's state as systemd knows it, parsed at once into a model."""

from __future__ import annotations

import signal
from datetime import datetime
from typing import Literal

from diagnose_svc._model import Model
from diagnose_svc.errors import ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET, UNIT_LIST_LIMIT
from diagnose_svc.tools._registry import ToolArgs, ToolContext, ToolOutput, read_tool
from diagnose_svc.tools._systemctl import parse_int, parse_timestamp, show
from shared_schema import UnitName

#: Exactly what is asked of systemd; nothing else is read.
PROPERTIES: tuple[str, ...] = (
    "Id",
    "LoadState",
    "LoadError",
    "ActiveState",
    "SubState",
    "Result",
    "MainPID",
    "NRestarts",
    "ExecMainStatus",
    "ExecMainCode",
    "ActiveEnterTimestamp",
    "InactiveEnterTimestamp",
    "StateChangeTimestamp",
    "InvocationID",
    "UnitFileState",
    "Requires",
    "Wants",
    "BindsTo",
    "After",
    "Restart",
    "FragmentPath",
    "NeedDaemonReload",
)
DEPENDENCY_PROPERTIES: tuple[str, ...] = ("Id", "LoadState", "ActiveState", "SubState")

#: ExecMainCode is a CLD_* code from waitid(2).
EXEC_MAIN_CODES = {1: "exited", 2: "killed", 3: "dumped"}
#: Dependency states that mean "not there for its dependents".
UNHEALTHY_STATES = ("failed", "inactive")


class UnitArgs(ToolArgs):
    gives = "state"
    unit: UnitName

    def subject(self) -> str:
        return self.unit


class DependencyState(Model):
    """A Requires=/BindsTo= dependency that is failed or inactive."""

    unit: str
    relation: Literal["Requires", "BindsTo"]
    load_state: str
    active_state: str
    sub_state: str


class UnitStatus(ToolOutput):
    """``systemctl show`` of one unit, with its failed or inactive hard dependencies."""

    unit: str
    load_state: str
    load_error: str = ""
    active_state: str
    sub_state: str
    result: str
    main_pid: int
    n_restarts: int
    exec_main_code: str
    exec_main_status: int
    active_enter_timestamp: datetime | None
    inactive_enter_timestamp: datetime | None
    state_change_timestamp: datetime | None
    invocation_id: str
    unit_file_state: str
    requires: list[str]
    wants: list[str]
    binds_to: list[str]
    after: list[str]
    restart: str
    fragment_path: str
    need_daemon_reload: bool
    unhealthy_dependencies: list[DependencyState]
    #: Entries of ``after`` and ``wants`` left out to keep the answer short.
    omitted_dependencies: int = 0

    @property
    def signal_name(self) -> str | None:
        """SIGKILL etc. when the main process was killed by a signal."""
        if self.exec_main_code not in ("killed", "dumped"):
            return None
        try:
            return signal.Signals(self.exec_main_status).name
        except ValueError:
            return f"signal {self.exec_main_status}"

    def main_exit(self) -> str:
        """How the main process last ended, in words ('' if it has not)."""
        if self.exec_main_code == "exited":
            return f"main process exited with status {self.exec_main_status}"
        if self.exec_main_code in ("killed", "dumped"):
            dumped = " and dumped core" if self.exec_main_code == "dumped" else ""
            return f"main process was killed by {self.signal_name}{dumped}"
        return ""

    def summary(self) -> str:
        parts = [f"{self.unit} is {self.active_state}/{self.sub_state}"]
        if self.load_state != "loaded":
            parts.append(f"LoadState={self.load_state}")
        if self.result != "success":
            parts.append(f"Result={self.result}")
        exit_words = self.main_exit()
        if exit_words and self.active_state != "active":
            parts.append(exit_words)
        parts.append(f"NRestarts={self.n_restarts}")
        if self.need_daemon_reload:
            parts.append("NeedDaemonReload=yes")
        if self.unhealthy_dependencies:
            deps = ", ".join(f"{d.unit} ({d.active_state})" for d in self.unhealthy_dependencies)
            parts.append(f"unhealthy dependencies: {deps}")
        return "; ".join(parts)

    def related_units(self) -> list[str]:
        return [d.unit for d in self.unhealthy_dependencies]

    def established(self) -> list[str]:
        return [self.unit] if self.unit else []


def _units(value: str) -> list[str]:
    return value.split()[:UNIT_LIST_LIMIT]


def _dependencies(requires: list[str], binds_to: list[str]) -> list[DependencyState]:
    relations: dict[str, Literal["Requires", "BindsTo"]] = {}
    for unit in requires:
        relations.setdefault(unit, "Requires")
    for unit in binds_to:
        relations[unit] = "BindsTo"
    if not relations:
        return []
    names = list(relations)
    states = show(names, DEPENDENCY_PROPERTIES)
    out = []
    for name, props in zip(names, states, strict=True):
        if props.get("ActiveState", "") in UNHEALTHY_STATES:
            out.append(
                DependencyState(
                    unit=name,
                    relation=relations[name],
                    load_state=props.get("LoadState", ""),
                    active_state=props.get("ActiveState", ""),
                    sub_state=props.get("SubState", ""),
                )
            )
    return out


def parse_unit_status(props: dict[str, str], unhealthy: list[DependencyState]) -> UnitStatus:
    """Build a UnitStatus from one ``systemctl show`` block (see PROPERTIES)."""
    requires = _units(props.get("Requires", ""))
    binds_to = _units(props.get("BindsTo", ""))
    return UnitStatus(
        unit=props.get("Id", ""),
        load_state=props.get("LoadState", ""),
        load_error=props.get("LoadError", ""),
        active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""),
        result=props.get("Result", ""),
        main_pid=parse_int(props.get("MainPID", "")),
        n_restarts=parse_int(props.get("NRestarts", "")),
        exec_main_code=EXEC_MAIN_CODES.get(parse_int(props.get("ExecMainCode", "")), ""),
        exec_main_status=parse_int(props.get("ExecMainStatus", "")),
        active_enter_timestamp=parse_timestamp(props.get("ActiveEnterTimestamp", "")),
        inactive_enter_timestamp=parse_timestamp(props.get("InactiveEnterTimestamp", "")),
        state_change_timestamp=parse_timestamp(props.get("StateChangeTimestamp", "")),
        invocation_id=props.get("InvocationID", ""),
        unit_file_state=props.get("UnitFileState", ""),
        requires=requires,
        wants=_units(props.get("Wants", "")),
        binds_to=binds_to,
        after=_units(props.get("After", "")),
        restart=props.get("Restart", ""),
        fragment_path=props.get("FragmentPath", ""),
        need_daemon_reload=props.get("NeedDaemonReload", "") == "yes",
        unhealthy_dependencies=unhealthy,
    )


@read_tool(UnitArgs)
def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
    """Read the live state of one systemd unit.

    Returns load_state, active_state, sub_state, result (how it last stopped: success,
    exit-code, signal, core-dump, timeout, start-limit-hit, ...), main_pid, n_restarts,
    how the main process last ended (exec_main_code exited/killed/dumped with
    exec_main_status), when it entered its states (UTC), invocation_id, unit_file_state,
    its dependencies (requires, wants, binds_to, after), restart policy, fragment_path,
    need_daemon_reload, and which of its Requires=/BindsTo= dependencies are failed or
    inactive (unhealthy_dependencies). A plan may only act on units read with this tool.
    """
    [props] = show([args.unit], PROPERTIES)
    if props.get("LoadState") == "not-found":
        raise ToolError(
            f"unit {args.unit} not found"
            + (f": {props['LoadError']}" if props.get("LoadError") else ""),
            hint="list_failed_units shows the units that failed; check the name",
        )
    requires = _units(props.get("Requires", ""))
    binds_to = _units(props.get("BindsTo", ""))
    return fit_status(parse_unit_status(props, _dependencies(requires, binds_to)))


def fit_status(status: UnitStatus, budget: int = TOOL_OUTPUT_BUDGET) -> UnitStatus:
    """Leave out entries of After= and then Wants= until the status fits ``budget``
    characters of JSON; Requires= and BindsTo= are always kept."""
    after, wants = list(status.after), list(status.wants)
    omitted = 0
    while len(status.model_dump_json()) > budget and (after or wants):
        (after or wants).pop()
        omitted += 1
        status = status.model_copy(
            update={"after": after[:], "wants": wants[:], "omitted_dependencies": omitted}
        )
    return status
