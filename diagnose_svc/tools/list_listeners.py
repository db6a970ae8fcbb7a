"""list_listeners: who holds a TCP port now, from /proc, without a shell or a privilege.

A journal line that says "Address already in use" is a lead, not a fact: this tool says
whether the port is held now, by which user, and (where /proc shows them) by which
processes of which unit. /proc/net/tcp gives each listening socket's owner uid; the
processes of that uid are found by their status, and their unit by their cgroup.
"""

from __future__ import annotations

import pwd
from typing import Annotated

from pydantic import Field

from diagnose_svc._model import Model
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._proc import listening_tcp, pids, read_stat, uid_of, unit_of
from diagnose_svc.tools._registry import ToolArgs, ToolContext, ToolOutput, read_tool

#: Processes named per listening socket at most.
PROCESSES_PER_SOCKET = 4


class ListenersArgs(ToolArgs):
    gives = "listeners"
    port: Annotated[int, Field(ge=1, le=65535)] | None = None

    def subject(self) -> str:
        return str(self.port) if self.port is not None else "*"


class Holder(Model):
    pid: int
    comm: str
    unit: str | None


class Listener(Model):
    address: str
    port: int
    uid: int
    user: str
    #: Processes of that user, and their units: the socket is one of theirs.
    processes: list[Holder]


class Listeners(ToolOutput):
    """The TCP sockets listening now (those on ``port`` when one was asked for)."""

    port: int | None
    listeners: list[Listener]
    omitted: int = 0

    def summary(self) -> str:
        if not self.listeners:
            asked = f"port {self.port}" if self.port is not None else "any port"
            return f"nothing listens on {asked}"
        parts = []
        for item in self.listeners[:6]:
            owners = ", ".join(
                f"pid {p.pid} {p.comm}" + (f" ({p.unit})" if p.unit else "") for p in item.processes
            )
            parts.append(
                f"{item.address}:{item.port} held by {item.user}"
                + (f": {owners}" if owners else "")
            )
        return "; ".join(parts)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def holders_by_uid(uids: set[int]) -> dict[int, list[Holder]]:
    """The visible processes of each uid in ``uids``, with their units."""
    found: dict[int, list[Holder]] = {uid: [] for uid in uids}
    for pid in pids():
        uid = uid_of(pid)
        if uid not in found or len(found[uid]) >= PROCESSES_PER_SOCKET * 4:
            continue
        stat = read_stat(pid)
        if stat is not None:
            found[uid].append(Holder(pid=pid, comm=stat.comm, unit=unit_of(pid)))
    return found


def _fit(port: int | None, listeners: list[Listener]) -> Listeners:
    kept = list(listeners)
    out = Listeners(port=port, listeners=kept)
    while kept and len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET:
        kept.pop()
        out = Listeners(port=port, listeners=kept, omitted=len(listeners) - len(kept))
    return out


@read_tool(ListenersArgs)
def list_listeners(args: ListenersArgs, context: ToolContext) -> Listeners:
    """List the TCP sockets listening now, or only those on ``port``.

    Each has its address and port, the user that owns it, and the processes of that user
    with the unit each belongs to (a socket's exact process is not visible without
    privileges: the unit whose processes run as the owner is). Use it to check a journal's
    "Address already in use": is the port held now, and by whom?
    """
    sockets = [s for s in listening_tcp() if args.port is None or s.port == args.port]
    sockets.sort(key=lambda s: (s.port, s.address))
    by_uid = holders_by_uid({s.uid for s in sockets})
    listeners = []
    for s in sockets:
        processes = by_uid.get(s.uid, [])
        # Processes in a unit first: they say who the socket belongs to.
        processes = sorted(processes, key=lambda p: (p.unit is None, p.pid))
        listeners.append(
            Listener(
                address=s.address,
                port=s.port,
                uid=s.uid,
                user=_user(s.uid),
                processes=processes[:PROCESSES_PER_SOCKET],
            )
        )
    return _fit(args.port, listeners)
