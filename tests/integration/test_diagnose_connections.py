"""Dependencies nobody declared, as the diagnosis sees them on a booted systemd 252.

Two DynamicUser services talk over loopback with no Requires=/Wants=/After= between
them, and a client talks to a socket-activated service whose listener PID 1 holds. The
read tool read_connections runs in a unit made from opsbot-diagnose.service itself (every
line of it and its drop-ins: its user, its sandbox, its address families), with only the
command changed: it must name both ends of each connection by unit, and never need a
privilege the unit does not give.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import PYTHON, read_tool_code

SERVER_PORT = 23917
ACTIVATED_PORT = 23918
CODE_DIR = "/usr/local/lib/conntest"
PYTHON3 = "/usr/bin/python3"
#: A client that connects once and holds the connection: to a port, or a Unix socket's
#: path.
HOLD = (
    "import socket, sys, time\n"
    "where = sys.argv[1]\n"
    "if where.startswith('/'):\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    s.connect(where)\n"
    "else:\n"
    "    s = socket.create_connection(('127.0.0.1', int(where)))\n"
    "time.sleep(86400)\n"
)
#: A server that accepts and holds every connection: on its own port or Unix socket, or
#: on the socket systemd passes it (fd 3).
SERVE = (
    "import os, socket, sys\n"
    "where = sys.argv[1] if len(sys.argv) > 1 else ''\n"
    "if where.startswith('/'):\n"
    "    listener = socket.socket(socket.AF_UNIX)\n"
    "    listener.bind(where)\n"
    "    os.chmod(where, 0o666)\n"
    "    listener.listen()\n"
    "elif where:\n"
    "    listener = socket.create_server(('127.0.0.1', int(where)))\n"
    "else:\n"
    "    listener = socket.socket(fileno=3)\n"
    "held = []\n"
    "while True:\n"
    "    held.append(listener.accept())\n"
)
#: A Unix socket a DynamicUser= service makes in its runtime directory.
VAULT_SOCKET = "/run/conntest-vault/vault.sock"
UNITS = {
    "conntest-store.service": (
        "[Service]\nDynamicUser=yes\nStateDirectory=conntest-store\n"
        f"ExecStart={PYTHON3} {CODE_DIR}/serve.py {SERVER_PORT}\n"
    ),
    "conntest-app.service": (
        "[Service]\nDynamicUser=yes\nRestart=on-failure\nRestartSec=200ms\n"
        f"ExecStart={PYTHON3} {CODE_DIR}/hold.py {SERVER_PORT}\n"
    ),
    "conntest-queue.socket": f"[Socket]\nListenStream=127.0.0.1:{ACTIVATED_PORT}\n",
    "conntest-queue.service": (
        f"[Service]\nDynamicUser=yes\nExecStart={PYTHON3} {CODE_DIR}/serve.py\n"
    ),
    "conntest-worker.service": (
        "[Service]\nDynamicUser=yes\nRestart=on-failure\nRestartSec=200ms\n"
        f"ExecStart={PYTHON3} {CODE_DIR}/hold.py {ACTIVATED_PORT}\n"
    ),
    "conntest-vault.service": (
        "[Service]\nDynamicUser=yes\nRuntimeDirectory=conntest-vault\n"
        "RuntimeDirectoryMode=0755\n"
        f"ExecStart={PYTHON3} {CODE_DIR}/serve.py {VAULT_SOCKET}\n"
    ),
    "conntest-clerk.service": (
        "[Service]\nDynamicUser=yes\nRestart=on-failure\nRestartSec=200ms\n"
        f"ExecStart={PYTHON3} {CODE_DIR}/hold.py {VAULT_SOCKET}\n"
    ),
}
#: A backend that is down, an app that reaches it by a URL in its environment (with a
#: password), and an nginx front whose upstream (in an included file) is that backend;
#: a root-only EnvironmentFile= the diagnose user may not read.
LEDGER_PORT = 23919
FRONT_PORT = 23920
NGINX_DIR = "/etc/conntest-nginx"
NGINX_FILES = {
    f"{NGINX_DIR}/nginx.conf": (
        "pid /run/conntest-front.pid;\nerror_log stderr;\nevents {}\n"
        f"http {{\n  access_log off;\n  include {NGINX_DIR}/sites/*.conf;\n}}\n"
    ),
    f"{NGINX_DIR}/sites/ledger.conf": (
        f"upstream books {{\n  server 127.0.0.1:{LEDGER_PORT};\n}}\n"
        f"server {{\n  listen 127.0.0.1:{FRONT_PORT};\n"
        "  location / { proxy_pass http://books; }\n}\n"
    ),
}
CONFIGURED_UNITS = {
    "conntest-ledger.service": (
        f"[Service]\nDynamicUser=yes\nExecStart={PYTHON3} {CODE_DIR}/serve.py {LEDGER_PORT}\n"
    ),
    "conntest-teller.service": (
        "[Service]\nDynamicUser=yes\n"
        f"Environment=LEDGER_URL=http://teller:s3cret@127.0.0.1:{LEDGER_PORT}/books\n"
        f"EnvironmentFile={NGINX_DIR}/teller.env\n"
        "ExecStart=/bin/sleep infinity\n"
    ),
    "conntest-front.service": (
        f"[Service]\nExecStart=/usr/sbin/nginx -c {NGINX_DIR}/nginx.conf -g 'daemon off;'\n"
    ),
}
PROBE = "conntest-probe.service"
#: What the probe unit does not take from opsbot-diagnose.service: how it is started
#: and supervised, not what it may do.
NOT_COPIED = (
    "ExecStart=",
    "ExecStartPost=",
    "Type=",
    "WatchdogSec=",
    "Restart",
    "Requires=",
    "After=",
    "Sockets=",
)


@pytest.fixture(scope="module")
def connected(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    ct = opsbot
    ct.write_file(f"{CODE_DIR}/hold.py", HOLD)
    ct.write_file(f"{CODE_DIR}/serve.py", SERVE)
    for name, text in UNITS.items():
        ct.write_file(f"/etc/systemd/system/{name}", text)
    ct.systemctl("daemon-reload")
    ct.systemctl(
        "start", "conntest-store.service", "conntest-queue.socket", "conntest-vault.service"
    )
    ct.systemctl(
        "start", "conntest-app.service", "conntest-worker.service", "conntest-clerk.service"
    )
    for path, text in NGINX_FILES.items():
        ct.write_file(path, text)
    ct.write_file(f"{NGINX_DIR}/teller.env", "LEDGER_TOKEN=t0ken\n", 0o600)
    for name, text in CONFIGURED_UNITS.items():
        ct.write_file(f"/etc/systemd/system/{name}", text)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", *CONFIGURED_UNITS)
    # The ledger dies (SIGKILL): failed, loaded, no listener, no connection left.
    ct.systemctl("kill", "-s", "KILL", "conntest-ledger.service")
    ct.wait_for(
        lambda: ct.systemctl("is-failed", "conntest-ledger.service", check=False).returncode == 0,
        timeout=10,
        what="ledger failed",
    )
    yield ct
    units = [*UNITS, *CONFIGURED_UNITS, PROBE]
    ct.systemctl("stop", *units, check=False)
    ct.run(["rm", "-rf", CODE_DIR, NGINX_DIR, *(f"/etc/systemd/system/{u}" for u in units)])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", *units, check=False)


def in_diagnose_sandbox(ct: BootedSystemd, tool: str, args: dict[str, Any]) -> Any:
    """``tool`` run once in a unit that is opsbot-diagnose.service (unit file and drop-ins,
    line for line) but for how it is started; its answer as JSON."""
    return code_in_diagnose_sandbox(ct, read_tool_code(tool, args))


def code_in_diagnose_sandbox(ct: BootedSystemd, code: str) -> Any:
    """``code`` (printing one JSON line last) run as the diagnose user in its sandbox."""
    ct.write_file(f"{CODE_DIR}/probe.py", code)
    return command_in_sandbox(ct, f"{PYTHON} {CODE_DIR}/probe.py", "opsbot-diagnose.service")


def command_in_sandbox(ct: BootedSystemd, command: str, like: str) -> Any:
    """``command`` run once in a unit that is ``like`` (its unit file and drop-ins, line
    for line) but for how it is started; its answer: the last JSON line it printed, or
    the baseline verb's sentence."""
    lines = [
        line
        for line in ct.systemctl("cat", like).stdout.splitlines()
        if not line.startswith(NOT_COPIED)
    ]
    ct.write_file(
        f"/etc/systemd/system/{PROBE}",
        "\n".join(lines)
        + "\n[Service]\nType=oneshot\nStandardOutput=journal\n"
        + f"ExecStart={command}\n",
    )
    ct.systemctl("daemon-reload")
    cursor = ct.run(["journalctl", "-n", "0", "--show-cursor", "-q"]).stdout.split("cursor: ")[-1]
    ct.systemctl("start", PROBE)

    def printed() -> Any:
        said = ct.journal("-o", "cat", "-u", PROBE, f"--after-cursor={cursor.strip()}")
        for line in reversed(said.strip().splitlines()):
            if line.startswith(("{", "[", "baseline", "no baseline")):
                return json.loads(line) if line[0] in "{[" else line
        return None

    # journald may store the stream's line a moment after the unit has finished.
    return ct.wait_for(printed, timeout=10, what=f"{PROBE}'s answer in its journal")


