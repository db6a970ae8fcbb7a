"""Faults in the real-software graphs (testbed/daemons.py), made the way they happen on a
host, and the answer each calls for, derived from the graph and the fault by
construction, never by running opsbot. The same judge as the generated suite's
(graph_faults.judge_*): a plan of one of the acceptable shapes, each step with the
precondition it must carry, or a note with its cause; never a step on a unit the fault
does not call for.

==================  =====================================================  ===============
kind                what is done                                           the answer
==================  =====================================================  ===============
consumer_down       (queue) the worker that drains the queue is killed     start the worker
                    (Restart=no); the producer's answers say "queue full"
consumer_stale      (queue) the broker is restarted (a routine restart);   restart the
                    the worker loses its connection and waits to be        worker (pinned)
                    restarted, alive; the queue backs up
unix_server_down    (socket) the server the app reaches only by a Unix     start the server
                    socket path is killed (Restart=no); its socket goes
                    with its RuntimeDirectory=
inodes_full         (cache) the app's StateDirectory= is out of inodes      note: disk_full
                    (a tmpfs, nr_inodes); its spool writes fail with
                    Python's [Errno 28]
fds_exhausted       (cache) the app leaks a descriptor per request until   restart the app
                    LimitNOFILE=; [Errno 24] Too many open files            (pinned)
address_freed       the app, restarted while another process held its      start it (reset-
                    port, failed with "[Errno 98] Address already in use"  failed first if
                    (no port named); that process has gone since           systemd gave up)
package_config      the app's package (a local .deb owning its program     note: config_error,
                    and settings) upgraded with dpkg -i after the host     naming the package
                    was healthy: its new settings file breaks the start
readonly_fs         (cache) the filesystem of the app's StateDirectory= is   note: read_only
                    remounted read-only (as the kernel does after I/O
                    errors); its spool writes fail with [Errno 30]
mount_failed        the app needs a mount (RequiresMountsFor=, a tmpfs     note: mount_failed,
                    in a mount unit) whose options are edited with a       naming the mount
                    typo; at the next boot the mount fails and the app
                    with it ("Dependency failed")
cert_expired        (tls) the API the app reaches over HTTPS is given a    note: certificate_
                    certificate that has expired (a renewal hook copied    expired, naming
                    an old one) and restarted; the app's checks say        the API and its
                    "certificate verify failed: certificate has expired"   certificate file
==================  =====================================================  ===============
"""

from __future__ import annotations

import os
import random
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from testbed import daemons, tls
from testbed.container import BootedSystemd
from testbed.daemons import Daemon, DaemonGraph, Shape as GraphShape
from testbed.graph_faults import SYMPTOMS, Expected, Judging, Shape
from testbed.injecting import Injector
from testbed.judge import START, Step
from testbed.observe import http_probe, unit_properties

DaemonKind = Literal[
    "consumer_down",
    "consumer_stale",
    "unix_server_down",
    "inodes_full",
    "fds_exhausted",
    "address_freed",
    "package_config",
    "cert_expired",
    "readonly_fs",
    "mount_failed",
]
DAEMON_KINDS: tuple[DaemonKind, ...] = DaemonKind.__args__  # type: ignore[attr-defined]

#: The shapes a kind's graph may take (drawn from the seed among them).
SHAPES_OF: dict[DaemonKind, tuple[GraphShape, ...]] = {
    "consumer_down": ("queue",),
    "consumer_stale": ("queue",),
    "unix_server_down": ("socket",),
    "inodes_full": ("cache",),
    "fds_exhausted": ("cache",),
    "address_freed": daemons.SHAPES,
    "package_config": daemons.SHAPES,
    "cert_expired": ("tls",),
    "readonly_fs": ("cache",),
    "mount_failed": daemons.SHAPES,
}

#: Ten seeds of each kind, from 4000 on (ten numbers set aside for each kind in the order
#: above), none looked at while the runbook was written. ``OPSBOT_GATE=full`` runs them all.
FULL_DAEMON_GATE: dict[DaemonKind, tuple[int, ...]] = {
    kind: tuple(range(4000 + 10 * i, 4010 + 10 * i)) for i, kind in enumerate(DAEMON_KINDS)
}
#: Of each kind's seeds, the first this many carry an acceptable plan through approval,
#: apply and verification (as the generated suite's, graph_faults.CARRIED_PER_KIND).
CARRIED_PER_KIND = 3
#: What CI runs on every push: each kind's first two seeds, both carried (14 cases).
CI_DAEMON_GATE: dict[DaemonKind, tuple[int, ...]] = {
    kind: seeds[:2] for kind, seeds in FULL_DAEMON_GATE.items()
}
DAEMON_GATES = {"ci": CI_DAEMON_GATE, "full": FULL_DAEMON_GATE}


