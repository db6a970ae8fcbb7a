"""read_unit_status: one unit's state as systemd knows it, parsed at once into a model."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from diagnose_svc._model import Model
from diagnose_svc.errors import ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET, UNIT_LIST_LIMIT
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import (
    UnitProperties,
    parse_exec,
    parse_int,
    parse_timestamp,
    parse_units,
    show,
)
from shared_io.errors import OpsbotError

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
    "BoundBy",
    "RequiredBy",
    "After",
    "Restart",
    "FragmentPath",
    "NeedDaemonReload",
    "ReloadResult",
    "CanReload",
    "ControlPID",
    "ExecMainStartTimestamp",
    "ActiveExitTimestamp",
    "User",
    "Type",
    "ExecStartPre",
    "ExecStart",
    "TriggeredBy",
)
DEPENDENCY_PROPERTIES: tuple[str, ...] = ("Id", "LoadState", "ActiveState", "SubState", "Result")

#: ExecMainCode is a CLD_* code from waitid(2).
EXEC_MAIN_CODES = {1: "exited", 2: "killed", 3: "dumped"}
#: Dependency states that mean "not there for its dependents".
UNHEALTHY_STATES = ("failed", "inactive")


class UnitArgs(UnitToolArgs):
    gives = "state"


Relation = Literal["Requires", "BindsTo", "Wants", "After"]


class DependencyState(Model):
    """A dependency (Requires=, BindsTo=, Wants=, or a service it is ordered After=) that
    is failed or inactive."""

    unit: str
    relation: Relation
    load_state: str
    active_state: str
    sub_state: str
    result: str = ""


class FailedCommand(Model):
    """The command of the last start that failed: which phase (ExecStartPre= is the
    unit's own check before its service starts), its command line, how it ended."""

    phase: str
    argv: str
    code: str
    status: int
    #: Seconds it ran before it ended (None: systemd did not say).
    ran_seconds: float | None = None


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
    #: The units that BindsTo= this one: systemd stops them when it stops.
    bound_by: list[str] = []
    #: The units that Requires= this one: a job that stops it stops them.
    required_by: list[str] = []
    after: list[str]
    restart: str
    fragment_path: str
    need_daemon_reload: bool
    reload_result: str = "success"
    can_reload: bool = False
    control_pid: int = 0
    exec_main_start_timestamp: datetime | None = None
    #: When it last stopped being active.
    active_exit_timestamp: datetime | None = None
    user: str = ""
    #: Type= of a service (simple, notify, oneshot, ...); "" for other units.
    service_type: str = ""
    failed_command: FailedCommand | None = None
    #: The socket (or path, timer) units that start it on demand.
    triggered_by: list[str] = []
    unhealthy_dependencies: list[DependencyState]
    #: Entries of ``after``, ``wants``, ``bound_by`` and ``required_by`` left out to keep
    #: the answer short.
    omitted_dependencies: int = 0

    @property
    def crash_looping(self) -> bool:
        """systemd is restarting it because it exited (Restart=): waiting to restart
        (auto-restart), or starting it again after an automatic restart (NRestarts counts
        those since it was last started by hand). A loop is failing, not settling; only a
        unit starting for the first time, or stopping, is in transition."""
        if self.active_state != "activating":
            return False
        return self.sub_state == "auto-restart" or self.n_restarts > 0

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
        if self.reload_result != "success":
            parts.append(f"ReloadResult={self.reload_result}")
        failed = self.failed_command
        if failed is not None and failed.phase != "ExecStart" and self.active_state != "active":
            parts.append(
                f"{failed.phase} {failed.argv[:60]} {failed.code} with status {failed.status}"
            )
        if self.unhealthy_dependencies:
            deps = ", ".join(f"{d.unit} ({d.active_state})" for d in self.unhealthy_dependencies)
            parts.append(f"unhealthy dependencies: {deps}")
        return "; ".join(parts)

    def unit_result(self) -> tuple[str, str] | None:
        return (self.unit, self.result) if self.result else None

    def related_units(self) -> list[str]:
        return [d.unit for d in self.unhealthy_dependencies]

    def established(self) -> list[str]:
        return [self.unit] if self.unit else []


def _units(value: str) -> list[str]:
    return parse_units(value)[:UNIT_LIST_LIMIT]


def _shown(unit: str, context: ToolContext) -> tuple[UnitProperties, Mapping[str, UnitProperties]]:
    """``unit``'s properties, and its dependencies' states when this step's other
    read_unit_status calls were read with it (empty: read them). The statuses one step
    asks for are one ``systemctl show``, their dependencies one more: a step reading
    four statuses starts two commands, not eight. Should the reading together fail, each
    unit is read alone, so that one call's trouble is not its neighbours'."""
    together = sorted({unit, *context.asked.get("read_unit_status", ())})
    if len(together) > 1:
        try:
            blocks = context.once(
                "read_unit_status " + " ".join(together), lambda: show(together, PROPERTIES)
            )
            theirs = sorted({d for block in blocks for d in relations_of(block)})
            states = context.once(
                "dependencies " + " ".join(theirs),
                lambda: (
                    dict(zip(theirs, show(theirs, DEPENDENCY_PROPERTIES), strict=True))
                    if theirs
                    else {}
                ),
            )
            return blocks[together.index(unit)], states
        except OpsbotError:
            pass
    [props] = show([unit], PROPERTIES)
    return props, {}


def _dependencies(
    relations: dict[str, Relation], known: Mapping[str, UnitProperties]
) -> list[DependencyState]:
    if not relations:
        return []
    names = list(relations)
    if all(name in known for name in names):
        states = [known[name] for name in names]
    else:
        states = show(names, DEPENDENCY_PROPERTIES)
    out = []
    for name, props in zip(names, states, strict=True):
        if props.get("ActiveState", "") not in UNHEALTHY_STATES:
            continue
        if relations[name] in ("Wants", "After"):
            if props.get("LoadState") != "loaded":
                continue  # a wanted unit that does not exist is no failure
            if props.get("ActiveState") == "inactive" and props.get("Result") == "success":
                continue  # a wanted job that finished, or was stopped on purpose
        out.append(
            DependencyState(
                unit=name,
                relation=relations[name],
                load_state=props.get("LoadState", ""),
                active_state=props.get("ActiveState", ""),
                sub_state=props.get("SubState", ""),
                result=props.get("Result", ""),
            )
        )
    return out


def relations_of(props: Mapping[str, str]) -> dict[str, Relation]:
    """The units ``props`` depends on, each with its strongest relation: BindsTo=,
    Requires=, Wants=, then services it is only ordered After=."""
    relations: dict[str, Relation] = {}
    for unit in _units(props.get("After", "")):
        if unit.endswith(".service"):
            relations[unit] = "After"
    for key in ("Wants", "Requires", "BindsTo"):
        for unit in _units(props.get(key, "")):
            relations[unit] = key
    relations.pop(props.get("Id", ""), None)
    return relations


def failed_command(props: Mapping[str, str]) -> FailedCommand | None:
    """The ExecStartPre= or ExecStart= command whose last run failed, if one did."""
    for phase in ("ExecStartPre", "ExecStart"):
        for command in parse_exec(props.get(phase, "")):
            if command.failed:
                return FailedCommand(
                    phase=phase,
                    argv=" ".join(command.argv)[:200],
                    code=command.code,
                    status=command.status,
                    ran_seconds=(
                        round(command.ran_seconds, 3) if command.ran_seconds is not None else None
                    ),
                )
    return None


def parse_unit_status(props: Mapping[str, str], unhealthy: list[DependencyState]) -> UnitStatus:
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
        bound_by=_units(props.get("BoundBy", "")),
        required_by=_units(props.get("RequiredBy", "")),
        after=_units(props.get("After", "")),
        restart=props.get("Restart", ""),
        fragment_path=props.get("FragmentPath", ""),
        need_daemon_reload=props.get("NeedDaemonReload", "") == "yes",
        reload_result=props.get("ReloadResult", "") or "success",
        can_reload=props.get("CanReload", "") == "yes",
        control_pid=parse_int(props.get("ControlPID", "")),
        exec_main_start_timestamp=parse_timestamp(props.get("ExecMainStartTimestamp", "")),
        active_exit_timestamp=parse_timestamp(props.get("ActiveExitTimestamp", "")),
        user=props.get("User", ""),
        service_type=props.get("Type", ""),
        failed_command=failed_command(props),
        triggered_by=_units(props.get("TriggeredBy", "")),
        unhealthy_dependencies=unhealthy,
    )


