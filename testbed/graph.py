"""Generated service graphs in a booted container: random names, ports and shapes, for the
fault suite that keeps the diagnosis honest on hosts it was not written for.

:func:`generate` builds a :class:`Graph` from a seed: 2 to 4 tiers, a proxy in front or
not, chains and fan-out (a node with two dependencies), each edge a random kind of
systemd dependency (BindsTo=, Requires= or Wants=, always with After=), and each node of
a random make: Type=notify, simple or exec; with a start check (ExecStartPre=) or
without; Restart=no or on-failure. Every node is a :mod:`testbed.services.node` HTTP
service on a random port whose ``/healthz`` is 200 only when its dependencies' are; each
has a health target in opsbot's config (named after it), except now and then a leaf
without one, so that diagnosis must follow systemd's graph.
Nothing about a node (its name, its port, its role) says what it is to an outside eye.

Usage::

    graph = generate(seed)
    install(ct, graph)      # files, users, daemon-reload, start, wait healthy
    ...
    uninstall(ct, graph)    # stop, unmask, remove every file and drop-in
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from testbed.container import BootedSystemd
from testbed.observe import http_probe, unit_properties

#: How a node depends on another: a systemd dependency, or only its configuration (the
#: upstream's port in its config file; no unit file says so).
Relation = Literal["BindsTo", "Requires", "Wants", "Port"]
Role = Literal["proxy", "app", "store"]
ServiceType = Literal["notify", "simple", "exec"]
RestartPolicy = Literal["no", "on-failure"]
SERVICE_TYPES: tuple[ServiceType, ...] = ("notify", "simple", "exec")
RESTART_POLICIES: tuple[RestartPolicy, ...] = ("no", "on-failure")

NODE_SCRIPT = "/usr/local/lib/opsbot-graph/node.py"
CONFIG_DIR = "/etc/opsbot-graph"
UNIT_DIR = "/usr/local/lib/systemd/system"
DROPIN_DIR = "/etc/systemd/system"
STATE_ROOT = "/var/lib"
RUN_DIR = "/run/opsbot-graph"
USER = "opsgraph"
PYTHON = "/usr/bin/python3"
HEALTH_TIMEOUT = 2.0
#: Seconds a node waits for an upstream's /healthz (less than opsbot's probe timeout).
UPSTREAM_TIMEOUT = 1.5
#: Ports this machine or the other suites use.
TAKEN_PORTS = frozenset({80, 5432, 5433, 6544, 8080, 9090, 18080})
#: Where a node's port is drawn: below the kernel's ephemeral range (32768-60999 by
#: default), so that no probe's or node's own outgoing connection can hold a port a node
#: is about to listen on.
PORT_RANGE = (20000, 32767)
_SYLLABLES = (
    "ka lo mi ra ve to nu sil dor fen gar hol jin kes lum mor nad pix quor ros tav "
    "ulm vex wyn zor bel cri dax eno fyr gil"
).split()
_SUFFIXES = ("", "", "", "d", "-svc", "-api", "-core", "-io", "2", "-srv")


@dataclass(frozen=True)
class Node:
    name: str
    port: int
    role: Role
    tier: int
    deps: tuple[tuple[str, Relation], ...] = ()
    health: bool = True
    service_type: ServiceType = "notify"
    #: Whether its unit checks its config before it starts (ExecStartPre=).
    check: bool = True
    restart: RestartPolicy = "no"
    #: A balancer: healthy while any of its upstreams is (graph.with_member()).
    balance: bool = False
    #: Started by a socket unit of its name that listens on its port (with_socket()).
    activated: bool = False
    #: Holds one connection to its first upstream and answers 503 once it is lost,
    #: until restarted (node.py's ``session``: a client that keeps a dead session).
    session: bool = False

    @property
    def template(self) -> str:
        """The template unit it is an instance of ("name@.service"), or "" for none: a
        node named "name@2" is instance 2 of it, its file written once for all."""
        prefix, at, _ = self.name.partition("@")
        return f"{prefix}@.service" if at else ""

    @property
    def socket(self) -> str:
        return f"{self.name}.socket"

    @property
    def unit(self) -> str:
        return f"{self.name}.service"

    @property
    def config_path(self) -> str:
        return f"{CONFIG_DIR}/{self.name}.json"

    @property
    def state_dir(self) -> str:
        return f"{STATE_ROOT}/opsbot-graph-{self.name}"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"


@dataclass(frozen=True)
class Graph:
    seed: int
    nodes: tuple[Node, ...]
    front: str
    extra: dict[str, str] = field(default_factory=dict, compare=False)
    #: The program every node runs (renamed(): another path, another name).
    program: str = NODE_SCRIPT

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def by_unit(self, unit: str) -> Node:
        return next(n for n in self.nodes if n.unit == unit)

    @property
    def units(self) -> list[str]:
        return [n.unit for n in self.nodes]

    def dependents(self, name: str) -> list[tuple[Node, Relation]]:
        """The nodes that depend on ``name`` directly, with how."""
        return [(n, rel) for n in self.nodes for dep, rel in n.deps if dep == name]

    def stopped_with(self, name: str, *, by_job: bool = False) -> list[Node]:
        """The nodes systemd stops when ``name`` goes down, in the order they must start
        again (dependencies first). A unit that dies by itself takes down its BindsTo=
        dependents; one stopped or restarted by a job also its Requires= dependents; and
        each dependent stopped so is stopped by a job of its own, which goes on the same
        way (systemd.unit(5), Requires= and BindsTo=)."""
        out: list[Node] = []
        todo = [(name, by_job)]
        while todo:
            current, job = todo.pop(0)
            for node, relation in self.dependents(current):
                if relation == "BindsTo" or (job and relation == "Requires"):
                    if node not in out:
                        out.append(node)
                        todo.append((node.name, True))
        return self.start_order(out)

    def start_order(self, nodes: list[Node]) -> list[Node]:
        """``nodes`` sorted so that each comes after every node it depends on."""
        return sorted(nodes, key=lambda n: -n.tier)

    def depth(self, name: str) -> int:
        """How many edges ``name`` is below the front."""
        return self.node(name).tier - self.node(self.front).tier

    def opsbot_config(self) -> str:
        """opsbot.toml for this graph: restart, start, reload and reset-failed on exactly
        its units, and a health target per node that has one."""
        names = [u for n in self.nodes for u in (n.unit, *([n.socket] if n.activated else []))]
        names += [f"{self.extra['job']}.service"] if "job" in self.extra else []
        units = ", ".join(f'"{u}"' for u in names)
        lines = [
            f"# opsbot on generated graph {self.seed}",
            "[executor]",
            "approval_ttl_seconds = 3600",
            # A gate leaves a plan waiting per case on one host.
            "max_waiting_plans_per_submitter = 1000",
            "max_waiting_plans = 5000",
            # A relapse shows within 1 s of the fix (NODE_CRASH_AFTER); the scenario suite
            # verifies in 3 s, these graphs in 5.
            f"settle_seconds = {SETTLE_SECONDS:g}",
            "",
            "[diagnose.verify]",
            'follow_up = "always"',
            "",
            "[executor.allow]",
            *(
                f"{tool} = [{units}]"
                for tool in ("restart_unit", "start_unit", "reload_unit", "reset_failed_unit")
            ),
        ]
        for n in self.nodes:
            if n.health:
                lines += [
                    "",
                    f"[diagnose.health.{n.name.replace('@', '-')}]",
                    f'url = "{n.health_url}"',
                    f'unit = "{n.unit}"',
                    f"timeout_seconds = {HEALTH_TIMEOUT}",
                ]
        return "\n".join(lines) + "\n"


#: opsbot-verify's window after a plan's last step, on the generated graphs.
SETTLE_SECONDS = 4.0


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
        name += rng.choice(_SUFFIXES)
        if name not in used and not name.startswith(("opsbot", "systemd", "ssh", "dbus")):
            used.add(name)
            return name


def generate(seed: int, ports_only: bool = False) -> Graph:
    """A service graph made from ``seed`` (the same seed, the same graph); with
    ``ports_only``, the same shape with no dependency declared to systemd: each node
    reaches its upstreams by the ports in its config file alone."""
    graph = _generate(seed)
    if not ports_only:
        return graph
    nodes = tuple(replace(n, deps=tuple((d, "Port") for d, _ in n.deps)) for n in graph.nodes)
    return replace(graph, nodes=nodes)


def _generate(seed: int) -> Graph:
    rng = random.Random(seed)
    tiers = rng.randint(2, 4)
    proxy = rng.random() < 0.5
    used: set[str] = set()
    ports: set[int] = set()

    def port() -> int:
        while True:
            p = rng.randint(*PORT_RANGE)
            if p not in ports and p not in TAKEN_PORTS:
                ports.add(p)
                return p

    layers: list[list[str]] = []
    for tier in range(tiers):
        width = 1 if tier == 0 else rng.choice((1, 2))
        layers.append([_name(rng, used) for _ in range(width)])
    nodes: list[Node] = []
    for tier, layer in enumerate(layers):
        below = layers[tier + 1] if tier + 1 < tiers else []
        for index, name in enumerate(layer):
            role: Role = "proxy" if tier == 0 and proxy else ("store" if not below else "app")
            if below:
                count = 2 if (len(below) == 2 and (index == 0 or rng.random() < 0.5)) else 1
                picked = below if count == 2 else [below[index % len(below)]]
                deps = tuple((dep, rng.choice(("BindsTo", "Requires", "Wants"))) for dep in picked)
            else:
                deps = ()
            health = bool(below) or rng.random() < 0.8
            nodes.append(Node(name, port(), role, tier, deps, health))  # type: ignore[arg-type]
    # Every node below the front must be reached by someone: add edges to the orphans.
    reached = {dep for n in nodes for dep, _ in n.deps}
    fixed: list[Node] = []
    for n in nodes:
        orphans = [m.name for m in nodes if m.tier == n.tier + 1 and m.name not in reached]
        if orphans and n is next(x for x in nodes if x.tier == n.tier):
            n = replace(n, deps=n.deps + tuple((o, "Requires") for o in orphans))
            reached.update(orphans)
        fixed.append(n)
    # How each node is made, from a generator of its own (the shapes above stay the same).
    make = random.Random(seed * 104729 + 7)
    fixed = [
        replace(
            n,
            service_type=make.choice(SERVICE_TYPES),
            check=make.random() < 0.5,
            restart=make.choice(RESTART_POLICIES),
        )
        for n in fixed
    ]
    return Graph(seed, tuple(fixed), front=fixed[0].name)


# -- what is installed ------------------------------------------------------------------------


def unit_file(graph: Graph, node: Node) -> tuple[str, str]:
    """(path, text) of ``node``'s unit file: its own, or its template's, where every
    instance's name is ``%i`` (the instances of one template are alike but for their
    config file, which says their port)."""
    if not node.template:
        return f"{UNIT_DIR}/{node.unit}", unit_text(graph, node)
    generic = node.template.removesuffix(".service") + "%i"
    return f"{UNIT_DIR}/{node.template}", unit_text(graph, node).replace(node.name, generic)


def unit_text(graph: Graph, node: Node) -> str:
    deps = []
    for dep, relation in node.deps:
        if relation == "Port":
            continue  # only its config names the upstream's port
        unit = graph.node(dep).unit
        deps += [f"{relation}={unit}", f"After={unit}"]
    lines = [
        f"# generated service graph {graph.seed} (testbed/graph.py)",
        "[Unit]",
        f"Description=graph node {node.name}",
        *deps,
        "StartLimitIntervalSec=30",
        "StartLimitBurst=3",
        "",
        "[Service]",
        f"Type={node.service_type}",
        *(["NotifyAccess=main"] if node.service_type == "notify" else []),
        f"User={USER}",
        *(
            [f"ExecStartPre={PYTHON} {graph.program} --check --config {node.config_path}"]
            if node.check
            else []
        ),
        f"ExecStart={PYTHON} -u {graph.program} --config {node.config_path}",
        "ExecReload=/bin/kill -HUP $MAINPID",
        f"StateDirectory=opsbot-graph-{node.name}",
        f"SyslogIdentifier={node.name}",
        f"Restart={node.restart}",
        "RestartSec=100ms",
        "",
    ]
    return "\n".join(lines)


def node_config(graph: Graph, node: Node, **changes: object) -> str:
    config = {
        "name": node.name,
        "port": node.port,
        "role": node.role,
        "upstreams": [graph.node(dep).port for dep, _ in node.deps],
        "upstream_timeout": UPSTREAM_TIMEOUT,
        "maintenance": False,
        "balance": node.balance,
        "state_dir": node.state_dir,
        "session": node.session,
        **changes,
    }
    return json.dumps(config, indent=2) + "\n"


def prepare(ct: BootedSystemd) -> None:
    """Once per container: the node script and the user every node runs as; and
    opsbot-polkit-rule.path stopped, since each case writes its rule itself right after
    its config (graph_run.configure): the path unit would write it again for every one."""
    ct.systemctl("stop", "opsbot-polkit-rule.path", check=False)
    source = Path(__file__).resolve().parent / "services" / "node.py"
    ct.write_file(NODE_SCRIPT, source.read_text(), 0o755)
    if ct.run(["id", USER], check=False).returncode != 0:
        ct.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
    ct.run(["mkdir", "-p", CONFIG_DIR, RUN_DIR])


def with_member(graph: Graph, salt: int, *, instances: bool = False) -> tuple[Graph, Node, Node]:
    """The graph with one node made a balancer over two members: a dependency of it and
    a second instance of that dependency (its own name and port, the same upstreams),
    both reached by port alone. With ``instances``, the two are instances 1 and 2 of one
    template unit. Returns (graph, balancer, the member drawn to fail)."""
    rng = random.Random(salt)
    balancer = rng.choice([n for n in graph.nodes if n.deps])
    member = graph.node(rng.choice(balancer.deps)[0])
    used = {n.name for n in graph.nodes}
    taken = {n.port for n in graph.nodes} | TAKEN_PORTS
    while (port := rng.randint(*PORT_RANGE)) in taken:
        pass
    twin = replace(member, name=_name(rng, used), port=port, health=True)
    named = {member.name: member.name}
    if instances:
        template = _name(rng, used)
        named = {member.name: f"{template}@1"}
        twin = replace(twin, name=f"{template}@2")
    nodes: list[Node] = []
    for n in graph.nodes:
        if n.name == balancer.name:
            n = replace(n, deps=(*n.deps, (twin.name, "Port")), balance=True)
        n = replace(
            n,
            name=named.get(n.name, n.name),
            deps=tuple((named.get(d, d), rel) for d, rel in n.deps),
        )
        nodes.append(n)
        if n.name == named[member.name]:
            nodes.append(twin)
    member = replace(member, name=named[member.name])
    failing = rng.choice((member, twin)).name
    extra = {**graph.extra, "balancer": balancer.name, "member": failing}
    out = replace(graph, nodes=tuple(nodes), extra=extra)
    return out, out.node(balancer.name), out.node(failing)


def with_session(graph: Graph) -> tuple[Graph, Node, Node]:
    """The graph with one client that keeps a session to its backend (node.py's
    ``session``): the deepest node with a dependency, its first dependency the backend,
    which does not restart by itself. Killing the backend leaves the client answering
    503 until it is restarted, after the backend is back. Returns (graph, client,
    backend)."""
    client = max((n for n in graph.nodes if n.deps), key=lambda n: (n.tier, n.name))
    backend = graph.node(client.deps[0][0])
    nodes = tuple(
        replace(n, session=True)
        if n.name == client.name
        else replace(n, restart="no")
        if n.name == backend.name
        else n
        for n in graph.nodes
    )
    out = replace(graph, nodes=nodes)
    return out, out.node(client.name), out.node(backend.name)


def with_job(graph: Graph, salt: int) -> tuple[Graph, Node]:
    """The graph with a job beside its serving path: a Type=oneshot service its timer
    runs every hour, which checks one backend (its config names the backend's port, as a
    report or a sync job would) and fails while that backend is down. Returns (graph,
    the backend)."""
    rng = random.Random(salt)
    backend = rng.choice([n for n in graph.nodes if n.tier > 0])
    job = _name(rng, {n.name for n in graph.nodes})
    return replace(graph, extra={**graph.extra, "job": job, "job_of": backend.name}), backend


def job_files(graph: Graph) -> dict[str, str]:
    """The job's unit, timer and config (with_job()), by path; none without a job."""
    job = graph.extra.get("job")
    if not job:
        return {}
    config = f"{CONFIG_DIR}/{job}.json"
    backend = graph.node(graph.extra["job_of"])
    settings = {"name": job, "port": 0, "role": "job", "upstreams": [backend.port]}
    return {
        f"{UNIT_DIR}/{job}.service": (
            f"# generated service graph {graph.seed} (testbed/graph.py): a job\n"
            f"[Unit]\nDescription=graph job {job}\n\n[Service]\nType=oneshot\n"
            f"User={USER}\nExecStart={PYTHON} -u {graph.program} --once --config {config}\n"
            f"SyslogIdentifier={job}\n"
        ),
        f"{UNIT_DIR}/{job}.timer": f"[Timer]\nOnCalendar=hourly\nUnit={job}.service\n",
        config: json.dumps({**settings, "upstream_timeout": UPSTREAM_TIMEOUT}, indent=2) + "\n",
    }