def seen(ct: BootedSystemd, edge: tuple[str, str, int], what: str) -> dict[str, Any]:
    """read_connections' first answer that has ``edge`` (the client may still be
    connecting): within 30 s."""

    def answer() -> dict[str, Any]:
        found: dict[str, Any] = in_diagnose_sandbox(ct, "read_connections", {})
        return found if edge in _edges(found) else {}

    return ct.wait_for(answer, timeout=30, what=what)


def _edges(answer: Any) -> set[tuple[str, str | None, int]]:
    assert "error" not in answer, answer
    return {(e["client"], e["server"], e["port"]) for e in answer["edges"]}


def test_a_loopback_connection_between_dynamic_users_names_both_units(
    connected: BootedSystemd,
) -> None:
    """conntest-app holds a connection to conntest-store's port, with nothing declared
    between them: read_connections, in the diagnose unit's own sandbox, says app -> store
    at that port, and that store listens there."""
    want = ("conntest-app.service", "conntest-store.service", SERVER_PORT)
    answer = seen(connected, want, "app's connection to store seen")
    listening = {(e["port"], e["unit"]) for e in answer["listeners"]}
    assert (SERVER_PORT, "conntest-store.service") in listening
    assert not any(e["client"] == "conntest-store.service" for e in answer["edges"])