def daemon_gate_named(name: str) -> dict[DaemonKind, tuple[int, ...]]:
    """The gate ``OPSBOT_GATE`` names ("ci" when unset); an unknown name is an error."""
    try:
        return DAEMON_GATES[name or "ci"]
    except KeyError:
        raise ValueError(
            f"OPSBOT_GATE={name!r}: expected one of {', '.join(DAEMON_GATES)}"
        ) from None


DAEMON_CASES: tuple[tuple[DaemonKind, int], ...] = tuple(
    sorted(
        (
            (kind, seed)
            for kind, seeds in daemon_gate_named(os.environ.get("OPSBOT_GATE", "")).items()
            for seed in seeds
        ),
        key=lambda c: c[1],
    )
)


def carried(kind: DaemonKind, seed: int) -> bool:
    return seed in FULL_DAEMON_GATE[kind][:CARRIED_PER_KIND]


def case_graph(kind: DaemonKind, seed: int) -> DaemonGraph:
    """The graph of case (``kind``, ``seed``): a shape the kind can happen in."""
    shapes = SHAPES_OF[kind]
    shape = shapes[random.Random(seed).randrange(len(shapes))]
    return daemons.generate(seed, shape)


@dataclass
class DaemonCase(Judging):
    seed: int
    kind: DaemonKind
    graph: DaemonGraph
    target: Daemon
    asked_about: str
    symptom: str
    expected: Expected
    actions: list[str] = field(default_factory=list)
    observed: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.kind

    @property
    def target_unit(self) -> str:
        return self.target.unit

    @property
    def depth(self) -> int:
        """How many hops the fault is below the unit asked about (0: that unit's own)."""
        asked = next(d for d in self.graph.daemons if d.unit == self.asked_about)
        seen, level = {asked.name}, [asked.name]
        for hops in range(len(self.graph.daemons)):
            if self.target.name in level:
                return hops
            level = [r for n in level for r in self.graph.daemon(n).reaches if r not in seen]
            seen.update(level)
        return 1  # a consumer beside the path: one hop from its broker's producer

    def wait_healthy(self, ct: BootedSystemd, timeout: float) -> None:
        daemons.wait_healthy(ct, self.graph, timeout=timeout)

    def probe(self, ct: BootedSystemd) -> dict[str, int]:
        return daemons.probe_all(ct, self.graph)


class _Injector(Injector):
    def __init__(self, ct: BootedSystemd, graph: DaemonGraph) -> None:
        super().__init__(ct)
        self.graph = graph

    def label(self) -> str:
        return f"daemon graph {self.graph.seed} ({self.graph.shape})"

    def now(self) -> str:
        return daemons.describe(self.ct, self.graph)

    def props(self, unit: str, *names: str) -> dict[str, str]:
        return unit_properties(self.ct, unit, ("ActiveState", "SubState", "Result", *names))

    def invocation(self, unit: str) -> str:
        return self.props(unit, "InvocationID")["InvocationID"]

    def front_sees_it(self) -> None:
        front = self.graph.daemon(self.graph.front)

        def failing() -> bool:
            status = http_probe(self.ct, front.health_url, timeout=daemons.HEALTH_TIMEOUT).status
            self.observed["front"] = str(status)
            return status != 200

        self.wait(f"{front.unit}'s health failing", failing)

    def listening(self, port: int) -> Callable[[], bool]:
        def check() -> bool:
            shown = self.ct.run(["ss", "-ltnH", f"sport = :{port}"], check=False).stdout
            return bool(shown.strip())

        return check


def _kill_for_good(inj: _Injector, d: Daemon) -> None:
    """SIGKILL, and the unit stays failed (its Restart=no)."""
    inj.run("systemctl", "kill", "--kill-whom=main", "--signal=KILL", "--", d.unit)
    inj.wait(f"{d.unit} failed", inj.unit_is(d.unit, ActiveState="failed"))


def _start(d: Daemon) -> Expected:
    step = Step(START, d.unit, ("failed",))
    return Expected("plan", (Shape((step,)),), may_touch=frozenset([d.unit]))


def _consumer_down(inj: _Injector, d: Daemon) -> Expected:
    _kill_for_good(inj, d)
    inj.front_sees_it()
    return _start(d)


