"""Generated graphs of the daemons operators run, in a booted container: Debian's nginx
and haproxy in front, redis-server as a cache and as a queue's broker, memcached, and
Python services written the way small real apps are (testbed/services/realapp.py),
configured where Debian and operators put things:

- nginx reads ``/etc/nginx/nginx.conf``, which includes ``sites-enabled/``, where the
  graph's site is a symlink to ``sites-available/``; haproxy runs as an instance of the
  ``haproxy@.service`` an operator writes (``/etc/haproxy/%i.cfg``);
- ``redis-server@NAME`` is Debian's own template (``/etc/redis/redis-NAME.conf``);
  memcached runs as an instance of ``memcached@.service`` over Debian's wrapper
  (``/etc/memcached_NAME.conf``);
- an app is either ``NAME.service`` reading ``/etc/default/NAME`` or an instance of a
  template ``STEM@.service`` reading ``/etc/STEM/%i.env``; its program is its own copy
  under ``/opt/NAME/bin/``; a Unix-socket server keeps its socket in its
  ``RuntimeDirectory=``.

Four shapes, drawn from the seed with names and ports:

    queue    front -> producer -> redis <- consumer (a worker: no port, no health target)
    socket   front -> app -> a server reached only by its Unix socket
    cache    front -> app -> redis or memcached (the app spools requests to its
             StateDirectory= and holds LimitNOFILE=256, as such apps are set up)
    tls      front -> app -> an API it reaches over HTTPS (a certificate from the
             graph's own CA, in /etc/STEM/tls/; the app trusts that CA) -> redis

Every daemon runs the real program with its real errors; nothing in a name, a port or a
path says what it is. Debian's packages are installed by scripts/setup and disabled on
the machine, so that nothing starts in a container by itself.

    graph = generate(seed, "queue")
    install(ct, graph)      # files, daemon-reload, start, wait healthy
    ...
    uninstall(ct, graph)
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from testbed import tls
from testbed.container import BootedSystemd
from testbed.graph import PORT_RANGE, TAKEN_PORTS, _name
from testbed.observe import http_probe, unit_properties

__all__ = [
    "SHAPES",
    "Daemon",
    "DaemonGraph",
    "Shape",
    "generate",
    "install",
    "prepare",
    "probe_all",
    "renamed",
    "uninstall",
    "wait_healthy",
]

Shape = Literal["queue", "socket", "cache", "tls"]
#: The shapes the first kinds draw from (a kind's seeds give the same graphs whatever
#: shapes came after), and every shape.
SHAPES: tuple[Shape, ...] = ("queue", "socket", "cache")
ALL_SHAPES: tuple[Shape, ...] = (*SHAPES, "tls")
Role = Literal[
    "nginx", "haproxy", "web", "producer", "consumer", "socket_server", "redis", "memcached"
]
#: The roles that run realapp.py.
APPS = ("web", "producer", "consumer", "socket_server")
REALAPP = Path(__file__).resolve().parent / "services" / "realapp.py"
APP_USER = "appsvc"
HEALTH_TIMEOUT = 2.0
NGINX_SITES = "/etc/nginx/sites-enabled"
NGINX_AVAILABLE = "/etc/nginx/sites-available"
UNIT_DIR = "/etc/systemd/system"

#: The instance templates an operator writes for a second haproxy or memcached.
HAPROXY_TEMPLATE = """\
[Unit]
Description=HAProxy Load Balancer (%i)
After=network-online.target

[Service]
Environment="CONFIG=/etc/haproxy/%i.cfg" "PIDFILE=/run/haproxy-%i.pid"
ExecStartPre=/usr/sbin/haproxy -f $CONFIG -c -q
ExecStart=/usr/sbin/haproxy -Ws -f $CONFIG -p $PIDFILE
ExecReload=/usr/sbin/haproxy -Ws -f $CONFIG -c -q
ExecReload=/bin/kill -USR2 $MAINPID
KillMode=mixed
Restart=always
SuccessExitStatus=143
Type=notify
"""
MEMCACHED_TEMPLATE = """\
[Unit]
Description=memcached daemon (%i)
After=network.target