def test_a_connection_to_a_socket_activated_service_names_the_service(
    connected: BootedSystemd,
) -> None:
    """The queue's listener is PID 1's (init.scope): it is named through the socket
    unit's Listen=, as the service it activates, and the worker's connection leads there."""
    want = ("conntest-worker.service", "conntest-queue.service", ACTIVATED_PORT)
    answer = seen(connected, want, "worker's connection to the socket-activated queue seen")
    [listener] = [e for e in answer["listeners"] if e["port"] == ACTIVATED_PORT]
    assert (listener["unit"], listener["socket_unit"]) == (
        "conntest-queue.service",
        "conntest-queue.socket",
    )
    only_app = in_diagnose_sandbox(connected, "read_connections", {"unit": "conntest-app.service"})
    assert _edges(only_app) == {("conntest-app.service", "conntest-store.service", SERVER_PORT)}


def test_a_unix_socket_connection_between_dynamic_users_names_both_units(
    connected: BootedSystemd,
) -> None:
    """conntest-clerk holds a connection to the Unix socket conntest-vault made in its
    runtime directory, both DynamicUser=: in the diagnose unit's sandbox the listener is
    named by its path and the client by its uid, clerk -> vault at that path."""
    want = ("conntest-clerk.service", "conntest-vault.service", 0)
    found = seen(connected, want, "clerk's connection to vault seen")
    [edge] = [e for e in found["edges"] if (e["client"], e["server"], e["port"]) == want]
    assert edge["address"] == VAULT_SOCKET
    listening = {(e["address"], e["unit"]) for e in found["listeners"]}
    assert (VAULT_SOCKET, "conntest-vault.service") in listening


def test_a_backend_that_is_down_is_found_by_what_its_clients_are_configured_with(
    connected: BootedSystemd,
) -> None:
    """The ledger is down: no listener, no connection. read_config_edges, in the
    diagnose unit's own sandbox, still links the nginx front (its upstream, in an included
    file) and the teller (a URL in its environment) to it, because the ledger's own
    command line says it serves on that port; it shows no value (the password in the
    URL), and reports the root-only EnvironmentFile= as unreadable."""
    answer = in_diagnose_sandbox(connected, "read_config_edges", {})
    assert "error" not in answer, answer
    edges = {(e["client"], e["server"]): e for e in answer["edges"]}
    front = edges[("conntest-front.service", "conntest-ledger.service")]
    assert front["source"] == f"{NGINX_DIR}/sites/ledger.conf:2"
    assert front["how"] == "is configured to listen there"
    teller = edges[("conntest-teller.service", "conntest-ledger.service")]
    assert (teller["endpoint"], teller["source"]) == (f":{LEDGER_PORT}", "Environment=LEDGER_URL")
    assert "s3cret" not in json.dumps(answer) and "t0ken" not in json.dumps(answer)
    assert (
        f"conntest-teller.service: {NGINX_DIR}/teller.env (permission denied)"
        in answer["unreadable"]
    )


