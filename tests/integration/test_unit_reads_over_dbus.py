"""Unit state read over D-Bus is what ``systemctl show`` prints, against a booted systemd 252.

Every read of a unit's properties (shared_io.unit_show.show) goes over the system bus
in-process where it can (shared_io/unit_bus.py) and runs ``systemctl show`` only where it
cannot. The two must agree to the character, or a diagnosis would read another host than
the one systemctl shows the operator: for units in every state opsbot meets (running,
failed with a Result, killed by a signal, never started, not found, a template's instance
with an escaped name, dependencies, commands with arguments, Environment= with quotes and
spaces, environment files), each property opsbot reads is read both ways and compared,
as root, as the diagnose user, and inside the diagnose unit's own sandbox.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from testbed.container import REPO_MOUNT, REPO_ROOT, BootedSystemd

PYTHON = "/opt/opsbot/venv/bin/python"
DIAGNOSE_USER = "opsbot-diagnose"
UNITS = {
    "dbusread-app.service": (
        "[Unit]\nDescription=an app with dependencies\n"
        "Requires=dbusread-db.service\nWants=dbusread-cache.service\n"
        "After=dbusread-db.service network.target\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nUser=nobody\n"
        "ExecStartPre=/bin/true --check 'two words'\n"
        "ExecStart=/bin/sh -c 'echo \"started on $$PORT\"; exit 0'\n"
        "ExecStart=/bin/echo second\n"
        'Environment="GREETING=hello world" PORT=8080 PRICE=5$$ QUOTE=a\\"b\n'
        "EnvironmentFile=-/etc/dbusread/missing.env\nEnvironmentFile=/etc/os-release\n"
        "StateDirectory=dbusread\nWorkingDirectory=/tmp\n"
    ),
    "dbusread-db.service": (
        "[Service]\nExecStart=/bin/sleep infinity\nMemoryMax=64M\nTasksMax=32\n"
        "LimitNOFILE=1024:4096\n"
    ),
    "dbusread-cache.service": "[Service]\nExecStart=/bin/sh -c 'echo cannot bind; exit 3'\n",
    "dbusread-killed.service": "[Service]\nExecStart=/bin/sleep infinity\n",
    "dbusread-never.service": "[Service]\nExecStart=/bin/true\n",
    "dbusread-inst@.service": (
        "[Unit]\nDescription=instance %i\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        "ExecStart=/bin/echo %i\nEnvironment=INSTANCE=%i\n"
    ),
    "dbusread.timer": "[Timer]\nOnCalendar=daily\nUnit=dbusread-never.service\n",
}
#: What is read: each kind of unit the bench sets up, and a few of systemd's own.
READ = [
    "dbusread-app.service",
    "dbusread-db.service",
    "dbusread-cache.service",
    "dbusread-killed.service",
    "dbusread-never.service",
    "dbusread-missing.service",
    "dbusread-inst@web\\x2dapi.service",
    "dbusread.timer",
    "dbus.socket",
    "basic.target",
    "-.mount",
    "system.slice",
]
#: Where the probe finds READ, inside the container.
UNITS_READ = "/etc/dbusread/units.json"
#: Lists of units, whose order is systemd's hash order: the same for a unit that stays
#: loaded, but a unit nothing holds (never started, not found) is loaded afresh by each
#: read and may list them in another order. Compared as the same names.
UNIT_LISTS = {
    "Requires",
    "Requisite",
    "Wants",
    "BindsTo",
    "PartOf",
    "BoundBy",
    "RequiredBy",
    "After",
    "OnFailure",
    "Triggers",
    "TriggeredBy",
}

#: Reads READ both ways (every property opsbot reads, then a unit's state alone) and
#: prints, as JSON, each unit's properties by each road (READ twice over), and the
#: D-Bus methods the bus reader sent (the bytes on its socket, parsed back).
PROBE = """
import json, os, sys
from jeepney.low_level import HeaderFields, Parser
from shared_io import unit_bus, unit_show
from shared_io.unit_render import RENDERERS

units = json.loads(open(sys.argv[1]).read())
properties = sorted(RENDERERS)
sent = []

class Recorded:
    def __init__(self, sock):
        self.sock = sock
    def sendall(self, data):
        sent.append(bytes(data))
        return self.sock.sendall(data)
    def __getattr__(self, name):
        return getattr(self.sock, name)

conn = unit_bus._connection._connected()
conn.sock = Recorded(conn.sock)
# All of them (a GetAll per interface), and a unit's state alone (a Get each).
few = ["Id", "LoadState", "ActiveState", "SubState", "Result", "InvocationID"]
bus = []
for asked in (properties, few):
    lines = unit_bus.read(units, asked, 10.0)
    if lines is None:
        bus = None
        break
    bus += unit_show.parse_show("\\n".join(lines))
os.environ["OPSBOT_SYSTEMD_READ"] = "systemctl"
systemctl = [dict(p) for asked in (properties, few) for p in unit_show.show(units, asked)]
parser = Parser()
parser.add_data(b"".join(sent))
members = set()
while (message := parser.get_next_message()) is not None:
    members.add(message.header.fields[HeaderFields.member])
