"""What the present says of a unit beyond its state: a resource it ran out of (its own
output's lead, confirmed by a read: a full or read-only filesystem, descriptors or tasks at their
limit, memory at MemoryMax=), and what changed for it since the host was last healthy
(read_changes), in words for a note or a plan."""

from __future__ import annotations

from diagnose_svc.policies import leads
from diagnose_svc.policies.findings import Findings
from diagnose_svc.policies.runbook.words import cut, full_words, read_only_words
from diagnose_svc.tools import UnitStatus

#: Related changes named in a note or a step's reason, at most.
CHANGES_TOLD = 4


def ran_out(found: Findings, status: UnitStatus | None, unit: str) -> tuple[str, str] | None:
    """What ``unit`` ran out of, when its own output since its process started says so
    and a read of the present confirms it: (resource, the facts in words). A line alone
    is a lead (anyone can write into a unit's log), never a fact."""
    tail = found.journal.get(unit)
    if status is None or tail is None:
        return None
    said = leads.exhausted(leads.own_lines(tail, status.exec_main_start_timestamp))
    for resource, (line, count) in said.items():
        confirmed = _confirmed(found, unit, resource)
        if confirmed:
            quoted = (
                f'its own output says "{cut(line.message, 120)}" ({count} time(s) since it started)'
            )
            return resource, f"{confirmed}, and {quoted}"
    return None


def _confirmed(found: Findings, unit: str, resource: str) -> str:
    """The present's facts that ``unit`` is out of ``resource`` ('' when they do not show
    it, or were not read)."""
    if resource == "disk":
        disk = found.disk.get(unit)
        full = disk.full if disk is not None else []
        return full_words(full[0]) if full else ""
    if resource == "read_only":
        disk = found.disk.get(unit)
        ro = disk.read_only if disk is not None else []
        return read_only_words(ro[0]) if ro else ""
    limits = found.limits.get(unit)
    if resource == "descriptors" and limits is not None and limits.files_at_limit:
        held = limits.open_files if limits.open_files is not None else limits.fd_table
        return f"it holds {held} file descriptors of LimitNOFILE={limits.files_limit}"
    if resource == "tasks" and limits is not None and limits.tasks_at_limit:
        refused = (
            f"; its cgroup refused it a task {limits.tasks_refused} time(s)"
            if limits.tasks_refused
            else ""
        )
        return f"it runs {limits.tasks} tasks of TasksMax={limits.tasks_limit}{refused}"
    memory = found.memory.get(unit)
    if resource == "memory" and memory is not None:
        ceiling = int(memory.memory_max) if memory.memory_max.isdigit() else None
        near = (
            memory.memory_current is not None
            and ceiling is not None
            and memory.memory_current >= 0.95 * ceiling
        )
        if near or memory.oom_kill:
            killed = (
                f", and the kernel killed a process of it {memory.oom_kill} time(s)"
                if memory.oom_kill
                else ""
            )
            return f"it uses {memory.memory_current} bytes of MemoryMax={memory.memory_max}{killed}"
    return ""


def changed(found: Findings, unit: str) -> str:
    """What changed for ``unit`` since the host was healthy, in words ('' when nothing it
    runs or reads did, or it was not read): "Since the host was last seen healthy
    (2026-12-06 10:42 UTC): nginx 1.22.1-9 -> 1.22.1-9+deb12u1 upgraded (...);
    /etc/app/app.env modified (...)"."""
    changes = found.changes.get(unit)
    if changes is None or changes.since is None:
        return ""
    parts = [c.words() for c in changes.related[:CHANGES_TOLD]]
    if changes.need_daemon_reload:
        parts.append(
            "its unit file changed on disk and systemd still runs the old one "
            "(systemctl daemon-reload)"
        )
    if not parts:
        return ""
    return (
        f"Since {changes.since_what} ({changes.since:%Y-%m-%d %H:%M} UTC): "
        + "; ".join(parts)
        + "."
    )
