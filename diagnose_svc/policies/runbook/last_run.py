"""How a unit's last run ended, from systemd's facts: whether it failed while starting,
where its current trouble starts in its journal, and what changed since it failed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from diagnose_svc.policies import leads
from diagnose_svc.policies.runbook.constants import LAST_WORDS, START_GRACE
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.tools import JournalTail, UnitStatus


def failed_starting(status: UnitStatus) -> bool:
    """Its last run ended while it was starting: what it said then may say why."""
    failed = status.failed_command
    return failed is not None and died_starting(status, failed)


def text_ports(view: View, unit: str, status: UnitStatus) -> list[int]:
    """Ports its own output says are in use, as leads for list_listeners: only when it
    failed while starting (a bind error ends a start), and only from its last words. Its
    output is anyone's text (a client's request line lands in it): a port named while
    it was serving, or before the last lines, may not decide anything."""
    tail = view.found.journal.get(unit)
    if tail is None or not failed_starting(status):
        return []
    return leads.ports_named(leads.own_lines(tail, since(tail, status))[-LAST_WORDS:])


def address_ports(view: View, unit: str, status: UnitStatus) -> list[int]:
    """The ports its last words before it failed starting say are in use: those they
    name, or, where they say "Address already in use" naming none (Python's OSError,
    Go's bind error), its own: its health target's and what it held when the host was
    last healthy. Leads for list_listeners, never facts."""
    ports = text_ports(view, unit, status)
    tail = view.found.journal.get(unit)
    if ports or tail is None or not failed_starting(status):
        return ports
    last = leads.own_lines(tail, since(tail, status))[-LAST_WORDS:]
    return view.own_ports(unit) if leads.says(last, leads.ADDRESS_IN_USE) else []


def died_starting(status: UnitStatus, failed: Any) -> bool:
    """Its main program exited with an error while starting: within START_GRACE seconds,
    or (Type=notify) before it ever said it was ready in this run."""
    if failed.phase != "ExecStart" or failed.code != "exited" or failed.status == 0:
        return False
    return failed.ran_seconds is not None and failed.ran_seconds < START_GRACE


def since(tail: JournalTail, status: UnitStatus) -> datetime | None:
    """Where its current trouble starts in ``tail`` (leads.episode_start)."""
    return leads.episode_start(tail, status.active_enter_timestamp)


def changed_after(paths: Sequence[Any], moment: datetime | None, argv: str) -> list[str]:
    """The files of a failed command that changed after ``moment`` (the failure)."""
    if moment is None:
        return []
    return [
        p.path for p in paths if p.path in argv and p.modified is not None and p.modified > moment
    ]