#: More services than the diagnosis once read the configuration of (96), each named to
#: come before every other in systemd's listing.
FILLERS = 300
FILLER = (
    "[Service]\nType=oneshot\nRemainAfterExit=yes\nEnvironment=PORT=31%i\nExecStart=/bin/true\n"
)
#: read_config_edges called twice in one process, as a diagnosis's steps call it: each
#: answer's edges, and the services systemd was asked to show for it.
TWICE = """
import json
from diagnose_svc.tools import READ_TOOLS
from diagnose_svc.tools._host_units import HOST
from diagnose_svc.tools._registry import ToolContext
from shared_schema import DiagnoseSettings
tool, context, answers = READ_TOOLS["read_config_edges"], ToolContext(DiagnoseSettings()), []
for _ in range(2):
    HOST.last_shown = []
    out = tool(tool.parse_args({}), context.step())
    edges = [[e.client, e.server] for e in out.edges if "filler" not in e.client]
    answers.append({"edges": edges, "read": out.units_read, "shown": HOST.last_shown})
print(json.dumps(answers))
"""


def test_a_host_with_hundreds_of_services_is_read_whole_once_then_only_what_changed(
    connected: BootedSystemd,
) -> None:
    """300 more services, listed before the others: read_config_edges, in the diagnose
    unit's sandbox, still links the front and the teller to the ledger that is down (it
    read 96 services at most, and lost them). Its second answer in the same process has
    systemd show no service again, nor does the next process (what the first kept in
    the state directory); then a drop-in gives the teller a new upstream and the
    operator reloads: the teller alone is shown again, and its new edge is there."""
    ct = connected
    ct.write_file("/etc/systemd/system/aaa-filler@.service", FILLER)
    ct.systemctl("daemon-reload")
    fillers = [f"aaa-filler@{i}.service" for i in range(FILLERS)]
    dropin = "/etc/systemd/system/conntest-teller.service.d/50-store.conf"
    try:
        ct.systemctl("start", *fillers)
        first, second = code_in_diagnose_sandbox(ct, TWICE)
        ledger = {
            ("conntest-front.service", "conntest-ledger.service"),
            ("conntest-teller.service", "conntest-ledger.service"),
        }
        assert ledger <= {tuple(e) for e in first["edges"]}, first
        assert first["read"] > FILLERS and set(fillers) <= set(first["shown"])
        assert second["shown"] == [] and second["edges"] == first["edges"]
        # The probe's own unit is written anew for each process: it alone is shown.
        again, _ = code_in_diagnose_sandbox(ct, TWICE)
        assert set(again["shown"]) <= {PROBE} and again["edges"] == first["edges"], again
        ct.write_file(dropin, f"[Service]\nEnvironment=STORE=127.0.0.1:{SERVER_PORT}\n")
        ct.systemctl("daemon-reload")
        changed, _ = code_in_diagnose_sandbox(ct, TWICE)
        assert set(changed["shown"]) - {PROBE} == {"conntest-teller.service"}, changed
        edges = {tuple(e) for e in changed["edges"]}
        assert ("conntest-teller.service", "conntest-store.service") in edges, changed
    finally:
        ct.systemctl("stop", *fillers, check=False)
        ct.run(["rm", "-rf", "/etc/systemd/system/aaa-filler@.service", os.path.dirname(dropin)])
        ct.systemctl("daemon-reload")


def test_a_dynamic_user_unit_is_not_root_and_its_state_directory_is_there(
    connected: BootedSystemd,
) -> None:
    """conntest-store runs as a DynamicUser= with a StateDirectory=, a symlink into
    /var/lib/private (0700 root) the diagnose user may not enter: read_unit_file says
    its user is dynamic, not root, and disk_usage finds its state directory there."""
    unit_file = in_diagnose_sandbox(connected, "read_unit_file", {"unit": "conntest-store.service"})
    assert unit_file["user"].endswith("(DynamicUser=yes)"), unit_file
    disk = in_diagnose_sandbox(connected, "disk_usage", {"unit": "conntest-store.service"})
    [state] = [d for d in disk["directories"] if d["role"] == "StateDirectory"]
    assert (state["path"], state["exists"]) == ("/var/lib/conntest-store", True), disk


