"""The service graph as the findings show it: what depends on what, what is in scope,
what is failing and where the fault may be, and what systemd stopped with a unit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

from diagnose_svc.policies import leads
from diagnose_svc.policies.findings import Findings
from diagnose_svc.policies.runbook import queues, resources
from diagnose_svc.policies.runbook.constants import DOWN, RUNNING, STOPPED_WITH
from diagnose_svc.policies.runbook.words import cut, ended, health_words, loop_words
from diagnose_svc.tools import HealthResult, UnitStatus
from shared_schema import DiagnoseSettings, denied_reason


class View:
    """The service graph as the findings show it: states, health, processes, files."""

    def __init__(self, settings: DiagnoseSettings, found: Findings, entry: str) -> None:
        self.settings = settings
        self.found = found
        self.entry = entry

    # -- the graph ------------------------------------------------------------------------

    def status(self, unit: str) -> UnitStatus | None:
        return self.found.status.get(unit)

    def targets_of(self, unit: str) -> list[str]:
        return sorted(n for n, t in self.settings.health.items() if t.unit == unit)

    def port_of(self, unit: str) -> int | None:
        for name in self.targets_of(unit):
            port = urlsplit(str(self.settings.health[name].url)).port
            if port is not None:
                return port
        return None

    def own_ports(self, unit: str) -> list[int]:
        """The ports ``unit`` listens on when it serves: its health target's, and those
        it held when the host was last seen healthy (the baseline's listeners)."""
        ports = [p] if (p := self.port_of(unit)) is not None else []
        for base in self.found.baseline.values():
            for listener in base.listeners if base.taken_at is not None else ():
                if listener.unit == unit:
                    _, _, number = listener.endpoint.rpartition(":")
                    if number.isdigit():
                        ports.append(int(number))
        return list(dict.fromkeys(ports))

    def health(self, unit: str) -> list[HealthResult]:
        return [self.found.health[t] for t in self.targets_of(unit) if t in self.found.health]

    def deps(self, unit: str) -> list[str]:
        """What ``unit`` depends on: its BindsTo=, Requires= and Wants=, the units it is
        connected to now, and any service it is ordered After= that systemd reports
        failed (ordering alone is no need).
        Units opsbot never acts on (systemd's own) are left out unless they failed."""
        status = self.status(unit)
        if status is None:
            # Not read yet: what a read tool saw it reach (no unit file needed for that).
            linked = [
                u for u in self.observed(unit) if denied_reason(u) is None and not self.gone(u)
            ]
            return [u for u in dict.fromkeys(linked) if u != unit and _service_like(u)]
        sockets = [u for u in status.triggered_by if u.endswith(".socket")]
        named = [
            *status.binds_to,
            *status.requires,
            *sockets,
            *status.wants,
            *self.observed(unit),
        ]
        named += self.drains(unit)
        named = [u for u in named if denied_reason(u) is None and not self.gone(u)]
        named += [d.unit for d in status.unhealthy_dependencies]
        return [u for u in dict.fromkeys(named) if u != unit and _service_like(u)]

    def drains(self, unit: str) -> list[str]:
        """The units that drain ``unit``'s queue, when its answers say it backs up
        (queues.py)."""
        return queues.drains(self.found, self.links(), unit)

    def gone(self, unit: str) -> bool:
        """systemd knows no such unit now (an edge the baseline kept of one removed since)."""
        error = self.found.error("read_unit_status", unit)
        return error is not None and "not found" in error

    def observed(self, unit: str) -> list[str]:
        """The units ``unit`` is connected to now (read_connections), configured to reach
        (read_config_edges), or reached when the host was last healthy (read_baseline): a
        dependency no unit file declares, such as a proxy's upstream or an app's database
        by its port, even while that is down."""
        return [server for client, server, _ in self.links() if client == unit]

    def links(self, baseline: bool = True) -> Iterator[tuple[str, str, str]]:
        """(client, server, why in words) of every edge a read tool gave: observed,
        configured, then the baseline's (only with ``baseline``)."""
        for connections in self.found.connections.values():
            for edge in connections.edges:
                if edge.server:
                    yield (
                        edge.client,
                        edge.server,
                        f"{edge.client} is connected to {edge.server} at {edge.where}",
                    )
        for edges in self.found.configured.values():
            for c in edges.edges:
                yield (
                    c.client,
                    c.server,
                    f"{c.client} is configured to reach {c.endpoint} ({c.source}), where "
                    f"{c.server} {c.how}",
                )
        for base in self.found.baseline.values() if baseline else ():
            for e in base.edges if base.taken_at is not None else ():
                yield (
                    e.client,
                    e.server,
                    f"when the host was last healthy ({base.taken_at:%Y-%m-%d %H:%M} UTC) "
                    f"{e.client} reached {e.server} at {e.endpoint} ({e.source})",
                )

    def changed(self, unit: str) -> str:
        """What changed for ``unit`` since the host was healthy, in words (resources.py)."""
        return resources.changed(self.found, unit)

    def since_healthy(self, unit: str) -> str:
        """What changed for ``unit`` since the host was last healthy, in words ('' when
        no baseline knew it, or nothing changed)."""
        for base in self.found.baseline.values():
            was, status = base.units.get(unit), self.status(unit)
            if base.taken_at is None or was is None or status is None:
                continue
            now = f"{status.active_state}/{status.sub_state}"
            if now == was:
                return ""
            listened = [x.endpoint for x in base.listeners if x.unit == unit]
            clients = sorted({e.client for e in base.edges if e.server == unit})
            parts = [f"{unit} was {was}"]
            if listened:
                parts.append(f"listening on {', '.join(listened[:3])}")
            if clients:
                parts.append(f"reached by {', '.join(clients[:4])}")
            return (
                f"Last healthy {base.taken_at:%Y-%m-%d %H:%M} UTC: {', '.join(parts)}; "
                f"now it is {now}."
            )
        return ""

    def why_needed(self, unit: str, baseline: bool = True) -> str:
        """How a unit in scope counts on ``unit`` when no unit file says so, in words
        ('' when a unit file does, or nothing in scope does; the baseline's edges only
        with ``baseline``)."""
        for client in self.scope():
            status = self.status(client)
            if client == unit or status is None:
                continue
            if unit in (*status.binds_to, *status.requires, *status.wants):
                return ""
            words = next(
                (w for c, srv, w in self.links(baseline) if (c, srv) == (client, unit)), None
            )
            if words:
                return f"No unit file declares it, but {words}."
        return ""

    def unhealthy_deps(self, unit: str) -> list[str]:
        status = self.status(unit)
        return [d.unit for d in status.unhealthy_dependencies] if status else []

    def closure(self, unit: str, limit: int = 24) -> list[str]:
        """``unit`` and everything it depends on, as far as states were read or a read
        tool saw an edge."""
        seen: dict[str, None] = {unit: None}
        todo = [unit]
        unhealthy = self.unhealthy_deps_all()
        while todo and len(seen) < limit:
            current = todo.pop(0)
            linked = {*self.observed(current), *self.drains(current)}
            for dep in self.deps(current):
                # A unit read, one systemd reports unhealthy, or one a read tool saw this
                # one reach (an edge needs no state read to be followed).
                if dep not in seen and (
                    dep in self.found.status or dep in unhealthy or dep in linked
                ):
                    seen[dep] = None
                    todo.append(dep)
        return list(seen)

    def unhealthy_deps_all(self) -> set[str]:
        return {d for u in self.found.status for d in self.unhealthy_deps(u)}

    def failing_targets(self) -> list[HealthResult]:
        return [h for h in self.found.health.values() if h.outcome != "ok"]

    def scope(self) -> list[str]:
        """The units this diagnosis is about: the entry's dependencies (declared,
        observed, configured), and, when health fails among them with no fault of their
        own that systemd or /proc shows, the units behind every failing health target (a
        proxy's upstream nothing links to it; the fallback when no edge is known). A unit
        down on its own, unlinked to the entry, is a stranger: named, never planned for."""
        units = self.closure(self.entry)
        relayed = any(self.health_failing(u) for u in units) and not any(
            self.hard_fault(u) for u in units if self.failing(u) and u in self.found.status
        )
        if relayed:
            for result in self.failing_targets():
                if result.unit:
                    units += [u for u in self.closure(result.unit) if u not in units]
        return units

    def strangers(self, limit: int = 6) -> list[str]:
        """Failing units this diagnosis found outside the entry's chain (failed units,
        units behind failing health targets): named in its verdict, never planned for."""
        scope = set(self.scope())
        seen = [*self.found.failed_units(), *(h.unit for h in self.failing_targets() if h.unit)]
        return [u for u in dict.fromkeys(seen) if u not in scope][:limit]

    # -- what is wrong with a unit --------------------------------------------------------

    def health_failing(self, unit: str) -> list[HealthResult]:
        return [h for h in self.health(unit) if h.outcome != "ok"]

    def running(self, unit: str) -> bool:
        status = self.status(unit)
        return status is not None and status.active_state in RUNNING

    def process_stuck(self, unit: str) -> str | None:
        state = self.found.process.get(unit)
        if state is None:
            return None
        for p in state.processes:
            if p.visible and p.state in ("T", "t", "Z"):
                return f"its {p.role} process {p.pid} ({p.comm}) is {p.state_words}"
        return None

    def reload_failed(self, unit: str) -> str | None:
        status = self.status(unit)
        if status is not None and status.reload_result not in ("success", ""):
            return f"ReloadResult={status.reload_result}"
        tail = self.found.journal.get(unit)
        line = leads.reload_failed(tail) if tail is not None else None
        return f'systemd: "{cut(line.message, 160)}"' if line is not None else None

    def ran_out(self, unit: str) -> tuple[str, str] | None:
        """What ``unit``, which runs, ran out of, confirmed by the present (resources.py)."""
        return resources.ran_out(self.found, self.status(unit), unit)

    def failing(self, unit: str) -> str | None:
        """Why ``unit`` counts as failing, in facts; None when it does not."""
        status = self.status(unit)
        if status is None:
            return None
        if status.load_state != "loaded":
            return f"LoadState={status.load_state}"
        if status.active_state == "failed":
            return f"failed ({ended(status)})"
        if status.active_state == "inactive":
            if status.result == "success" and self.on_demand(status):
                return None  # socket-activated, idle: it starts on the next connection
            return f"inactive ({ended(status)})"
        if status.crash_looping:
            return loop_words(status)
        if status.active_state in ("activating", "deactivating"):
            return f"{status.active_state}/{status.sub_state}"
        stuck = self.process_stuck(unit)
        if stuck:
            return stuck
        bad = self.health_failing(unit)
        if bad:
            return "; ".join(f"health target {h.target} {health_words(h)}" for h in bad)
        failed_reload = self.reload_failed(unit)
        if failed_reload:
            return f"its last reload failed ({failed_reload})"
        ran_out = self.ran_out(unit)
        if ran_out:
            return f"it ran out of {ran_out[0]}: {ran_out[1]}"
        return queues.stale_drain(self.found, self.links(), unit)

    def on_demand(self, status: UnitStatus) -> bool:
        """A socket unit that starts ``status``'s unit on a connection is listening."""
        return any(
            (s := self.status(socket)) is not None and s.active_state in RUNNING
            for socket in status.triggered_by
            if socket.endswith(".socket")
        )

    def hard_fault(self, unit: str) -> bool:
        """A fault systemd or /proc shows: down, not loaded, stuck, a failed reload."""
        if not self.running(unit):
            return True
        return bool(self.process_stuck(unit) or self.reload_failed(unit))

    def silent(self, unit: str) -> bool:
        """Its health target does not answer at all (times out, refuses), as against
        answering an error it relays from upstream."""
        return any(h.outcome not in ("ok", "unexpected_status") for h in self.health(unit))

    def candidates(self) -> list[str]:
        """The deepest failing units in scope whose own dependencies are healthy: where
        the fault may be (each is read for how it fails)."""
        scope = self.scope()
        failing = [u for u in scope if self.failing(u)]
        unread = [u for u in self.unhealthy_deps_all() if u in scope and u not in self.found.status]
        failing += unread
        return [u for u in failing if not any(d in failing for d in self.deps(u))]

    def roots(self) -> list[str]:
        """The candidates the fault is in. Those with a fault systemd or /proc shows come
        first; then those that do not answer at all (several of them, when nothing shows
        which waits on which: decide() hands those to a human); then those that only
        answer errors (a relay's 502 is not its own fault while another does not answer)."""
        candidates = self.candidates()
        unread = [u for u in candidates if u not in self.found.status]
        hard = [u for u in candidates if u in unread or self.hard_fault(u)]
        if hard:
            return hard
        silent = [u for u in candidates if self.silent(u)]
        return silent or candidates

    def dependents(self, unit: str) -> list[str]:
        """The units that depend on ``unit`` so that systemd stops them with it: its
        BoundBy= and RequiredBy=, and any unit read whose BindsTo= or Requires= names it
        (systemd forgets the reverse edges of a dependent it unloaded once inactive), of
        those opsbot may act on."""
        status = self.status(unit)
        if status is None:
            return []
        named = [*status.bound_by, *status.required_by]
        named += [u for u, s in self.found.status.items() if unit in (*s.binds_to, *s.requires)]
        return [
            u
            for u in dict.fromkeys(named)
            if u != unit and _service_like(u) and denied_reason(u) is None
        ]

    def taken_down(self, unit: str) -> list[str]:
        """The units systemd stopped because ``unit`` stopped, as far as they were read:
        each depends on the one before it (BindsTo=, Requires=) and is down now; and it
        went down within STOPPED_WITH seconds after that one stopped being active, or,
        when systemd has unloaded it since (an inactive unit keeps no timestamps), it
        stopped cleanly (Result=success) and ``unit`` crashed since (NRestarts>0)."""
        first = self.status(unit)
        if first is None:
            return []
        out: list[str] = []
        todo = [unit]
        while todo and len(out) < 24:
            parent = self.status(todo.pop(0))
            if parent is None:
                continue
            for dep in self.dependents(parent.unit):
                status = self.status(dep)
                if status is None or dep in out or dep == unit:
                    continue
                if status.load_state != "loaded" or status.active_state not in DOWN:
                    continue
                went, left = status.inactive_enter_timestamp, parent.active_exit_timestamp
                if went is not None and left is not None:
                    with_it = -1.0 <= (went - left).total_seconds() <= STOPPED_WITH
                else:
                    with_it = went is None and status.result == "success" and first.n_restarts > 0
                if with_it:
                    out.append(dep)
                    todo.append(dep)
        return out

    def dependents_down(self, root: str, roots: Sequence[str]) -> list[str]:
        """Units in scope that are down because of ``root`` (they depend on it, at any
        depth), dependencies first: they must start again after it."""
        down = []
        for unit in self.scope():
            status = self.status(unit)
            if unit in roots or status is None:
                continue
            if status.active_state not in DOWN and status.active_state != "deactivating":
                continue
            if status.load_state != "loaded" or root not in self.closure(unit):
                continue
            down.append(unit)
        down += [u for u in self.taken_down(root) if u not in down and u not in roots]
        return self.start_order(down)

    def start_order(self, units: list[str]) -> list[str]:
        """``units`` so that each comes after those of them it depends on."""
        placed: list[str] = []
        todo = list(units)
        while todo:
            ready = [u for u in todo if not any(d in todo for d in self.closure(u)[1:])]
            nxt = ready[0] if ready else todo[0]
            placed.append(nxt)
            todo.remove(nxt)
        return placed


def _service_like(unit: str) -> bool:
    return unit.endswith((".service", ".socket", ".timer", ".mount", ".path"))
