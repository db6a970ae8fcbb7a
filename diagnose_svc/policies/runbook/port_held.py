"""A port a unit needs, held by another process: a cause for a human, whether the unit is
down (it cannot bind) or runs and refuses connections (someone else answers there)."""

from __future__ import annotations

from diagnose_svc.policies.runbook.last_run import address_ports
from diagnose_svc.policies.runbook.outcomes import Human
from diagnose_svc.policies.runbook.view import View


def port_held(view: View, root: str) -> Human | None:
    """Another process holds a port ``root`` needs: its health target's, or one its
    own output (since it stopped) says is in use."""
    status = view.status(root)
    wanted = [view.port_of(root)]
    if status is not None:
        wanted += address_ports(view, root, status)
    for listeners in view.found.listeners.values():
        for item in listeners.listeners:
            if item.port not in wanted:
                continue
            if any(p.unit == root for p in item.processes):
                continue  # its own socket
            owners = ", ".join(
                f"pid {p.pid} {p.comm}" + (f" of {p.unit}" if p.unit else "")
                for p in item.processes[:2]
            )
            return Human(
                "port_in_use",
                root,
                f"port {item.port} ({item.address}) it listens on is held now by user "
                f"{item.user}" + (f" ({owners})" if owners else ""),
                f"A human must stop what holds the port (or move {root} to another), "
                f"then start {root}.",
            )
    return None
