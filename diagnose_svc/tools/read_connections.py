"""read_connections: which unit talks to which now, from the kernel's socket diagnostics.

A reverse proxy that reaches its app by a ``proxy_pass`` line, an app that reaches its
database by a host:port in its environment: neither says ``Requires=``, but the kernel
knows their connections. Each TCP socket comes with the cgroup it was made in
(``_sockdiag``), so a client socket names its unit and a listener names the server's; a
listener PID 1 holds for a socket unit is named through that socket unit's ``Listen=``
(the service it activates). What this gives is an *observed* edge: a fact of this moment,
which says nothing of a backend that is down now (it has no connections).

Unix stream sockets too: a listener is named by its path (a socket unit's ``Listen=``, or
the one running service whose uid made it), a client by its uid alone (the one running
service that runs as it; a uid several services share, root's above all, names none).
An endpoint of a Unix socket has its path for address and port 0. A unit opsbot never
acts on (opsbot's own: its health probes) is no client of an edge.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

from diagnose_svc._model import Model
from diagnose_svc.errors import ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._cgroups import Cgroups, cgroup_root, walk
from diagnose_svc.tools._host_units import HOST, SocketRow, manager_stamp
from diagnose_svc.tools._registry import HostToolArgs, ToolContext, ToolOutput, read_tool
from diagnose_svc.tools._sockdiag import (
    SockDiagError,
    TcpSocket,
    UnixSocket,
    tcp_sockets,
    unix_sockets,
)
from shared_schema import denied_reason

#: The cgroup of what PID 1 itself holds (the listeners of socket units).
INIT_SCOPE = "init.scope"


class ConnectionsArgs(HostToolArgs):
    gives = "connections"


class _At(Model):
    """Where a socket is: an address and a TCP port, or a Unix socket's path (port 0)."""

    address: str
    port: int

    @property
    def where(self) -> str:
        """address:port, or a Unix socket's path."""
        return f"{self.address}:{self.port}" if self.port else self.address


class Endpoint(_At):
    #: The unit that listens there (the service a socket unit activates), if known.
    unit: str | None = None
    #: The socket unit whose Listen= it is, when PID 1 holds it.
    socket_unit: str | None = None


class Edge(_At):
    """``client`` connects to ``server`` (a unit, or None for an address no unit of this
    host listens on) at address:port; ``states`` counts its sockets by TCP state."""

    client: str
    server: str | None
    states: dict[str, int]


class Connections(ToolOutput):
    """The TCP listeners of this host by unit, and the connections between units."""

    unit: str | None
    listeners: list[Endpoint]
    edges: list[Edge]
    #: Sockets whose cgroup named no unit (a process outside any unit, a vanished cgroup).
    unmapped: int = 0
    omitted: int = 0

    def summary(self) -> str:
        if not self.edges:
            about = f" of {self.unit}" if self.unit else ""
            return f"no connections{about} between units now; {len(self.listeners)} listeners"
        parts = []
        for edge in self.edges[:8]:
            states = ", ".join(f"{n} {s}" for s, n in sorted(edge.states.items()))
            parts.append(
                f"{edge.client} -> {edge.server or 'no unit here'} at {edge.where} ({states})"
            )
        more = len(self.edges) - 8 + self.omitted
        return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")

    def related_units(self) -> list[str]:
        units = [u for e in self.edges for u in (e.client, e.server) if u]
        return list(dict.fromkeys(units))


