"""What to read next, breadth first: the unit asked about, the failed units, every
health target and the connections between units; then the state of everything failing in
scope and of what it depends on; then how the root candidates fail; then what systemd
stopped with the root."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from diagnose_svc.limits import MAX_CALLS_PER_STEP
from diagnose_svc.policies import leads
from diagnose_svc.policies.findings import Findings, call_key
from diagnose_svc.policies.runbook import certificates
from diagnose_svc.policies.runbook.constants import JOURNAL_LINES, MAX_DEPENDENCIES, RUNNING
from diagnose_svc.policies.runbook.last_run import address_ports
from diagnose_svc.policies.runbook.view import View
from shared_schema import DiagnoseSettings


@dataclass(frozen=True)
class Read:
    """A tool call the runbook wants."""

    tool: str
    args: dict[str, Any]

    @property
    def key(self) -> str:
        return call_key(self.tool, self.args)


def next_reads(
    settings: DiagnoseSettings, unit: str, found: Findings, available: set[str]
) -> list[Read]:
    """The wanted reads not yet made, among the tools available, for one step."""
    picked: dict[str, Read] = {}
    for read in _wanted(settings, unit, found):
        if read.key in found.asked or read.tool not in available or read.key in picked:
            continue
        picked[read.key] = read
        if len(picked) >= MAX_CALLS_PER_STEP:
            break
    return list(picked.values())


def _wanted(settings: DiagnoseSettings, entry: str, found: Findings) -> Iterator[Read]:
    view = View(settings, found, entry)
    yield Read("read_unit_status", {"unit": entry})
    yield Read("list_failed_units", {})
    own = view.targets_of(entry)
    for name in own + sorted(n for n in settings.health if n not in own):
        yield Read("http_get_health", {"target": name})
    # Who talks to whom now: the dependencies no unit file declares.
    yield Read("read_connections", {})
    yield Read("read_config_edges", {})
    yield Read("read_baseline", {})
    status = view.status(entry)
    if status is None or status.load_state != "loaded":
        return  # decided from the state alone (or from the error reading it)
    # The graph first: the state of everything that may be failing, in scope, and of
    # what it depends on.
    suspects = _suspects(view, found)
    for unit in view.deps(entry)[:MAX_DEPENDENCIES]:
        yield Read("read_unit_status", {"unit": unit})
    for unit in suspects:
        yield Read("read_unit_status", {"unit": unit})
    for unit in suspects:
        for dep in view.deps(unit)[:MAX_DEPENDENCIES]:
            yield Read("read_unit_status", {"unit": dep})
    # Then how the root candidates fail: the deepest failing units whose own
    # dependencies are healthy, as far as the graph is known.
    for root in view.candidates():
        unread = [
            d
            for d in view.deps(root)[:MAX_DEPENDENCIES]
            if d not in found.status and found.error("read_unit_status", d) is None
        ]
        if unread:
            continue  # what it depends on is read first: the root may be deeper
        yield from evidence(view, root)
    # What systemd stopped with the root (or with the unit asked about, when it runs
    # again): the units that depend on it, and theirs, while they are down.
    for unit in view.roots() or [entry]:
        yield from _taken_down_reads(view, unit)
    scope = set(view.scope())
    for unit in suspects:
        # A stranger's chain (a failing target elsewhere, while the entry's chain is not
        # failing through it) is named in the verdict, never diagnosed in this one.
        if unit in scope and view.running(unit) and not view.silent(unit):
            for dep in view.deps(unit)[:MAX_DEPENDENCIES]:
                if view.running(dep):
                    # It relays an error and what it depends on looks fine: is that
                    # dependency's process stopped behind an "active" state?
                    yield Read("read_process_state", {"unit": dep})
    # The unit asked about runs and shows nothing wrong to systemd or its health targets
    # (a worker with no port and no target): its own output may say it ran out of
    # something, which the present must then confirm.
    if view.running(entry) and not view.failing(entry):
        yield Read("tail_journal", {"unit": entry, "lines": JOURNAL_LINES})
    for unit in dict.fromkeys([entry, *suspects]):
        yield from _resource_reads(view, unit)
        # A certificate its own output says was refused: its own, or its peer's.
        for owner in certificates.to_read(view, unit):
            yield Read("read_certificates", {"unit": owner})


#: The read that checks each resource a process can say it ran out of.
_RESOURCE_READS = {
    "disk": "disk_usage",
    "descriptors": "read_limits",
    "tasks": "read_limits",
    "memory": "read_memory",
    "read_only": "disk_usage",
}


def _resource_reads(view: View, unit: str) -> Iterator[Read]:
    """The reads that check what ``unit``'s own output, since its process started, says
    it ran out of."""
    status, tail = view.status(unit), view.found.journal.get(unit)
    if status is None or tail is None or not view.running(unit):
        return
    since = status.exec_main_start_timestamp
    for resource in leads.exhausted(leads.own_lines(tail, since)):
        yield Read(_RESOURCE_READS[resource], {"unit": unit})


def _suspects(view: View, found: Findings) -> dict[str, None]:
    """Everything that may be failing, in order: the failing units in scope (and the
    dependencies systemd reports unhealthy), the units behind failing health targets,
    and the failed units that are, or that something related depends on."""
    suspects: dict[str, None] = {}
    for unit in view.scope():
        if view.failing(unit) or unit in view.unhealthy_deps_all():
            suspects[unit] = None
    for result in view.failing_targets():
        if result.unit:
            suspects[result.unit] = None
    related = set(view.scope()) | set(suspects)
    for failed in found.failed_units():
        if failed in related or any(failed in view.deps(u) for u in related):
            suspects[failed] = None
    return suspects


def _taken_down_reads(view: View, unit: str) -> Iterator[Read]:
    todo, seen = [unit], {unit}
    while todo:
        for dep in view.dependents(todo.pop(0))[:MAX_DEPENDENCIES]:
            if dep in seen:
                continue
            seen.add(dep)
            yield Read("read_unit_status", {"unit": dep})
            if dep in view.taken_down(unit):
                todo.append(dep)


def evidence(view: View, unit: str) -> Iterator[Read]:
    """The reads that tell how ``unit`` fails, as far as what is known calls for."""
    status = view.status(unit)
    if status is None or status.load_state != "loaded" or not view.failing(unit):
        return
    # What changed for it since the host was healthy: the operator's first question,
    # and evidence in the note or the plan whatever the failure mode.
    yield Read("read_changes", {"unit": unit})
    if status.active_state in RUNNING:
        yield Read("read_process_state", {"unit": unit})
        if view.process_stuck(unit):
            return  # a stopped process is the fact: nothing else decides it
        if not any(h.outcome == "timeout" for h in view.health(unit)):
            yield Read("tail_journal", {"unit": unit, "lines": JOURNAL_LINES})
            yield Read("read_unit_file", {"unit": unit})
        if any(h.outcome == "connection_refused" for h in view.health(unit)):
            yield from _listeners(view, unit)
        return
    yield Read("tail_journal", {"unit": unit, "lines": JOURNAL_LINES})
    yield Read("read_unit_file", {"unit": unit})
    yield Read("disk_usage", {"unit": unit})
    yield from _listeners(view, unit)
    if status.result == "oom-kill":
        yield Read("read_memory", {"unit": unit})
    if unit.endswith(".timer"):
        yield Read("read_timer", {"unit": unit})


def _listeners(view: View, unit: str) -> Iterator[Read]:
    """Who holds the ports ``unit`` needs: its health target's, and those its own
    output since it stopped says are in use (a lead list_listeners checks)."""
    status = view.status(unit)
    ports: list[int] = []
    port = view.port_of(unit)
    if port is not None:
        ports.append(port)
    if status is not None:
        ports += address_ports(view, unit, status)
    for number in dict.fromkeys(ports):
        yield Read("list_listeners", {"port": number})