def _consumer_stale(inj: _Injector, d: Daemon) -> Expected:
    invocation = inj.invocation(d.unit)
    broker = inj.graph.daemon(d.reaches[0])
    inj.run("systemctl", "restart", "--", broker.unit)
    inj.front_sees_it()
    inj.wait(f"{d.unit} still running", inj.unit_is(d.unit, ActiveState="active"))
    step = Step(("restart_unit",), d.unit, ("active",), invocation)
    return Expected("plan", (Shape((step,)),), may_touch=frozenset([d.unit]))


def _unix_server_down(inj: _Injector, d: Daemon) -> Expected:
    _kill_for_good(inj, d)
    inj.front_sees_it()
    return _start(d)


def _inodes_full(inj: _Injector, d: Daemon) -> Expected:
    uid = inj.ct.run(["id", "-u", daemons.APP_USER]).stdout.strip()
    inj.run(
        "mount", "-t", "tmpfs", "-o", f"size=8m,nr_inodes=64,uid={uid},mode=0755", "tmpfs",
        d.state_dir,
    )  # fmt: skip
    # Files fill the inode table while its blocks are nearly all free (df -h says 1%).
    fill = (
        "import sys\n"
        "for i in range(1000):\n"
        "    try:\n"
        "        open(f'{sys.argv[1]}/cache-{i}', 'x').close()\n"
        "    except OSError:\n"
        "        break\n"
    )
    inj.run("/usr/bin/python3", "-c", fill, d.state_dir)
    inj.front_sees_it()
    return Expected("note", cause="disk_full", cause_unit=d.unit, may_touch=frozenset())


def _readonly_fs(inj: _Injector, d: Daemon) -> Expected:
    uid = inj.ct.run(["id", "-u", daemons.APP_USER]).stdout.strip()
    inj.run("mount", "-t", "tmpfs", "-o", f"size=8m,uid={uid},mode=0755", "tmpfs", d.state_dir)
    daemons.wait_healthy(inj.ct, inj.graph, timeout=30)  # it writes there, as before
    inj.run("mount", "-o", "remount,ro", d.state_dir)
    inj.front_sees_it()
    return Expected("note", cause="read_only", cause_unit=d.unit, may_touch=frozenset())


def _mount_failed(inj: _Injector, d: Daemon) -> Expected:
    mount = inj.graph.extra["mount"]
    # An edit to the mount (a typo: "8mb" for "8m") waits for the next boot to bite;
    # the reboot: the mount and what needs it stop, and come up again.
    inj.ct.write_file(f"/etc/systemd/system/{mount}", _mount_unit(inj.graph, d, "size=8mb"))
    inj.run("systemctl", "daemon-reload")
    inj.run("systemctl", "stop", "--", mount)
    inj.run("systemctl", "start", "--", d.unit, check=False)
    inj.wait(f"{mount} failed", inj.unit_is(mount, ActiveState="failed"))
    inj.front_sees_it()
    return Expected(
        "note",
        cause="mount_failed",
        cause_unit=mount,
        may_touch=frozenset(),
        names=inj.graph.extra["mount_where"],
    )


def _mount_unit(graph: DaemonGraph, d: Daemon, size: str) -> str:
    return (
        f"[Unit]\nDescription=scratch space of {d.name}\n\n[Mount]\nWhat=tmpfs\n"
        f"Where={graph.extra['mount_where']}\nType=tmpfs\nOptions={size},mode=0755\n"
    )


def _with_mount(ct: BootedSystemd, graph: DaemonGraph, d: Daemon) -> None:
    """Before the baseline: ``d`` needs a mount (its scratch space, a tmpfs in a mount
    unit), by RequiresMountsFor= in a drop-in, as an operator adds one."""
    where = f"/srv/{d.name.replace('@', '-')}-scratch"
    mount = ct.run(["systemd-escape", "--path", "--suffix=mount", where]).stdout.strip()
    graph.extra.update(mount=mount, mount_where=where)
    ct.write_file(f"/etc/systemd/system/{mount}", _mount_unit(graph, d, "size=8m"))
    ct.write_file(
        f"/etc/systemd/system/{d.unit}.d/50-scratch.conf",
        f"[Unit]\nRequiresMountsFor={where}\n",
    )
    ct.systemctl("daemon-reload")
    ct.systemctl("restart", "--", d.unit)
    daemons.wait_healthy(ct, graph, timeout=30)
    time.sleep(1.1)  # the edit comes in a later second than the baseline


