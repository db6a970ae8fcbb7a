"""Test doubles at the edges of the diagnosis loop, and nothing else.

* ``ScriptedPolicy`` replays a list of actions (pydantic-ai's FunctionModel idea): the
  model behind the protocol, without a network.
* ``FakeSubmitter`` implements the Submitter protocol: the executor boundary.
* ``RecordedHost`` answers the read tools from recorded systemd output (this host does
  not run systemd): its read_unit_status parses ``systemctl show`` text with the real
  parser, its tail_journal returns recorded lines through the real bounding code, and the
  other tools answer with their real output models, from what the test states about the
  host (a file's facts, a full filesystem, who holds a port, a stopped process) or, when
  it states nothing, what a host without that fault shows. The tools are built with the
  real ``make_tool`` and the real argument models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from diagnose_svc.actions import Action, Proposal, ToolSpec, Transcript
from diagnose_svc.errors import DiagnoseError, ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools import (
    FailedUnit,
    FailedUnits,
    HealthArgs,
    HealthResult,
    JournalArgs,
    JournalLine,
    JournalTail,
    NoArgs,
    Tool,
    ToolContext,
    UnitArgs,
    UnitStatus,
    make_tool,
)
from diagnose_svc.tools._baseline_store import Snapshot
from diagnose_svc.tools._systemctl import parse_show, parse_timestamp
from diagnose_svc.tools.disk_usage import DiskArgs, DiskUsage, Usage
from diagnose_svc.tools.list_listeners import Listener, Listeners, ListenersArgs
from diagnose_svc.tools.read_baseline import Baseline, BaselineArgs
from diagnose_svc.tools.read_certificates import Certificates, CertificatesArgs
from diagnose_svc.tools.read_changes import Changes, ChangesArgs
from diagnose_svc.tools.read_config_edges import ConfigEdge, ConfigEdges, ConfigEdgesArgs
from diagnose_svc.tools.read_connections import Connections, ConnectionsArgs, Edge
from diagnose_svc.tools.read_limits import Limits, LimitsArgs
from diagnose_svc.tools.read_process_state import ProcessArgs, ProcessInfo, ProcessState
from diagnose_svc.tools.read_unit_file import PathFact, UnitFile, UnitFileArgs
from diagnose_svc.tools.read_unit_status import DependencyState, parse_unit_status
from diagnose_svc.tools.tail_journal import fit
from shared_schema import Accept, Plan, Reject, Revise

Script = Action | Proposal | Callable[[Transcript, Sequence[ToolSpec]], Action | Proposal]


class ScriptedPolicy:
    """Replays ``script``; records the tools it was shown and the transcript at each turn."""

    name = "scripted"

    def __init__(self, script: Sequence[Script], tokens: tuple[int, int] = (0, 0)) -> None:
        self.script = list(script)
        self.tokens = tokens
        self.shown_tools: list[list[str]] = []
        self.observations: list[list[str]] = []

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        self.shown_tools.append([tool.name for tool in tools])
        self.observations.append([turn.observation for turn in transcript.turns])
        if not self.script:
            raise AssertionError("the scripted policy ran out of actions")
        item = self.script.pop(0)
        if callable(item):
            item = item(transcript, tools)
        if isinstance(item, Proposal):
            return item
        return Proposal(item, prompt_tokens=self.tokens[0], completion_tokens=self.tokens[1])


class RepeatingPolicy:
    """Proposes the same action forever (a policy that never finishes)."""

    name = "repeating"

    def __init__(self, make: Callable[[int], Action]) -> None:
        self.make = make
        self.calls = 0
        self.shown_tools: list[list[str]] = []

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        self.shown_tools.append([tool.name for tool in tools])
        self.calls += 1
        return Proposal(self.make(self.calls))


@dataclass
class FakeSubmitter:
    """The executor's side of the socket, as a list of replies (or errors) to give."""

    replies: list[Accept | Revise | Reject | DiagnoseError] = field(default_factory=list)
    submitted: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)

    def submit(
        self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()
    ) -> Accept | Revise | Reject:
        # Kept as it goes on the wire: what the executor would read.
        self.submitted.append((plan.model_dump(mode="json", exclude_none=True), run_id, symptom))
        if not self.replies:
            raise AssertionError("the fake executor has no more replies")
        reply = self.replies.pop(0)
        if isinstance(reply, DiagnoseError):
            raise reply
        return reply