def with_socket(graph: Graph, salt: int) -> tuple[Graph, Node]:
    """The graph with one node below the front socket-activated: a socket unit of its
    name listens on its port and starts it on the first connection."""
    rng = random.Random(salt)
    chosen = rng.choice([n for n in graph.nodes if n.tier > 0]).name
    nodes = tuple(replace(n, activated=True) if n.name == chosen else n for n in graph.nodes)
    out = replace(graph, nodes=nodes, extra={**graph.extra, "activated": chosen})
    return out, out.node(chosen)


def renamed(graph: Graph, salt: int) -> Graph:
    """The same graph with every name, port and the program's path drawn anew (from
    ``salt``): what no rule keyed to a name, a port or a program could tell apart."""
    rng = random.Random(salt)
    used = {n.name for n in graph.nodes}
    names: dict[str, str] = {}
    templates: dict[str, str] = {}
    for n in graph.nodes:
        prefix, at, instance = n.name.partition("@")
        if at and prefix not in templates:
            templates[prefix] = _name(rng, used)
        names[n.name] = f"{templates[prefix]}@{instance}" if at else _name(rng, used)
    taken = {n.port for n in graph.nodes} | TAKEN_PORTS
    ports: dict[str, int] = {}
    for n in graph.nodes:
        while (port := rng.randint(*PORT_RANGE)) in taken:
            pass
        taken.add(port)
        ports[n.name] = port
    nodes = tuple(
        replace(
            n,
            name=names[n.name],
            port=ports[n.name],
            deps=tuple((names[d], rel) for d, rel in n.deps),
        )
        for n in graph.nodes
    )
    program = f"/opt/{_name(rng, used)}/bin/{_name(rng, used)}"
    extra = {key: names.get(value, value) for key, value in graph.extra.items()}
    return replace(graph, nodes=nodes, front=names[graph.front], program=program, extra=extra)


