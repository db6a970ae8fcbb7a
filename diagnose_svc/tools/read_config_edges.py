"""read_config_edges: which unit reaches which, as their configuration says.

A proxy's ``proxy_pass``, an app's ``DATABASE_URL`` or ``--upstream 127.0.0.1:9000``: a
dependency no unit file declares, and one the kernel cannot show once the backend is
down (it has no connections then). Each service's environment, command line,
EnvironmentFile= and config files are read for the ports and socket paths they name
(``_config_files``); each port a unit reaches is matched to the unit that listens there
now, or, when none does, to the unit configured to listen there. What is kept is the
edge, the endpoint and the name of the setting or the file:line that says it; never a
value (a password in a URL stays in its file).
"""

from __future__ import annotations

from diagnose_svc._model import Model
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._cgroups import cgroup_root, walk
from diagnose_svc.tools._config_files import UnitConfig
from diagnose_svc.tools._host_units import HOST, definitions, manager_stamp
from diagnose_svc.tools._registry import HostToolArgs, ToolContext, ToolOutput, read_tool
from diagnose_svc.tools.read_connections import cgroups, host_sockets


class ConfigEdgesArgs(HostToolArgs):
    gives = "configured"


class ConfigEdge(Model):
    """``client`` is configured to reach ``endpoint`` (":PORT" on this host, or a socket
    path), where ``server`` listens now, or is configured to (``how``); ``source`` is
    the setting or file:line that says so."""

    client: str
    server: str
    endpoint: str
    source: str
    how: str


class ConfigEdges(ToolOutput):
    unit: str | None
    edges: list[ConfigEdge]
    #: Files a unit names that the diagnose user could not read ("unit: path (why)").
    unreadable: list[str]
    units_read: int
    omitted: int = 0

    def summary(self) -> str:
        if not self.edges:
            head = f"no configured edges among {self.units_read} services"
        else:
            parts = [
                f"{e.client} -> {e.server} at {e.endpoint} ({e.source}; {e.how})"
                for e in self.edges[:6]
            ]
            more = len(self.edges) - 6 + self.omitted
            head = "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
        if self.unreadable:
            head += f"; unreadable: {', '.join(self.unreadable[:3])}"
        return head

    def related_units(self) -> list[str]:
        return list(dict.fromkeys(u for e in self.edges for u in (e.client, e.server)))


# -- matching what each unit reaches to who serves there (pure) ------------------------------

LIVE = "listens there now"
CONFIGURED = "is configured to listen there"
SOCKET = "its socket unit listens there"
RUNTIME = "keeps its runtime directory there (RuntimeDirectory=)"


def resolve(
    configs: list[UnitConfig],
    live: dict[int, str],
    socket_paths: dict[str, str],
    runtime_dirs: dict[str, str] | None = None,
) -> list[ConfigEdge]:
    """Edges from what each unit reaches: to the unit listening on that port now (not
    itself), else to the one other unit configured to listen there; a socket path to the
    service its socket unit activates, else to the unit configured to bind it, else to
    the unit whose RuntimeDirectory= holds it, the deepest one (``runtime_dirs``:
    directory -> unit; its socket gone with it while it is down). A bare port whose
    setting does not say listen or reach (``either``) is only ever the listening end."""
    own: dict[int | str, list[str]] = {}
    for config in configs:
        for m in config.mentions:
            if m.role in ("own", "either"):
                own.setdefault(m.path or m.port or 0, []).append(config.unit)
    down_first: list[ConfigEdge] = []
    live_edges: list[ConfigEdge] = []
    for config in configs:
        mine = {m.path or m.port for m in config.mentions if m.role == "own"}
        for m in config.mentions:
            key = m.path or m.port or 0
            if m.role != "reach" or key in mine:
                continue
            if m.path:
                server, how = socket_paths.get(m.path), SOCKET
            else:
                server, how = live.get(int(key)), LIVE
            if server is None:
                named = [u for u in dict.fromkeys(own.get(key, [])) if u != config.unit]
                server, how = (named[0], CONFIGURED) if len(named) == 1 else (None, "")
            if server is None and m.path:
                holders = sorted(
                    (len(directory), unit)
                    for directory, unit in (runtime_dirs or {}).items()
                    if m.path.startswith(directory.rstrip("/") + "/")
                )
                if holders and holders[-1][1] != config.unit:  # the deepest holds it
                    server, how = holders[-1][1], RUNTIME
            if server is None or server == config.unit:
                continue
            edge = ConfigEdge(
                client=config.unit, server=server, endpoint=m.endpoint, source=m.source, how=how
            )
            (live_edges if how == LIVE else down_first).append(edge)
    seen: set[tuple[str, str]] = set()
    out = []
    for edge in down_first + live_edges:
        if (edge.client, edge.server) not in seen:
            seen.add((edge.client, edge.server))
            out.append(edge)
    return out


# -- reading the host -------------------------------------------------------------------------


def read_configs(units: list[str]) -> list[UnitConfig]:
    """The configuration of each of ``units`` as it is now, read anew (one unit's tools:
    its certificates)."""
    cgroups = walk(cgroup_root())
    return [d.config(cgroups.first_pid(d.unit)) for d in definitions(units)]


def _fit(
    unit: str | None, edges: list[ConfigEdge], unreadable: list[str], read: int
) -> ConfigEdges:
    kept, kept_unreadable = list(edges), list(unreadable[:8])

    def make() -> ConfigEdges:
        omitted = len(edges) - len(kept)
        return ConfigEdges(
            unit=unit, edges=kept, unreadable=kept_unreadable, units_read=read, omitted=omitted
        )

    out = make()
    while (kept_unreadable or kept) and len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET:
        (kept_unreadable or kept).pop()
        out = make()
    return out


@read_tool(ConfigEdgesArgs)
def read_config_edges(args: ConfigEdgesArgs, context: ToolContext) -> ConfigEdges:
    """Which unit is configured to reach which (ports and socket paths named in each
    service's environment, command line and config files, nginx/HAProxy/Caddy included),
    matched to the unit that listens there now or is configured to: a dependency no unit
    file declares, found even while the backend is down. Values are never shown.
    """
    listeners, _, _, rows = host_sockets(context)
    live = {e.port: e.unit for e in listeners if e.unit and e.port}
    paths = {r.listen: r.activates or r.unit for r in rows if r.listen.startswith("/")}
    paths |= {e.address: e.unit for e in listeners if e.unit and not e.port}
    configs = HOST.configs(context.once("manager_stamp", manager_stamp), cgroups(context))
    edges = resolve(configs, live, paths, HOST.runtime_dirs())
    unreadable = [f"{c.unit}: {path}" for c in configs for path in c.unreadable]
    if args.unit:
        edges = [e for e in edges if args.unit in (e.client, e.server)]
        unreadable = [u for u in unreadable if u.startswith(f"{args.unit}: ")]
    return _fit(args.unit, edges, unreadable, len(configs))
