"""read_baseline: the host as it was the last time everything in scope was healthy
(diagnose_svc/baseline.py takes the snapshots, _baseline_store keeps them): which unit
listened where, which reached which, each unit's state and each health target's answer.
A backend that is down now has no listener and no connection; the baseline still knows
who needed it."""

from __future__ import annotations

from datetime import datetime

from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._baseline_store import BaselineEdge, BaselineListener, load
from diagnose_svc.tools._registry import HostToolArgs, ToolContext, ToolOutput, read_tool


class BaselineArgs(HostToolArgs):
    gives = "baseline"


class Baseline(ToolOutput):
    """The last-known-good host: the newest healthy snapshot's time, units and health,
    and the edges and listeners of every snapshot kept (a connection seen once while
    healthy is a dependency)."""

    unit: str | None
    taken_at: datetime | None
    snapshots: int
    units: dict[str, str]
    listeners: list[BaselineListener]
    edges: list[BaselineEdge]
    health: dict[str, int]
    omitted: int = 0

    def summary(self) -> str:
        if self.taken_at is None:
            return "no baseline: the host was never seen healthy in the last 3 days"
        edges = "; ".join(
            f"{e.client} -> {e.server} at {e.endpoint} ({e.source})" for e in self.edges[:5]
        )
        return (
            f"last healthy {self.taken_at:%Y-%m-%d %H:%M:%S} UTC ({self.snapshots} snapshots): "
            f"{len(self.units)} units up, {len(self.edges)} edges" + (f": {edges}" if edges else "")
        )

    def related_units(self) -> list[str]:
        return list(dict.fromkeys(u for e in self.edges for u in (e.client, e.server)))


def _fit(out: Baseline) -> Baseline:
    dropped = 0
    while len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET:
        units, listeners, edges = dict(out.units), list(out.listeners), list(out.edges)
        if len(units) > 1:
            units.pop(next(iter(reversed(units))))
        elif listeners:
            listeners.pop()
        elif edges:
            edges.pop()
        else:
            break
        dropped += 1
        out = out.model_copy(
            update={"units": units, "listeners": listeners, "edges": edges, "omitted": dropped}
        )
    return out


@read_tool(BaselineArgs)
def read_baseline(args: BaselineArgs, context: ToolContext) -> Baseline:
    """The host when last seen healthy (kept 3 days): which unit listened where, which
    reached which, each unit's state then. A backend down now has no connections; the
    baseline shows who needed it. With ``unit``, only what concerns it.
    """
    kept = load()
    if not kept:
        return Baseline(
            unit=args.unit, taken_at=None, snapshots=0, units={}, listeners=[], edges=[], health={}
        )
    newest = kept[0]
    edges = {(e.client, e.server, e.endpoint): e for snap in kept for e in snap.edges}
    listeners = {(x.unit, x.endpoint): x for snap in kept for x in snap.listeners}
    units = dict(newest.units)
    if args.unit:
        wanted = args.unit
        edges = {k: e for k, e in edges.items() if wanted in (e.client, e.server)}
        listeners = {k: x for k, x in listeners.items() if x.unit == wanted}
        units = {u: s for u, s in units.items() if u == wanted or any(u in k for k in edges)}
    return _fit(
        Baseline(
            unit=args.unit,
            taken_at=newest.taken_at,
            snapshots=len(kept),
            units=units,
            listeners=list(listeners.values()),
            edges=list(edges.values()),
            health=newest.health,
        )
    )