print(json.dumps({"bus": bus, "systemctl": systemctl, "members": sorted(members)}))
"""


def probe(container: BootedSystemd, user: str | None = None) -> dict[str, Any]:
    """PROBE's answer, run as ``user`` (root if None)."""
    result = container.run(
        [PYTHON, "-c", textwrap.dedent(PROBE), UNITS_READ],
        user=user,
        env={"PYTHONPATH": REPO_MOUNT},
        timeout=60,
    )
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def differences(bus: list[dict[str, str]] | None, systemctl: list[dict[str, str]]) -> list[str]:
    """Each property whose value differs between the two readings, as one line."""
    assert bus is not None, "the bus was not read: systemctl was asked instead"
    found = []
    for unit, by_bus, by_systemctl in zip(READ + READ, bus, systemctl, strict=True):
        for name in sorted(by_bus.keys() | by_systemctl.keys()):
            over_bus, printed = by_bus.get(name), by_systemctl.get(name)
            if name in UNIT_LISTS and over_bus is not None and printed is not None:
                over_bus, printed = (
                    " ".join(sorted(over_bus.split())),
                    " ".join(sorted(printed.split())),
                )
            if over_bus != printed:
                found.append(f"{unit} {name}: bus {over_bus!r}, systemctl {printed!r}")
    return found


def is_failed(container: BootedSystemd, unit: str) -> bool:
    return container.systemctl("is-failed", unit, check=False).returncode == 0


@pytest.fixture(scope="module")
def units(container: BootedSystemd) -> Iterator[None]:
    """The dbusread units in their states, and the diagnose user (the repo's sysusers.d);
    the units stopped, forgotten and removed afterwards (the container is the session's)."""
    for name, text in UNITS.items():
        container.write_file(f"/etc/systemd/system/{name}", text)
    container.systemctl("daemon-reload")
    container.systemctl("start", "dbusread-db.service", "dbusread-killed.service")
    container.systemctl("start", "dbusread-app.service", "dbusread-inst@web\\x2dapi.service")
    container.systemctl("start", "dbusread.timer")
    container.systemctl("kill", "--signal=KILL", "dbusread-killed.service")
    for failed in ("dbusread-cache.service", "dbusread-killed.service"):
        container.wait_for(partial(is_failed, container, failed), what=f"{failed} failed")
    container.write_file(UNITS_READ, json.dumps(READ))
    sysusers = (REPO_ROOT / "units/sysusers.d/opsbot.conf").read_text()
    container.run(["systemd-sysusers", "-"], input=sysusers)
    yield
    container.systemctl("stop", "dbusread*", check=False)
    container.systemctl("reset-failed", "dbusread*", check=False)
    container.run(["sh", "-c", "rm -rf /etc/systemd/system/dbusread* /etc/dbusread"])
    container.systemctl("daemon-reload")


def test_every_property_opsbot_reads_is_what_systemctl_prints_as_root(
    container: BootedSystemd, units: None
) -> None:
    """As root, each property of each unit read over D-Bus equals systemctl show's."""
    answer = probe(container)
    assert differences(answer["bus"], answer["systemctl"]) == []
    assert answer["systemctl"][0]["Environment"] == (
        '"GREETING=hello world" PORT=8080 "PRICE=5\\$\\$" "QUOTE=a\\"b"'
    )
    assert answer["systemctl"][3]["Result"] == "signal"


def test_the_diagnose_user_reads_the_same(container: BootedSystemd, units: None) -> None:
    """As the diagnose user (through the bus daemon's policy, not root's private socket),
    each property read over D-Bus equals systemctl show's."""
    answer = probe(container, user=DIAGNOSE_USER)
    assert differences(answer["bus"], answer["systemctl"]) == []


def test_the_bus_reader_only_reads(container: BootedSystemd, units: None) -> None:
    """The reader sends systemd property reads and nothing else: no method that could
    start, stop or change a unit goes out on its socket."""
    answer = probe(container)
    assert set(answer["members"]) == {"Get", "GetAll"}


def test_the_diagnose_sandbox_reaches_the_bus(container: BootedSystemd, units: None) -> None:
    """Inside opsbot-diagnose.service's own sandbox (its unit file's [Service] settings,
    ProtectSystem=strict, InaccessiblePaths=, the address families), the bus is reached
    and gives what systemctl prints there."""
    unit_text = (REPO_ROOT / "units/opsbot-diagnose.service").read_text()
    service = unit_text.split("[Service]\n", 1)[1]
    dropped = ("Type=", "ExecStart=", "ExecReload=", "WatchdogSec=", "Restart", "StateDirectory")
    kept = [line for line in service.splitlines() if not line.startswith(dropped)]
    container.write_file("/etc/dbusread/probe.py", textwrap.dedent(PROBE))
    container.write_file(
        "/etc/systemd/system/dbusread-sandboxed.service",
        "[Service]\nType=oneshot\n"
        + "\n".join(kept)
        + f"\nEnvironment=PYTHONPATH={REPO_MOUNT}\nStandardOutput=truncate:/run/dbusread.json\n"
        + f"ExecStart={PYTHON} /etc/dbusread/probe.py {UNITS_READ}\n",
    )
    container.systemctl("daemon-reload")
    container.systemctl("start", "dbusread-sandboxed.service")
    answer = json.loads(container.run(["cat", "/run/dbusread.json"]).stdout.splitlines()[-1])
    assert differences(answer["bus"], answer["systemctl"]) == []