def _fds_exhausted(inj: _Injector, d: Daemon) -> Expected:
    invocation = inj.invocation(d.unit)
    inj.run("systemctl", "kill", "--kill-whom=main", "--signal=USR2", "--", d.unit)
    # Its clients' requests, until it answers one with an error: each leaks a descriptor.
    load = (
        "import urllib.request, urllib.error\n"
        f"url = 'http://127.0.0.1:{d.port}/item/%d'\n"
        "for i in range(400):\n"
        "    try:\n"
        "        urllib.request.urlopen(url % i, timeout=2).read()\n"
        "    except (OSError, urllib.error.URLError):\n"
        "        break\n"
    )
    inj.run("/usr/bin/python3", "-c", load, check=False)
    inj.front_sees_it()
    step = Step(("restart_unit",), d.unit, ("active",), invocation)
    return Expected("plan", (Shape((step,)),), may_touch=frozenset([d.unit]))


def _address_freed(inj: _Injector, d: Daemon, rng: random.Random) -> Expected:
    port = d.port
    assert port is not None, f"{d.unit} listens on no port"
    squatter = f"squat{rng.randint(1000, 9999)}.service"
    inj.graph.extra["squatter"] = squatter
    inj.run("systemctl", "stop", "--", d.unit)
    inj.run(
        "systemd-run", f"--unit={squatter}", "-p", "DynamicUser=yes", "/usr/bin/python3", "-m",
        "http.server", "--bind", "127.0.0.1", str(port),
    )  # fmt: skip
    inj.wait(f"{squatter} listening", inj.listening(port))
    # Started again (a deploy's restart): the port is taken, and systemd gives up.
    inj.run("systemctl", "start", "--no-block", "--", d.unit)
    inj.wait(f"{d.unit} failed to start", inj.unit_is(d.unit, ActiveState="failed"))
    time.sleep(0.3)
    inj.wait(f"{d.unit} stays failed", inj.unit_is(d.unit, ActiveState="failed"))
    inj.run("systemctl", "stop", "--", squatter)
    inj.wait(f"port {port} free", lambda: not inj.listening(port)())
    plain = Shape((Step(START, d.unit, ("failed",)),))
    cleared = Shape(
        (
            Step(("reset_failed_unit",), d.unit, ("failed",)),
            Step(START, d.unit, ("inactive", "failed")),
        )
    )
    return Expected("plan", (plain, cleared), may_touch=frozenset([d.unit]))


def package_name(d: Daemon) -> str:
    return f"{d.stem}-app"


def _deb(ct: BootedSystemd, d: Daemon, version: str, settings: str) -> str:
    """A local .deb of ``d``'s program and settings (a conffile), built in the container;
    its postinst restarts the unit when it runs, as Debian's helpers write it."""
    name = package_name(d)
    root = f"/var/tmp/{name}_{version}"
    ct.run(["rm", "-rf", root])
    program = daemons.REALAPP.read_text()
    ct.write_file(f"{root}{d.program}", program, 0o755)
    ct.write_file(f"{root}{d.env_file}", settings)
    ct.write_file(
        f"{root}/DEBIAN/control",
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: ops <ops@example>\n"
        f"Depends: python3\nDescription: {d.stem}, the team's app\n",
    )
    ct.write_file(f"{root}/DEBIAN/conffiles", d.env_file + "\n")
    ct.write_file(
        f"{root}/DEBIAN/postinst",
        '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then\n'
        f"    systemctl try-restart {shlex.quote(d.unit)} || true\nfi\n",
        0o755,
    )
    deb = f"{root}.deb"
    ct.run(["dpkg-deb", "--root-owner-group", "--build", root, deb])
    return deb


def before_baseline(
    ct: BootedSystemd, case_kind: DaemonKind, graph: DaemonGraph, seed: int
) -> None:
    """What a kind sets up while the host is healthy: package_config's first version,
    mount_failed's mount."""
    if case_kind == "mount_failed":
        _with_mount(ct, graph, _target(graph, case_kind, seed))
        return
    if case_kind != "package_config":
        return
    d = _target(graph, case_kind, seed)
    settings = daemons.files(graph)[d.env_file]
    deb = _deb(ct, d, "1.4.2-1", settings)
    ct.run(["dpkg", "-i", deb])
    graph.extra["package"] = package_name(d)
    daemons.wait_healthy(ct, graph, timeout=30)
    # dpkg's log is to the second: the upgrade comes in a later second than the baseline.
    time.sleep(1.1)