def _listen_port(listen: str) -> tuple[str, int] | None:
    """``127.0.0.1:8080``, ``[::]:80``, ``0.0.0.0:53`` -> (address, port); None for a
    path, a netlink or any other Listen= that is no TCP port."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return None
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return host, int(port)


_WILDCARD = {"0.0.0.0", "::"}


def _is_local(address: str, local: set[str]) -> bool:
    try:
        if ipaddress.ip_address(address).is_loopback:
            return True
    except ValueError:
        return False
    return address in local


def build(
    sockets: list[TcpSocket], units: dict[int, str], socket_rows: list[SocketRow]
) -> tuple[list[Endpoint], list[Edge], int]:
    """Listeners by unit and the edges between units, from the sockets, the cgroup
    names and the socket units (pure: tests feed it what a host would)."""
    by_listen: dict[tuple[str, int], SocketRow] = {}
    for socket_row in socket_rows:
        parsed = _listen_port(socket_row.listen)
        if parsed:
            by_listen[parsed] = socket_row
    listeners: dict[tuple[str, int], Endpoint] = {}
    unmapped = 0
    for s in sockets:
        if s.state != "listen":
            continue
        unit = units.get(s.cgroup_id)
        socket_unit = None
        if unit in (None, INIT_SCOPE):
            row: SocketRow | None = by_listen.get((s.local, s.local_port))
            if row is None:
                row = next(
                    (r for (a, p), r in by_listen.items() if p == s.local_port and a in _WILDCARD),
                    None,
                )
            if row is not None:
                socket_unit, unit = row.unit, row.activates or row.unit
        if unit is None:
            unmapped += 1
        listeners[(s.local, s.local_port)] = Endpoint(
            address=s.local, port=s.local_port, unit=unit, socket_unit=socket_unit
        )
    local = {a for a, _ in listeners}

    def listener_at(address: str, port: int) -> Endpoint | None:
        exact = listeners.get((address, port))
        if exact is not None:
            return exact
        if not _is_local(address, local):
            return None
        for wildcard in ("0.0.0.0", "::"):
            if (wildcard, port) in listeners:
                return listeners[(wildcard, port)]
        return None

    counts: Counter[tuple[str, str | None, str, int, str]] = Counter()
    for s in sockets:
        if s.state == "listen" or listener_at(s.local, s.local_port) is not None:
            continue  # a listener, or the server's end of an accepted connection
        client = units.get(s.cgroup_id)
        if client is None or client == INIT_SCOPE:
            unmapped += 1
            continue
        server = listener_at(s.remote, s.remote_port)
        if (server is not None and server.unit == client) or denied_reason(client):
            continue  # its own, or opsbot's (a health probe) or another never acted on
        counts[(client, server.unit if server else None, s.remote, s.remote_port, s.state)] += 1
    grouped: dict[tuple[str, str | None, str, int], dict[str, int]] = {}
    for (client, server_unit, address, port, state), n in sorted(
        counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2], kv[0][3], kv[0][4])
    ):
        grouped.setdefault((client, server_unit, address, port), {})[state] = n
    edges = [
        Edge(client=c, server=s, address=a, port=p, states=st)
        for (c, s, a, p), st in grouped.items()
    ]
    ordered = sorted(listeners.values(), key=lambda e: (e.port, e.address))
    return ordered, edges, unmapped


def build_unix(
    sockets: list[UnixSocket], uids: dict[int, list[str]], socket_rows: list[SocketRow]
) -> tuple[list[Endpoint], list[Edge], int]:
    """Unix listeners by unit and the edges to them, from the sockets, the running
    services by uid and the socket units (pure). A listener no unit is found for is left
    out; a client whose uid names no one service is counted, not guessed."""
    by_path = {r.listen: r for r in socket_rows if r.listen.startswith("/")}

    def by_uid(uid: int) -> str | None:
        units = uids.get(uid, [])
        return units[0] if len(units) == 1 else None

    listeners: dict[str, Endpoint] = {}
    for s in sockets:
        if s.state != "listen" or not s.path:
            continue
        row = by_path.get(s.path)
        unit = (row.activates or row.unit) if row else by_uid(s.uid)
        if unit:
            socket_unit = row.unit if row else None
            listeners[s.path] = Endpoint(address=s.path, port=0, unit=unit, socket_unit=socket_unit)
    by_inode = {s.inode: s for s in sockets}
    counts: Counter[tuple[str, str | None, str]] = Counter()
    unmapped = 0
    for s in sockets:
        if s.state != "established" or s.path:
            continue  # a listener, or the server's end (it bears the listener's path)
        accepted = by_inode.get(s.peer)
        server = listeners.get(accepted.path) if accepted else None
        if accepted is None or server is None:
            continue
        client = by_uid(s.uid)
        if client is None:
            unmapped += 1
        elif client != server.unit and not denied_reason(client):
            counts[(client, server.unit, accepted.path)] += 1
    edges = [
        Edge(client=c, server=srv, address=path, port=0, states={"established": n})
        for (c, srv, path), n in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][2]))
    ]
    return sorted(listeners.values(), key=lambda e: e.address), edges, unmapped


def cgroups(context: ToolContext) -> Cgroups:
    """This moment's cgroup tree (one walk per moment)."""
    return context.once("cgroups", lambda: walk(cgroup_root()))


def socket_rows(context: ToolContext) -> list[SocketRow]:
    """The socket units, as kept against systemd's counters of this moment."""
    return HOST.sockets(context.once("manager_stamp", manager_stamp))


def host_sockets(
    context: ToolContext,
) -> tuple[list[Endpoint], list[Edge], int, list[SocketRow]]:
    """This host's listeners by unit (TCP, then Unix), the edges between units, the
    sockets no unit was found for, and the socket units (what build() and build_unix()
    make of a dump read now; once per moment)."""
    return context.once("host_sockets", lambda: _host_sockets(context))


def _host_sockets(
    context: ToolContext,
) -> tuple[list[Endpoint], list[Edge], int, list[SocketRow]]:
    try:
        sockets, local = tcp_sockets(), unix_sockets()
    except SockDiagError as exc:
        raise ToolError(f"the kernel's socket diagnostics cannot be read: {exc}") from None
    rows = socket_rows(context)
    tree = cgroups(context)
    listeners, edges, unmapped = build(sockets, tree.units, rows)
    unix_listeners, unix_edges, unix_unmapped = build_unix(local, tree.uids(), rows)
    return listeners + unix_listeners, edges + unix_edges, unmapped + unix_unmapped, rows


def _fit(
    unit: str | None, listeners: list[Endpoint], edges: list[Edge], unmapped: int
) -> Connections:
    kept_edges, kept_listeners = list(edges), list(listeners)

    def make() -> Connections:
        omitted = len(edges) - len(kept_edges) + len(listeners) - len(kept_listeners)
        return Connections(
            unit=unit,
            listeners=kept_listeners,
            edges=kept_edges,
            unmapped=unmapped,
            omitted=omitted,
        )

    out = make()
    while (kept_listeners or kept_edges) and len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET:
        (kept_listeners or kept_edges).pop()
        out = make()
    return out


@read_tool(ConnectionsArgs)
def read_connections(args: ConnectionsArgs, context: ToolContext) -> Connections:
    """List which unit is connected to which now (TCP, and Unix sockets by path), and
    which unit listens on each port, from the kernel's socket diagnostics.

    With ``unit``, only the connections it makes or accepts and its own listeners. An
    edge "A -> B at address:port" means a process of unit A has a socket connected (or
    connecting: syn-sent) to B's listener; "no unit here" is an address outside this
    host. Use it to find the dependencies systemd does not declare: a proxy's upstream,
    an app's database by its port. A backend that is down has no connections now.
    """
    listeners, edges, unmapped, _ = host_sockets(context)
    if args.unit:
        edges = [e for e in edges if args.unit in (e.client, e.server)]
        listeners = [e for e in listeners if args.unit in (e.unit, e.socket_unit)]
    return _fit(args.unit, listeners, edges, unmapped)