[Service]
ExecStart=/usr/share/memcached/scripts/systemd-memcached-wrapper /etc/memcached_%i.conf
PrivateTmp=true
Restart=always
"""


@dataclass(frozen=True)
class Daemon:
    """One service of a graph: its name (an instance's is ``stem@instance``), its role,
    where it listens (a port, or a Unix socket path), the daemons it reaches, and
    whether opsbot has a health target for it."""

    name: str
    role: Role
    port: int | None
    reaches: tuple[str, ...] = ()
    health: bool = False
    socket: str | None = None
    #: An app's convention: "default" (/etc/default/NAME) or "instance" (a template's).
    convention: str = "default"
    #: It serves HTTPS (its certificate and key in /etc/STEM/tls/).
    tls: bool = False

    @property
    def unit(self) -> str:
        if self.role == "nginx":
            return "nginx.service"
        return f"{self.name}.service"

    @property
    def stem(self) -> str:
        return self.name.partition("@")[0]

    @property
    def instance(self) -> str:
        return self.name.partition("@")[2]

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"

    @property
    def env_file(self) -> str:
        """Where an app's settings are: /etc/default/NAME, or /etc/STEM/INSTANCE.env."""
        if self.convention == "instance":
            return f"/etc/{self.stem}/{self.instance}.env"
        return f"/etc/default/{self.name}"

    @property
    def program(self) -> str:
        return f"/opt/{self.stem}/bin/{self.stem}"

    @property
    def state_dir(self) -> str:
        return f"/var/lib/{self.name.replace('@', '-')}"

    @property
    def cert_file(self) -> str:
        """Its server certificate (a TLS daemon's); its key beside it, ``.key``."""
        return f"/etc/{self.stem}/tls/{self.name.replace('@', '-')}.crt"

    @property
    def ca_file(self) -> str:
        """The CA a client of a TLS daemon trusts."""
        return f"/etc/{self.stem}/ca.crt"


@dataclass(frozen=True)
class DaemonGraph:
    seed: int
    shape: Shape
    daemons: tuple[Daemon, ...]
    front: str
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    def daemon(self, name: str) -> Daemon:
        return next(d for d in self.daemons if d.name == name)

    def by_role(self, role: Role) -> Daemon:
        return next(d for d in self.daemons if d.role == role)

    @property
    def units(self) -> list[str]:
        return [d.unit for d in self.daemons]

    @property
    def checked(self) -> list[Daemon]:
        """The daemons with a health target."""
        return [d for d in self.daemons if d.health]

    def opsbot_config(self, settle_seconds: float) -> str:
        """opsbot.toml for this graph: restart, start, reload and reset-failed on its
        units; a health target for each daemon that has one."""
        units = ", ".join(f'"{u}"' for u in self.units)
        lines = [
            f"# opsbot on generated daemon graph {self.seed} ({self.shape})",
            "[executor]",
            "approval_ttl_seconds = 3600",
            "max_waiting_plans_per_submitter = 1000",
            "max_waiting_plans = 5000",
            f"settle_seconds = {settle_seconds:g}",
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
        for d in self.checked:
            lines += [
                "",
                f"[diagnose.health.{d.name.replace('@', '-')}]",
                f'url = "{d.health_url}"',
                f'unit = "{d.unit}"',
                f"timeout_seconds = {HEALTH_TIMEOUT}",
            ]
        return "\n".join(lines) + "\n"


# -- generating ------------------------------------------------------------------------------


def generate(seed: int, shape: Shape) -> DaemonGraph:
    """A graph of ``shape`` made from ``seed`` (the same seed, the same graph)."""
    rng = random.Random(seed * 7919 + ALL_SHAPES.index(shape))
    used: set[str] = set()
    ports: set[int] = set()

    def port() -> int:
        while True:
            p = rng.randint(*PORT_RANGE)
            if p not in ports and p not in TAKEN_PORTS:
                ports.add(p)
                return p

    def app(
        role: Role, reaches: tuple[str, ...], health: bool, tls: bool = False, **more: str
    ) -> Daemon:
        stem = _name(rng, used)
        convention = rng.choice(("default", "instance"))
        name = f"{stem}@{_name(rng, used)}" if convention == "instance" else stem
        listens = role != "consumer" and "socket" not in more
        return Daemon(
            name,
            role,
            port() if listens else None,
            reaches,
            health,
            more.get("socket"),
            convention,
            tls,
        )

    store_role: Role = "redis" if shape != "cache" or rng.random() < 0.5 else "memcached"
    store_stem = "redis-server" if store_role == "redis" else "memcached"
    store = Daemon(f"{store_stem}@{_name(rng, used)}", store_role, port())
    daemons: list[Daemon] = [store]
    if shape == "queue":
        producer = app("producer", (store.name,), True)
        consumer = app("consumer", (store.name,), False)
        daemons += [producer, consumer]
        upstream = producer
    elif shape == "socket":
        server_name = _name(rng, used)
        server = Daemon(
            server_name,
            "socket_server",
            None,
            (),
            False,
            f"/run/{server_name}/{server_name}.sock",
        )
        web = app("web", (server.name, store.name), True)
        daemons += [server, web]
        upstream = web
    elif shape == "tls":
        api = app("web", (store.name,), False, tls=True)
        web = app("web", (api.name,), True)
        daemons += [api, web]
        upstream = web
    else:
        web = app("web", (store.name,), True)
        daemons.append(web)
        upstream = web
    front_role: Role = rng.choice(("nginx", "haproxy"))
    front_name = _name(rng, used) if front_role == "nginx" else f"haproxy@{_name(rng, used)}"
    front = Daemon(front_name, front_role, port(), (upstream.name,), True)
    daemons.insert(0, front)
    return DaemonGraph(seed, shape, tuple(daemons), front=front.name)


def renamed(graph: DaemonGraph, salt: int) -> DaemonGraph:
    """The same graph with every name, port and path drawn anew from ``salt``."""
    rng = random.Random(salt)
    used = {d.name for d in graph.daemons}
    names: dict[str, str] = {}
    for d in graph.daemons:
        if d.role == "redis":
            names[d.name] = f"redis-server@{_name(rng, used)}"
        elif d.role == "memcached":
            names[d.name] = f"memcached@{_name(rng, used)}"
        elif d.role == "haproxy":
            names[d.name] = f"haproxy@{_name(rng, used)}"
        elif "@" in d.name:
            names[d.name] = f"{_name(rng, used)}@{_name(rng, used)}"
        else:
            names[d.name] = _name(rng, used)
    taken = {d.port for d in graph.daemons if d.port} | TAKEN_PORTS
    out = []
    for d in graph.daemons:
        port: int | None = None
        if d.port is not None:
            drawn = rng.randint(*PORT_RANGE)
            while drawn in taken:
                drawn = rng.randint(*PORT_RANGE)
            taken.add(drawn)
            port = drawn
        new = names[d.name]
        socket = f"/run/{new}/{new}.sock" if d.socket else None
        reaches = tuple(names[r] for r in d.reaches)
        out.append(replace(d, name=new, port=port, socket=socket, reaches=reaches))
    return replace(graph, daemons=tuple(out), front=names[graph.front])


# -- files -----------------------------------------------------------------------------------


def _app_env(graph: DaemonGraph, d: Daemon) -> str:
    lines = [f"# {d.name}: settings", f"ROLE={d.role}"]
    if d.port is not None:
        lines.append(f"PORT={d.port}")
    if d.socket:
        lines.append(f"LISTEN_SOCKET={d.socket}")
    for name in d.reaches:
        target = graph.daemon(name)
        if target.role == "redis":
            lines.append(f"REDIS_URL=redis://127.0.0.1:{target.port}/0")
        elif target.role == "memcached":
            lines.append(f"MEMCACHED=127.0.0.1:{target.port}")
        elif target.socket:
            lines.append(f"BACKEND_SOCKET={target.socket}")
        elif target.tls:
            lines += [f"BACKEND_URL=https://127.0.0.1:{target.port}", f"TLS_CA={d.ca_file}"]
        else:
            lines.append(f"BACKEND_URL=http://127.0.0.1:{target.port}")
    if d.role in ("producer", "consumer"):
        lines += [f"QUEUE_KEY={graph.seed}-jobs", "QUEUE_MAX=200", "QUEUE_EVERY=0.01"]
    if d.tls:
        lines += [f"TLS_CERT={d.cert_file}", f"TLS_KEY={key_file(d)}"]
    if graph.shape == "cache" and d.role == "web":
        lines += ["SPOOL=1", f"STATE_DIR={d.state_dir}"]
    return "\n".join(lines) + "\n"


def _app_unit(graph: DaemonGraph, d: Daemon) -> tuple[str, str]:
    """(path, text): ``NAME.service``, or the template ``STEM@.service`` for an instance."""
    notify = d.role != "consumer"
    env = "/etc/%p/%i.env" if d.convention == "instance" else d.env_file
    state = d.state_dir.removeprefix("/var/lib/")
    if d.convention == "instance":
        state = "%p-%i"
    lines = [
        f"# {d.name} (generated daemon graph {graph.seed})",
        "[Unit]",
        f"Description={d.stem} service",
        "After=network.target",
        "StartLimitIntervalSec=30",
        "StartLimitBurst=3",
        "",
        "[Service]",
        f"Type={'notify' if notify else 'simple'}",
        *(["NotifyAccess=main"] if notify else []),
        f"User={APP_USER}",
        f"EnvironmentFile={env}",
        f"ExecStart=/usr/bin/python3 -u {d.program}",
        f"StateDirectory={state}",
        *([f"RuntimeDirectory={d.name}"] if d.socket else []),
        "LimitNOFILE=256",
        # A web app restarts on failure; a worker and a small socket server are often
        # written without Restart= (systemd's default: no).
        "Restart=on-failure" if d.role in ("web", "producer") else "Restart=no",
        "RestartSec=200ms",
        "",
    ]
    text = "\n".join(lines)
    if d.convention == "instance":
        return f"{UNIT_DIR}/{d.stem}@.service", text
    return f"{UNIT_DIR}/{d.unit}", text


def _nginx_site(graph: DaemonGraph, d: Daemon) -> str:
    upstream = graph.daemon(d.reaches[0])
    server = f"unix:{upstream.socket}" if upstream.socket else f"127.0.0.1:{upstream.port}"
    return (
        f"# {d.name}: generated daemon graph {graph.seed}\n"
        f"upstream {d.name}_backend {{\n    server {server};\n}}\n\n"
        "server {\n"
        f"    listen 127.0.0.1:{d.port};\n"
        f"    server_name {d.name}.example;\n"
        "    location / {\n"
        f"        proxy_pass http://{d.name}_backend;\n"
        "        proxy_connect_timeout 2s;\n"
        "        proxy_read_timeout 3s;\n"
        "    }\n"
        "}\n"
    )


def _haproxy_cfg(graph: DaemonGraph, d: Daemon) -> str:
    upstream = graph.daemon(d.reaches[0])
    server = upstream.socket if upstream.socket else f"127.0.0.1:{upstream.port}"
    return (
        f"# {d.name}: generated daemon graph {graph.seed}\n"
        "global\n    maxconn 256\n\n"
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n"
        "    timeout server 3s\n\n"
        f"frontend {d.instance}_in\n    bind 127.0.0.1:{d.port}\n"
        f"    default_backend {d.instance}_app\n\n"
        f"backend {d.instance}_app\n    server app1 {server}\n"
    )


def _redis_conf(d: Daemon) -> str:
    return (
        f"# {d.name}\nbind 127.0.0.1\nport {d.port}\nsupervised systemd\ndaemonize no\n"
        f'logfile ""\nsave ""\nappendonly no\ndir /var/lib/redis\n'
        f"pidfile /run/redis-{d.instance}/redis-server.pid\nmaxmemory 64mb\n"
    )


def files(graph: DaemonGraph) -> dict[str, str]:
    """Every file of the graph, by path (its programs apart)."""
    out: dict[str, str] = {}
    for d in graph.daemons:
        if d.role == "nginx":
            out[f"{NGINX_AVAILABLE}/{d.name}"] = _nginx_site(graph, d)
        elif d.role == "haproxy":
            out[f"/etc/haproxy/{d.instance}.cfg"] = _haproxy_cfg(graph, d)
        elif d.role == "redis":
            out[f"/etc/redis/redis-{d.instance}.conf"] = _redis_conf(d)
        elif d.role == "memcached":
            out[f"/etc/memcached_{d.instance}.conf"] = (
                f"# {d.name}\n-m 16\n-p {d.port}\n-u memcache\n-l 127.0.0.1\n-U 0\n"
            )
        else:
            out[d.env_file] = _app_env(graph, d)
            path, text = _app_unit(graph, d)
            out[path] = text
    return out


def tls_files(graph: DaemonGraph) -> dict[str, tuple[str, int]]:
    """The graph's certificates and keys, by path, with their modes: a CA made for the
    graph (kept in ``graph.extra``, for a fault to issue from), each TLS daemon's
    certificate for 90 days and its key, and the CA in each of its clients' ca_file."""
    served = [d for d in graph.daemons if d.tls]
    if not served:
        return {}
    authority = tls.authority(f"graph {graph.seed} CA")
    graph.extra["ca_cert"], graph.extra["ca_key"] = authority.cert, authority.key
    out: dict[str, tuple[str, int]] = {}
    for d in served:
        issued = authority.issue(d.name, datetime.now(UTC) + timedelta(days=90))
        out[d.cert_file] = (issued.cert, 0o644)
        out[key_file(d)] = (issued.key, 0o640)
        for client in graph.daemons:
            if d.name in client.reaches:
                out[client.ca_file] = (authority.cert, 0o644)
    return out


def key_file(d: Daemon) -> str:
    return d.cert_file.removesuffix(".crt") + ".key"


# -- the container ---------------------------------------------------------------------------


def prepare(ct: BootedSystemd) -> None:
    """Once per container: the apps' user, the instance templates operators write, and
    nginx without Debian's default site (its :80 is another suite's)."""
    if ct.run(["id", APP_USER], check=False).returncode != 0:
        ct.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", APP_USER]
        )
    ct.write_file(f"{UNIT_DIR}/haproxy@.service", HAPROXY_TEMPLATE)
    ct.write_file(f"{UNIT_DIR}/memcached@.service", MEMCACHED_TEMPLATE)
    ct.run(["rm", "-f", f"{NGINX_SITES}/default"])
    ct.systemctl("daemon-reload")


def install(ct: BootedSystemd, graph: DaemonGraph) -> None:
    """Write the graph's files and programs, start it (the store first, the front last)
    and wait until every health target answers 200."""
    for d in graph.daemons:
        if d.role in APPS:
            ct.write_file(d.program, REALAPP.read_text(), 0o755)
    for path, text in files(graph).items():
        ct.write_file(path, text)
    for path, (text, mode) in tls_files(graph).items():
        ct.write_file(path, text, mode)
        if path.endswith(".key"):  # its service's user reads it, no one else
            ct.run(["chown", f"root:{APP_USER}", path])
    front = graph.daemon(graph.front)
    if front.role == "nginx":
        ct.run(["ln", "-sf", f"{NGINX_AVAILABLE}/{front.name}", f"{NGINX_SITES}/{front.name}"])
    ct.systemctl("daemon-reload")
    # As an operator brings a host up: what is reached first (each start waits for it to
    # say it is ready), then what reaches it, then the front.
    below = [d for d in graph.daemons if d.role in ("redis", "memcached", "socket_server")]
    ct.systemctl("start", "--", *(d.unit for d in below))
    apps = [d for d in graph.daemons if d.role in ("web", "producer", "consumer")]
    ct.systemctl("start", "--", *(d.unit for d in apps))
    if front.role == "nginx" and _active(ct, "nginx.service"):
        ct.systemctl("reload", "nginx.service")
    else:
        ct.systemctl("start", "--", front.unit)
    wait_healthy(ct, graph)


def _active(ct: BootedSystemd, unit: str) -> bool:
    return unit_properties(ct, unit, ("ActiveState",)).get("ActiveState") == "active"


def probe_all(ct: BootedSystemd, graph: DaemonGraph) -> dict[str, int]:
    """Every health target's status now (0: no answer)."""
    return {
        d.name: http_probe(ct, d.health_url, timeout=HEALTH_TIMEOUT).status for d in graph.checked
    }


def wait_healthy(ct: BootedSystemd, graph: DaemonGraph, timeout: float = 60.0) -> None:
    """Until every health target answers 200 and every daemon is active."""

    def healthy() -> bool:
        states = [unit_properties(ct, u, ("ActiveState",)).get("ActiveState") for u in graph.units]
        return all(s == "active" for s in states) and all(
            status == 200 for status in probe_all(ct, graph).values()
        )

    try:
        ct.wait_for(healthy, timeout=timeout, interval=0.3, what=f"daemon graph {graph.seed} up")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}: {describe(ct, graph)}") from None