def accept(plan_sha: str = "0" * 64, plan_id: str = "20261129-214500-0a1b2c3d") -> Accept:
    return Accept(plan_id=plan_id, sha256=plan_sha)


def journal_lines(rows: Sequence[tuple[str, str, str, str]]) -> list[JournalLine]:
    """Recorded rows as tail_journal builds them: a row whose source is "systemd" is PID
    1's (what journald records as _PID=1); any other source is the unit's own output."""
    return [
        JournalLine(time=t, priority=p, source=s, message=m, systemd=s == "systemd")
        for t, p, s, m in rows
    ]


@dataclass
class RecordedHost:
    """A host as recorded: ``systemctl show`` text per unit, journal rows, health results,
    and what the test states about its files, filesystems, ports and processes."""

    shows: dict[str, str] = field(default_factory=dict)
    journals: dict[str, list[tuple[str, str, str, str]]] = field(default_factory=dict)
    health: dict[str, HealthResult] = field(default_factory=dict)
    #: unit -> the files its unit file names (read_unit_file's paths).
    paths: dict[str, list[PathFact]] = field(default_factory=dict)
    #: unit -> its environment (Environment= of its unit file).
    environment: dict[str, list[str]] = field(default_factory=dict)
    #: unit -> its filesystems (disk_usage); by default one with room.
    disks: dict[str, list[Usage]] = field(default_factory=dict)
    #: Every TCP listener on the host (list_listeners filters by port).
    listening: list[Listener] = field(default_factory=list)
    #: unit -> its processes (read_process_state); by default its main process, sleeping.
    processes: dict[str, list[ProcessInfo]] = field(default_factory=dict)
    #: The connections between units now (read_connections); None: the host does not
    #: offer the tool (the recorded hosts before it).
    connections: list[Edge] | None = None
    #: What units are configured to reach (read_config_edges); None: not offered.
    configured: list[ConfigEdge] | None = None
    #: The last-known-good snapshot (read_baseline); None: not offered.
    baseline: Snapshot | None = None
    #: unit -> what changed for it since the host was healthy (read_changes); None: the
    #: tool is not offered; a unit not in it: nothing changed.
    changes: dict[str, Changes] | None = None
    #: unit -> its descriptors and tasks against their limits (read_limits); None: not
    #: offered; a unit not in it: far from its limits.
    limits: dict[str, Limits] | None = None
    #: unit -> the certificates it is configured with (read_certificates); None: not
    #: offered; a unit not in it: names none.
    certificates: dict[str, Certificates] | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, show: str, journal: Sequence[tuple[str, str, str, str]] = ()) -> RecordedHost:
        [props] = parse_show(show)
        self.shows[props["Id"]] = show
        if journal:
            self.journals[props["Id"]] = list(journal)
        return self

    def props(self, unit: str) -> dict[str, str]:
        if unit not in self.shows:
            raise ToolError(f"unit {unit} not found")
        [props] = parse_show(self.shows[unit])
        return props

    def status(self, unit: str) -> UnitStatus:
        props = self.props(unit)
        unhealthy = []
        for relation, key in (("Requires", "Requires"), ("BindsTo", "BindsTo")):
            for dep in props.get(key, "").split():
                if dep in self.shows:
                    dep_props = self.props(dep)
                    if dep_props["ActiveState"] in ("failed", "inactive"):
                        unhealthy.append(
                            DependencyState(
                                unit=dep,
                                relation=relation,  # type: ignore[arg-type]
                                load_state=dep_props["LoadState"],
                                active_state=dep_props["ActiveState"],
                                sub_state=dep_props["SubState"],
                            )
                        )
        return parse_unit_status(props, unhealthy)

    def unit_file(self, unit: str) -> UnitFile:
        props = self.props(unit)
        return UnitFile(
            unit=unit,
            files=[props["FragmentPath"]] if props.get("FragmentPath") else [],
            user=props.get("User") or "root",
            started_at=parse_timestamp(props.get("ExecMainStartTimestamp", "")),
            environment=self.environment.get(unit, []),
            text=f"# {props.get('FragmentPath', '')}\n[Service]\n",
            paths=self.paths.get(unit, []),
        )

    def process_state(self, unit: str) -> ProcessState:
        props = self.props(unit)
        main = int(props.get("MainPID") or 0)
        default = (
            [
                ProcessInfo(
                    pid=main,
                    role="main",
                    visible=True,
                    comm="app",
                    state="S",
                    state_words="sleeping",
                    threads=1,
                )
            ]
            if main
            else []
        )
        return ProcessState(
            unit=unit,
            active_state=props["ActiveState"],
            sub_state=props["SubState"],
            watched_ms=200,
            processes=self.processes.get(unit, default),
        )

    def failed_units(self) -> FailedUnits:
        rows = [self.props(u) for u in self.shows]
        return FailedUnits(
            units=[
                FailedUnit(
                    unit=p["Id"],
                    load=p["LoadState"],
                    active=p["ActiveState"],
                    sub=p["SubState"],
                    description=p["Id"],
                )
                for p in rows
                if p["ActiveState"] == "failed"
            ]
        )

    def tools(self) -> dict[str, Tool]:
        def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
            """Recorded read_unit_status."""
            self.calls.append(("read_unit_status", args.model_dump()))
            return self.status(args.unit)

        def tail_journal(args: JournalArgs, context: ToolContext) -> JournalTail:
            """Recorded tail_journal."""
            self.calls.append(("tail_journal", args.model_dump()))
            rows = self.journals.get(args.unit, [])[-args.lines :]
            newest_first = list(reversed(journal_lines(rows)))
            return fit(args.unit, args.since, newest_first, TOOL_OUTPUT_BUDGET)

        def http_get_health(args: HealthArgs, context: ToolContext) -> HealthResult:
            """Recorded http_get_health."""
            self.calls.append(("http_get_health", args.model_dump()))
            if args.target not in self.health:
                raise ToolError(f"unknown health target {args.target!r}")
            return self.health[args.target]

        def list_failed_units(args: NoArgs, context: ToolContext) -> FailedUnits:
            """Recorded list_failed_units."""
            self.calls.append(("list_failed_units", args.model_dump()))
            return self.failed_units()

        def read_unit_file(args: UnitFileArgs, context: ToolContext) -> UnitFile:
            """Recorded read_unit_file."""
            self.calls.append(("read_unit_file", args.model_dump()))
            return self.unit_file(args.unit)

        def disk_usage(args: DiskArgs, context: ToolContext) -> DiskUsage:
            """Recorded disk_usage."""
            self.calls.append(("disk_usage", args.model_dump()))
            self.props(args.unit)
            roomy = [
                Usage(
                    path="/var",
                    role="its working directory",
                    exists=True,
                    size_bytes=10**10,
                    free_bytes=6 * 10**9,
                    used_percent=40.0,
                    free_inodes=10**5,
                )
            ]
            return DiskUsage(unit=args.unit, directories=self.disks.get(args.unit, roomy))

        def list_listeners(args: ListenersArgs, context: ToolContext) -> Listeners:
            """Recorded list_listeners."""
            self.calls.append(("list_listeners", args.model_dump()))
            wanted = [x for x in self.listening if args.port in (None, x.port)]
            return Listeners(port=args.port, listeners=wanted)

        def read_process_state(args: ProcessArgs, context: ToolContext) -> ProcessState:
            """Recorded read_process_state."""
            self.calls.append(("read_process_state", args.model_dump()))
            return self.process_state(args.unit)

        def read_connections(args: ConnectionsArgs, context: ToolContext) -> Connections:
            """Recorded read_connections."""
            self.calls.append(("read_connections", args.model_dump()))
            edges = [e for e in self.connections or [] if args.unit in (None, e.client, e.server)]
            return Connections(unit=args.unit, listeners=[], edges=edges)

        def read_config_edges(args: ConfigEdgesArgs, context: ToolContext) -> ConfigEdges:
            """Recorded read_config_edges."""
            self.calls.append(("read_config_edges", args.model_dump()))
            edges = [e for e in self.configured or [] if args.unit in (None, e.client, e.server)]
            return ConfigEdges(
                unit=args.unit, edges=edges, unreadable=[], units_read=len(self.shows)
            )

        def read_baseline(args: BaselineArgs, context: ToolContext) -> Baseline:
            """Recorded read_baseline."""
            self.calls.append(("read_baseline", args.model_dump()))
            snap = self.baseline
            assert snap is not None
            return Baseline(
                unit=args.unit,
                taken_at=snap.taken_at,
                snapshots=1,
                units=snap.units,
                listeners=snap.listeners,
                edges=snap.edges,
                health=snap.health,
            )

        def read_changes(args: ChangesArgs, context: ToolContext) -> Changes:
            """Recorded read_changes."""
            self.calls.append(("read_changes", args.model_dump()))
            self.props(args.unit)
            nothing = Changes(
                unit=args.unit, since=None, since_what="", changes=[], need_daemon_reload=False
            )
            return (self.changes or {}).get(args.unit, nothing)

        def read_limits(args: LimitsArgs, context: ToolContext) -> Limits:
            """Recorded read_limits."""
            self.calls.append(("read_limits", args.model_dump()))
            props = self.props(args.unit)
            roomy = Limits(
                unit=args.unit,
                active_state=props["ActiveState"],
                open_files=None,
                fd_table=64,
                files_limit=1024,
                tasks=3,
                tasks_limit=4915,
                tasks_refused=0,
            )
            return (self.limits or {}).get(args.unit, roomy)

        def read_certificates(args: CertificatesArgs, context: ToolContext) -> Certificates:
            """Recorded read_certificates."""
            self.calls.append(("read_certificates", args.model_dump()))
            self.props(args.unit)
            none = Certificates(unit=args.unit, certificates=[])
            return (self.certificates or {}).get(args.unit, none)

        # The tools a host recorded before they existed does not offer.
        optional = {
            "read_certificates": (
                self.certificates,
                make_tool(CertificatesArgs, read_certificates),
            ),
            "read_limits": (self.limits, make_tool(LimitsArgs, read_limits)),
            "read_changes": (self.changes, make_tool(ChangesArgs, read_changes)),
            "read_connections": (self.connections, make_tool(ConnectionsArgs, read_connections)),
            "read_config_edges": (self.configured, make_tool(ConfigEdgesArgs, read_config_edges)),
            "read_baseline": (self.baseline, make_tool(BaselineArgs, read_baseline)),
        }
        return {
            **{name: tool for name, (facts, tool) in optional.items() if facts is not None},
            "read_unit_status": make_tool(UnitArgs, read_unit_status),
            "tail_journal": make_tool(JournalArgs, tail_journal),
            "http_get_health": make_tool(HealthArgs, http_get_health),
            "list_failed_units": make_tool(NoArgs, list_failed_units),
            "read_unit_file": make_tool(UnitFileArgs, read_unit_file),
            "disk_usage": make_tool(DiskArgs, disk_usage),
            "list_listeners": make_tool(ListenersArgs, list_listeners),
            "read_process_state": make_tool(ProcessArgs, read_process_state),
        }

    def tools_named(self, *names: str) -> dict[str, Tool]:
        """Only the tools ``names`` (a host offering fewer tools)."""
        return {name: tool for name, tool in self.tools().items() if name in names}


def health(
    target: str,
    unit: str | None,
    outcome: str,
    status: int | None = None,
    body: str = "",
    expected: int = 200,
    url: str | None = None,
) -> HealthResult:
    """A HealthResult as http_get_health builds it."""
    error = {
        "timeout": "no answer within 2 s (ReadTimeout)",
        "connection_refused": "ConnectError: [Errno 111] Connection refused",
    }.get(outcome)
    return HealthResult(
        target=target,
        url=url or f"http://127.0.0.1/{target}",
        unit=unit,
        outcome=outcome,  # type: ignore[arg-type]
        status=status,
        expected_status=expected,
        latency_ms=3 if status is not None else None,
        body_excerpt=body,
        error=error,
    )


def recent(minutes: int = 5) -> str:
    """An ISO time ``minutes`` ago."""
    return (datetime.now(UTC) - timedelta(minutes=minutes)).isoformat()