def install(ct: BootedSystemd, graph: Graph) -> None:
    """Write every node's unit and config, start the graph, wait until all is healthy."""
    if graph.program != NODE_SCRIPT:
        source = Path(__file__).resolve().parent / "services" / "node.py"
        ct.write_file(graph.program, source.read_text(), 0o755)
    for node in graph.nodes:
        ct.write_file(*unit_file(graph, node))
        ct.write_file(node.config_path, node_config(graph, node))
        if node.activated:
            socket = f"[Socket]\nListenStream=127.0.0.1:{node.port}\n"
            ct.write_file(f"{UNIT_DIR}/{node.socket}", socket)
    for path, text in job_files(graph).items():
        ct.write_file(path, text)
    ct.systemctl("daemon-reload")
    start(ct, graph, graph.nodes)
    wait_healthy(ct, graph)
    if "job" in graph.extra:  # its timer waits for the hour; it ran once, as it had
        ct.systemctl("start", "--", f"{graph.extra['job']}.timer", f"{graph.extra['job']}.service")


def start(ct: BootedSystemd, graph: Graph, nodes: tuple[Node, ...] | list[Node]) -> None:
    ordered = graph.start_order(list(nodes))
    # A socket-activated node: its socket; the first connection starts the service.
    ct.systemctl("start", "--", *(n.socket if n.activated else n.unit for n in ordered))