def _package_config(inj: _Injector, d: Daemon) -> Expected:
    time.sleep(1.1)
    settings = daemons.files(inj.graph)[d.env_file]
    # The new version's settings default the port in shell syntax, which systemd's
    # EnvironmentFile= does not expand: the app reads PORT as written and refuses it.
    broken = settings.replace(f"PORT={d.port}", f"PORT=${{APP_PORT:-{d.port}}}")
    deb = _deb(inj.ct, d, "1.5.0-1", broken)
    inj.run("dpkg", "-i", "--force-confnew", deb)
    inj.wait(f"{d.unit} failed", inj.unit_is(d.unit, ActiveState="failed"))
    time.sleep(0.3)
    inj.wait(f"{d.unit} stays failed", inj.unit_is(d.unit, ActiveState="failed"))
    return Expected(
        "note",
        cause="config_error",
        cause_unit=d.unit,
        may_touch=frozenset(),
        names=package_name(d),
    )


def _cert_expired(inj: _Injector, d: Daemon) -> Expected:
    authority = tls.Authority(inj.graph.extra["ca_cert"], inj.graph.extra["ca_key"])
    old = authority.issue(d.name, datetime.now(UTC) - timedelta(hours=2))
    inj.ct.write_file(d.cert_file, old.cert)
    inj.ct.write_file(daemons.key_file(d), old.key, 0o640)
    inj.run("chown", f"root:{daemons.APP_USER}", daemons.key_file(d))
    inj.run("systemctl", "restart", "--", d.unit)
    inj.front_sees_it()
    return Expected(
        "note",
        cause="certificate_expired",
        cause_unit=d.unit,
        may_touch=frozenset(),
        names=d.cert_file,
    )


def _target(graph: DaemonGraph, kind: DaemonKind, seed: int) -> Daemon:
    if kind in ("consumer_down", "consumer_stale"):
        return graph.by_role("consumer")
    if kind == "unix_server_down":
        return graph.by_role("socket_server")
    front = graph.daemon(graph.front)
    app = graph.daemon(front.reaches[0])  # the app behind the front
    if kind == "cert_expired":
        return graph.daemon(app.reaches[0])  # the API it reaches over HTTPS
    return app


def choose(graph: DaemonGraph, kind: DaemonKind, seed: int) -> tuple[Daemon, str]:
    """(the daemon at fault, the unit the operator asks about): the front three times in
    four, else the app behind it."""
    rng = random.Random(seed * 7919 + 3)
    target = _target(graph, kind, seed)
    front = graph.daemon(graph.front)
    app = graph.daemon(front.reaches[0])
    asked = front if rng.random() < 0.75 else app
    return target, asked.unit


def inject(ct: BootedSystemd, graph: DaemonGraph, seed: int, kind: DaemonKind) -> DaemonCase:
    """Make case (``kind``, ``seed``)'s fault real on ``graph`` (installed and healthy)."""
    rng = random.Random(seed)
    target, asked = choose(graph, kind, seed)
    inj = _Injector(ct, graph)
    expected = {
        "consumer_down": lambda: _consumer_down(inj, target),
        "consumer_stale": lambda: _consumer_stale(inj, target),
        "unix_server_down": lambda: _unix_server_down(inj, target),
        "inodes_full": lambda: _inodes_full(inj, target),
        "fds_exhausted": lambda: _fds_exhausted(inj, target),
        "address_freed": lambda: _address_freed(inj, target, rng),
        "package_config": lambda: _package_config(inj, target),
        "cert_expired": lambda: _cert_expired(inj, target),
        "readonly_fs": lambda: _readonly_fs(inj, target),
        "mount_failed": lambda: _mount_failed(inj, target),
    }[kind]()
    symptom = rng.choice(SYMPTOMS).format(unit=asked)
    return DaemonCase(
        seed, kind, graph, target, asked, symptom, expected, inj.actions, inj.observed
    )


def clean_up(ct: BootedSystemd, graph: DaemonGraph) -> None:
    """What a fault left beside the graph: a squatter, a package."""
    squatter = graph.extra.get("squatter")
    if squatter:
        ct.systemctl("stop", squatter, check=False)
    package = graph.extra.get("package")
    if package:
        ct.run(["dpkg", "--purge", package], check=False)
    mount = graph.extra.get("mount")
    if mount:
        ct.systemctl("stop", "--", mount, check=False)
        ct.run(["rm", "-rf", f"/etc/systemd/system/{mount}", graph.extra["mount_where"]])
        ct.systemctl("daemon-reload")
        ct.systemctl("reset-failed", "--", mount, check=False)
