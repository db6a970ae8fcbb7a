"""A queue between units: when a unit's answers say its queue is full or backs up, the
units that drain that queue are in its chain, though it never connects to them: the
other clients of the broker it hands its jobs to (an edge observed, configured, or in
the baseline). A consumer stopped or failed is the root, not the producer; so is one
that runs while its broker was started again after it (it may hold a connection to the
broker that went away, and consume nothing).

Pure: it reads the findings and the edges the view gives it (no import of the view).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from diagnose_svc.policies.findings import Findings
from diagnose_svc.policies.runbook.words import cut

#: What a producer (or a front relaying it) answers when its queue backs up.
BACKED_UP = re.compile(
    r"queue (?:is )?full|backlog|jobs? (?:are )?waiting|queue depth|too many (?:pending|queued)"
    r"|consumer lag|queue (?:too )?long",
    re.I,
)

#: (client, server, why in words) of every edge the findings give.
Links = Iterable[tuple[str, str, str]]


def backed_up(found: Findings) -> dict[str, str]:
    """Each unit a failing health target of which says its queue backs up: the words."""
    out: dict[str, str] = {}
    for result in found.health.values():
        said = f"{result.body_excerpt} {result.error or ''}"
        if result.outcome != "ok" and result.unit and BACKED_UP.search(said):
            out.setdefault(result.unit, cut(result.body_excerpt or said, 160))
    return out


def drains(found: Findings, links: Links, unit: str) -> list[str]:
    """The units that drain ``unit``'s queue, when its answers say it backs up: the other
    clients of every unit it reaches (its brokers)."""
    if unit not in backed_up(found):
        return []
    edges = list(links)
    brokers = {server for client, server, _ in edges if client == unit}
    return list(
        dict.fromkeys(
            client
            for client, server, _ in edges
            if server in brokers and client != unit and client not in brokers
        )
    )


def stale_drain(found: Findings, links: Links, unit: str) -> str | None:
    """Why ``unit``, which runs, holds back a queue that backs up: it drains it, and a
    broker it reaches was started again after it was. None when it does not."""
    status = found.status.get(unit)
    if status is None or status.active_state != "active":
        return None
    began = status.exec_main_start_timestamp
    edges = list(links)
    for producer, said in backed_up(found).items():
        if unit not in drains(found, edges, producer):
            continue
        for client, broker, _ in edges:
            if client != unit:
                continue
            other = found.status.get(broker)
            again = other.exec_main_start_timestamp if other is not None else None
            if other is None or other.active_state != "active" or again is None:
                continue
            if began is not None and again > began:
                return (
                    f"it drains the queue {producer} says backs up ({said}), and {broker} "
                    f"was started again at {again:%H:%M:%S} UTC, after it ({began:%H:%M:%S} "
                    f"UTC): it may still hold its connection to the {broker} that went away"
                )
    return None