def probe_all(ct: BootedSystemd, graph: Graph) -> dict[str, int]:
    """Every node's /healthz status now (0: no answer)."""
    return {
        n.name: http_probe(ct, n.health_url, timeout=HEALTH_TIMEOUT).status for n in graph.nodes
    }


def wait_healthy(ct: BootedSystemd, graph: Graph, timeout: float = 60.0) -> None:
    """Until every node answers 200; TimeoutError after ``timeout`` seconds (a bound for
    a busy machine, not a figure: a healthy graph answers within a few)."""

    def healthy() -> bool:
        return all(status == 200 for status in probe_all(ct, graph).values())

    try:
        ct.wait_for(healthy, timeout=timeout, interval=0.3, what=f"graph {graph.seed} healthy")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}: {describe(ct, graph)}") from None


def describe(ct: BootedSystemd, graph: Graph) -> str:
    """Each node's answer and unit state, and the last words of any node that is not up:
    what a set-up that never became healthy is reported with."""
    parts = []
    for node in graph.nodes:
        status = http_probe(ct, node.health_url, timeout=HEALTH_TIMEOUT).status
        state = unit_properties(ct, node.unit, ("ActiveState", "SubState", "Result"))
        active, sub, result = (state.get(k, "?") for k in ("ActiveState", "SubState", "Result"))
        part = f"{node.unit} :{node.port} {status or 'no answer'} {active}/{sub} ({result})"
        if active != "active":
            tail = ct.run(
                ["journalctl", "--no-pager", "-o", "cat", "-n", "3", "-u", node.unit], check=False
            ).stdout
            part += " [" + " | ".join(tail.split("\n")).strip(" |") + "]"
        parts.append(part)
    return "; ".join(parts)