@read_tool(UnitArgs)
def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
    """Read the live state of one systemd unit.

    Returns load_state, active_state, sub_state, result (how it last stopped: success,
    exit-code, signal, core-dump, timeout, start-limit-hit, ...), main_pid, n_restarts,
    how the main process last ended (exec_main_code exited/killed/dumped with
    exec_main_status), when it entered its states (UTC), invocation_id, unit_file_state,
    its dependencies (requires, wants, binds_to, after), the units that depend on it
    (bound_by: systemd stops them when it stops; required_by: a job that stops it stops
    them), restart policy, fragment_path,
    need_daemon_reload, reload_result and can_reload, the control pid, when its main
    process started, its user, the command of the last start that failed (failed_command:
    ExecStartPre= or ExecStart=, its exit code and status), and which of its dependencies
    (BindsTo=, Requires=, Wants=, services it is ordered After=) are failed or inactive
    (unhealthy_dependencies). A plan may only act on units read with this tool.
    """
    props, known = _shown(args.unit, context)
    if props.get("LoadState") == "not-found":
        # LoadError says the same again ("...NoSuchUnit \"Unit x not found.\""): only
        # another reason is worth its words.
        why = props.get("LoadError", "")
        raise ToolError(
            f"unit {args.unit} not found" + (f": {why}" if why and "NoSuchUnit" not in why else ""),
            hint="list_failed_units shows the units that failed; check the name",
        )
    seen = {**props, "TriggeredBy": props.get("TriggeredBy", "") or _idle_socket(props)}
    return fit_status(parse_unit_status(seen, _dependencies(relations_of(seen), known)))


