"""opsbot's executor daemons: the only code that changes the host.

opsbot-executor takes plans over a Unix socket, validates them again and stores them
(plans.PlanStore); opsbot-apply runs a plan only when a root-owned approval bound to
that plan's fingerprint is present and fresh (plans.decide says so). It runs argv lists,
never a shell. A stored plan's life is the plans package; these are its daemons.

    daemon          opsbot-executor: the socket-activated server, who may ask what
    service         what the executor answers to each request
    peer            who is on the other end of the socket, and their role
    apply           the apply: the one place a step runs
    apply_service   opsbot-apply: what opsbot-apply.service runs
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.exports import lazy_exports

if TYPE_CHECKING:
    from executor_svc.apply import Applier
    from executor_svc.daemon import Server
    from executor_svc.peer import ALLOWED_OPS, Peer, Role, Roles
    from executor_svc.service import ExecutorService

#: Each module and the names it exports here.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "executor_svc.apply": ("Applier",),
    "executor_svc.daemon": ("Server",),
    "executor_svc.peer": ("ALLOWED_OPS", "Peer", "Role", "Roles"),
    "executor_svc.service": ("ExecutorService",),
}
__all__ = [
    "ALLOWED_OPS",
    "Applier",
    "ExecutorService",
    "Peer",
    "Role",
    "Roles",
    "Server",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