def uninstall(ct: BootedSystemd, graph: Graph) -> None:
    """Stop every node and remove every trace of the graph (drop-ins and mounts included)."""
    units = graph.units + [n.socket for n in graph.nodes if n.activated]
    if "job" in graph.extra:
        units += [f"{graph.extra['job']}.timer", f"{graph.extra['job']}.service"]
    # A fault masked one (its link to /dev/null in /etc): unmasked, which reloads too.
    masked = [u for u in units if (ct.root / DROPIN_DIR.lstrip("/") / u).is_symlink()]
    if masked:
        ct.systemctl("unmask", "--", *masked, check=False)
    ct.systemctl("stop", "--", *units, check=False)
    for node in graph.nodes:
        for _ in range(3):  # a tmpfs a fault mounted, maybe twice
            if ct.run(["mountpoint", "-q", node.state_dir], check=False).returncode != 0:
                break
            ct.run(["umount", "-l", node.state_dir], check=False)
    paths = [f"{UNIT_DIR}/{u}" for u in units] + [f"{DROPIN_DIR}/{u}.d" for u in units]
    paths += [unit_file(graph, n)[0] for n in graph.nodes if n.template]
    paths += list(job_files(graph))
    paths += [n.config_path for n in graph.nodes] + [n.state_dir for n in graph.nodes]
    if graph.program != NODE_SCRIPT:
        paths.append(str(Path(graph.program).parent.parent))
    ct.run(["rm", "-rf", *paths])
    ct.run(["sh", "-c", f"rm -f {RUN_DIR}/*"])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", "--", *units, check=False)


def walk(graph: Graph, name: str) -> Iterator[Node]:
    """``name`` and everything it depends on, depth first."""
    node = graph.node(name)
    yield node
    for dep, _ in node.deps:
        yield from walk(graph, dep)
