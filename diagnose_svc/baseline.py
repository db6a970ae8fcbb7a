"""The last-known-good baseline: the host as it was the last time everything in scope was
healthy, for a diagnosis to compare with.

A backend that is down now has no connections and no listener; an hour ago, while the
host was healthy, it had both. ``opsbot-diagnose baseline`` (and each run of
``opsbot-diagnose verify``, first: every 2 minutes, and after each apply) takes a
snapshot only when every unit in scope is up and every health target answers: each
unit's state, the listeners by unit, the observed and configured edges, and the health
answers. Snapshots live in ``/var/lib/opsbot-diagnose/baseline/``
(``StateDirectory=opsbot-diagnose``, 0700, the diagnose user's alone; see
``tools/_baseline_store``).

It is evidence for a diagnosis, never for the executor, which trusts nothing here: a
diagnose process could write anything in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from diagnose_svc.tools import (
    HealthArgs,
    HealthResult,
    Tool,
    ToolArgs,
    ToolContext,
    UnitArgs,
    UnitStatus,
)
from diagnose_svc.tools._baseline_store import (
    MAX_ENTRIES,
    BaselineEdge,
    BaselineListener,
    Snapshot,
    save,
)
from diagnose_svc.tools.read_config_edges import ConfigEdges, ConfigEdgesArgs
from diagnose_svc.tools.read_connections import Connections, ConnectionsArgs
from shared_schema import DiagnoseSettings, denied_reason, is_valid_unit_name

_Entry = TypeVar("_Entry", BaselineEdge, BaselineListener)


def snapshot(
    taken_at: datetime,
    statuses: Iterable[UnitStatus],
    health: Iterable[HealthResult],
    connections: Connections | None,
    configured: ConfigEdges | None,
    judged: set[str] | None = None,
) -> Snapshot | str:
    """The snapshot of a healthy host, or why the host is not healthy now (a string):
    every unit of ``judged`` (all of ``statuses`` when None) must be up; the others are
    recorded as they are."""
    units: dict[str, str] = {}
    for status in statuses:
        state = f"{status.active_state}/{status.sub_state}"
        if _unhealthy(status) and (judged is None or status.unit in judged):
            return f"{status.unit} is {state} (Result={status.result})"
        units[status.unit] = state
    answers: dict[str, int] = {}
    for result in health:
        if result.outcome != "ok" or result.status is None:
            return f"health target {result.target} {result.outcome}"
        answers[result.target] = result.status
    edges: list[BaselineEdge | None] = []
    listeners: list[BaselineListener | None] = []
    if connections is not None:
        for edge in connections.edges:
            if edge.server:
                edges.append(
                    _entry(
                        BaselineEdge,
                        client=edge.client,
                        server=edge.server,
                        endpoint=edge.where,
                        source="observed",
                    )
                )
        for listener in connections.listeners:
            if listener.unit:
                listeners.append(
                    _entry(BaselineListener, unit=listener.unit, endpoint=listener.where)
                )
    if configured is not None:
        for c in configured.edges:
            edges.append(
                _entry(
                    BaselineEdge,
                    client=c.client,
                    server=c.server,
                    endpoint=c.endpoint,
                    source="configured",
                )
            )
    unique = {(e.client, e.server, e.endpoint): e for e in edges if e is not None}
    return Snapshot(
        taken_at=taken_at,
        units=dict(sorted(units.items())[:MAX_ENTRIES]),
        listeners=sorted(
            (x for x in listeners if x is not None), key=lambda x: (x.unit, x.endpoint)
        )[:MAX_ENTRIES],
        edges=sorted(unique.values(), key=lambda e: (e.client, e.server, e.endpoint))[:MAX_ENTRIES],
        health=dict(sorted(answers.items())[:MAX_ENTRIES]),
    )


def _entry(kind: type[_Entry], **fields: str) -> _Entry | None:
    """An edge or a listener as a snapshot keeps it, or None for one it cannot keep (a
    name systemd's grammar refuses, an endpoint that is not one printable line): a
    snapshot is read back only in that shape (tools/_baseline_store)."""
    try:
        return kind.model_validate(fields)
    except ValidationError:
        return None


def _unhealthy(status: UnitStatus) -> bool:
    """Failed, stopped by a failure, or restarting after one (a oneshot that ran to
    success and a service stopped on purpose are fine)."""
    if status.active_state == "failed":
        return True
    if status.active_state == "inactive":
        return status.result != "success"
    return status.crash_looping


def read_host(
    settings: DiagnoseSettings,
    units: Iterable[str],
    tools: Mapping[str, Tool],
    now: datetime | None = None,
) -> Snapshot | str:
    """The host as the read tools see it now: the snapshot, or why it is not healthy."""
    context = ToolContext(settings=settings, moment={})  # one reading of the sockets

    def read(tool: str, args: ToolArgs) -> Any:
        return tools[tool].answer(args, context)

    connections = read("read_connections", ConnectionsArgs())
    configured = read("read_config_edges", ConfigEdgesArgs())
    for answer in (connections, configured):
        if isinstance(answer, str):
            return f"the edges could not be read: {answer}"
    units = list(units)
    named = [*units, *connections.related_units(), *configured.related_units()]
    wanted = [
        u for u in dict.fromkeys(named) if is_valid_unit_name(u) and denied_reason(u) is None
    ][:64]
    statuses = []
    for unit in wanted:
        status = read("read_unit_status", UnitArgs(unit=unit))
        if isinstance(status, str):
            return f"{unit}: {status}"
        statuses.append(status)
    health = []
    for target in settings.health:
        result = read("http_get_health", HealthArgs(target=target))
        if isinstance(result, str):
            return f"health target {target}: {result}"
        health.append(result)
    judged = set(units)
    return snapshot(now or datetime.now(UTC), statuses, health, connections, configured, judged)


Reader = Callable[[], Snapshot | str]


def take(read: Reader, where: Path | None = None) -> str:
    """Take a snapshot if the host is healthy: what was done, in words."""
    found = read()
    if isinstance(found, str):
        return f"no baseline taken: the host is not healthy now ({found})"
    try:
        written = save(found, where)
    except OSError as exc:  # a full disk, a directory removed under it: verify goes on
        return f"no baseline kept: {exc.filename or 'the baseline directory'}: {exc.strerror}"
    units, edges = len(found.units), len(found.edges)
    what = f"{units} units, {edges} edges, {len(found.health)} health answers"
    if written is None:
        return f"baseline unchanged ({what}); its time moved to {found.taken_at:%H:%M:%S} UTC"
    return f"baseline taken: {written} ({what})"