def describe(ct: BootedSystemd, graph: DaemonGraph) -> str:
    """Each daemon's state and answer, and the last words of one that is not up."""
    parts = []
    for d in graph.daemons:
        state = unit_properties(ct, d.unit, ("ActiveState", "SubState", "Result"))
        answer = http_probe(ct, d.health_url, timeout=HEALTH_TIMEOUT).status if d.health else "-"
        part = f"{d.unit} {state.get('ActiveState')}/{state.get('SubState')} answer {answer}"
        if state.get("ActiveState") != "active":
            tail = ct.run(
                ["journalctl", "--no-pager", "-o", "cat", "-n", "3", "-u", d.unit], check=False
            ).stdout
            part += " [" + " | ".join(tail.split("\n")).strip(" |") + "]"
        parts.append(part)
    return "; ".join(parts)


def uninstall(ct: BootedSystemd, graph: DaemonGraph) -> None:
    """Stop every daemon (nginx only loses the graph's site) and remove every trace."""
    front = graph.daemon(graph.front)
    units = [d.unit for d in graph.daemons if d.role != "nginx"]
    ct.systemctl("unmask", "--", *units, check=False)
    ct.systemctl("stop", "--", *units, check=False)
    for d in graph.daemons:
        for _ in range(3):  # a tmpfs a fault mounted
            if ct.run(["mountpoint", "-q", d.state_dir], check=False).returncode != 0:
                break
            ct.run(["umount", "-l", d.state_dir], check=False)
    paths = list(files(graph))
    paths += [f"{UNIT_DIR}/{u}.d" for u in graph.units]
    paths += [str(Path(d.program).parent.parent) for d in graph.daemons if d.role in APPS]
    paths += [d.state_dir for d in graph.daemons if d.role in APPS]
    paths += [str(Path(d.cert_file).parent) for d in graph.daemons if d.tls]
    paths += [
        c.ca_file for d in graph.daemons if d.tls for c in graph.daemons if d.name in c.reaches
    ]
    if front.role == "nginx":
        paths.append(f"{NGINX_SITES}/{front.name}")
    ct.run(["rm", "-rf", *paths])
    if front.role == "nginx" and _active(ct, "nginx.service"):
        ct.systemctl("reload", "nginx.service", check=False)
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", "--", *units, check=False)


def graph_json(graph: DaemonGraph) -> str:
    """The graph as the report keeps it (names, roles, ports, what reaches what)."""
    return json.dumps(
        [
            {"name": d.name, "role": d.role, "port": d.port, "reaches": list(d.reaches)}
            for d in graph.daemons
        ]
    )