#: As an attacker in the diagnose process would try it: AF_NETLINK is allowed for socket
#: diagnostics, so ask the routing family to change the host's network: add an address
#: to lo, and take lo down. Prints the kernel's answer (an errno, 0 for done) to each.
NETLINK_ROUTE_ATTACK = """
import json, socket, struct
RTM_NEWLINK, RTM_NEWADDR = 16, 20
FLAGS = 0x1 | 0x4 | 0x400 | 0x200  # NLM_F_REQUEST | ACK | CREATE | EXCL

def ask(kind, body, seq):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.bind((0, 0))
    s.send(struct.pack("=LHHLL", 16 + len(body), kind, FLAGS, seq, 0) + body)
    reply = s.recv(65536)
    return -struct.unpack("=i", reply[16:20])[0]

address = struct.pack("=BBBBI", socket.AF_INET, 32, 0, 0, 1)
local = struct.pack("=HH", 8, 2) + socket.inet_aton("10.99.0.1")
down = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 1, 0, 1)
print(json.dumps({"address": ask(RTM_NEWADDR, address + local, 1),
                  "link_down": ask(RTM_NEWLINK, down, 2)}))
"""


def test_the_diagnose_sandbox_may_read_socket_diagnostics_but_not_change_the_network(
    connected: BootedSystemd,
) -> None:
    """The diagnose units allow AF_NETLINK for read_connections; an attacker in the
    diagnose process who asks the routing family to add an address or take a link down
    is refused (EPERM: the units keep no capability), and the network is unchanged."""
    answer = code_in_diagnose_sandbox(connected, NETLINK_ROUTE_ATTACK)
    assert answer == {"address": 1, "link_down": 1}, answer  # errno 1: EPERM
    shown = connected.run(["ip", "-o", "addr", "show", "dev", "lo"]).stdout
    assert "10.99.0.1" not in shown
    assert "UP" in connected.run(["ip", "-o", "link", "show", "dev", "lo"]).stdout


BASELINE_CONFIG = """\
[diagnose]
scope = ["conntest-app.service", "conntest-store.service"]
"""
BASELINE_DIR = "/var/lib/opsbot-diagnose/baseline"


def test_the_baseline_remembers_a_backend_that_is_down_now(connected: BootedSystemd) -> None:
    """While app and store are up and connected, the baseline verb, run in
    opsbot-verify.service's unit (its user, its sandbox, its StateDirectory=), keeps a
    snapshot in the diagnose user's own 0700 directory. Then store dies: the kernel shows
    no connection to it any more, but read_baseline, in the diagnose unit's sandbox,
    still has app -> store and store's listener; and the verb, the host being unhealthy
    now, keeps nothing new."""
    ct = connected
    seen(ct, ("conntest-app.service", "conntest-store.service", SERVER_PORT), "app -> store")
    ct.write_file(f"{CODE_DIR}/baseline.toml", BASELINE_CONFIG)
    verb = f"/opt/opsbot/venv/bin/opsbot-diagnose baseline --config {CODE_DIR}/baseline.toml"
    said = command_in_sandbox(ct, verb, "opsbot-verify.service")
    assert said.startswith("baseline taken: "), said
    listing = ct.run(
        [
            "stat",
            "-c",
            "%a %U %n",
            BASELINE_DIR,
            *ct.run(["sh", "-c", f"ls -d {BASELINE_DIR}/*"]).stdout.split(),
        ]
    ).stdout.splitlines()
    assert listing[0] == f"700 opsbot-diagnose {BASELINE_DIR}"
    assert all(line.startswith("600 opsbot-diagnose ") for line in listing[1:]), listing
    try:
        ct.systemctl("kill", "-s", "KILL", "conntest-store.service")
        ct.wait_for(
            lambda: (
                ct.systemctl("is-failed", "conntest-store.service", check=False).returncode == 0
            ),
            timeout=10,
            what="store failed",
        )
        now = in_diagnose_sandbox(ct, "read_connections", {})
        assert not any(e["server"] == "conntest-store.service" for e in now["edges"])
        then = in_diagnose_sandbox(ct, "read_baseline", {"unit": "conntest-store.service"})
        edges = {(e["client"], e["server"], e["source"]) for e in then["edges"]}
        assert ("conntest-app.service", "conntest-store.service", "observed") in edges, then
        assert {"unit": "conntest-store.service", "endpoint": f"127.0.0.1:{SERVER_PORT}"} in then[
            "listeners"
        ]
        again = command_in_sandbox(ct, verb, "opsbot-verify.service")
        assert again.startswith("no baseline taken: the host is not healthy now"), again
        assert "conntest-store.service is failed" in again
    finally:
        ct.systemctl("reset-failed", "conntest-store.service", check=False)
        ct.systemctl("start", "conntest-store.service")
        ct.run(["rm", "-rf", BASELINE_DIR])