def _idle_socket(props: Mapping[str, str]) -> str:
    """The socket unit of the same name that activates a service which is down, when
    systemd no longer says so (a stopped socket is unloaded, and with it TriggeredBy=):
    systemctl show loads it, and its Triggers= says whether it starts this service."""
    unit = props.get("Id", "")
    if not unit.endswith(".service") or props.get("ActiveState") not in UNHEALTHY_STATES:
        return ""
    socket = unit.removesuffix(".service") + ".socket"
    [found] = show([socket], ("Id", "LoadState", "Triggers"))
    if found.get("LoadState") == "loaded" and unit in parse_units(found.get("Triggers", "")):
        return socket
    return ""


def fit_status(status: UnitStatus, budget: int = TOOL_OUTPUT_BUDGET) -> UnitStatus:
    """Leave out entries of After=, then Wants=, RequiredBy= and BoundBy= until the status
    fits ``budget`` characters of JSON; Requires= and BindsTo= are always kept."""
    after, wants = list(status.after), list(status.wants)
    required, bound = list(status.required_by), list(status.bound_by)
    omitted = 0
    while len(status.model_dump_json()) > budget and (after or wants or required or bound):
        (after or wants or required or bound).pop()
        omitted += 1
        status = status.model_copy(
            update={
                "after": after[:],
                "wants": wants[:],
                "bound_by": bound[:],
                "required_by": required[:],
                "omitted_dependencies": omitted,
            }
        )
    return status
