"""The read tools that check the present, against a booted systemd 252: a stopped
process behind an "active" unit, who holds a port, a unit's effective file and the files
it names, how full its filesystems are, a timer's last run. Each runs as an unprivileged
user in the systemd-journal group, as opsbot-diagnose does, on units made here to show
one fact each; read_memory is checked on what this host can show (its cgroup v1
controllers do not enforce MemoryMax=, so no OOM kill can be made: see the fault suite's
report).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import call_read_tool

READER = "facttest-reader"
PORT = 47311
UNITS = {
    "facttest-stopped.service": "[Service]\nExecStart=/bin/sleep infinity\n",
    "facttest-listen.service": (
        "[Service]\nDynamicUser=yes\n"
        f"ExecStart=/usr/bin/python3 -m http.server --bind 127.0.0.1 {PORT}\n"
    ),
    "facttest-files.service": (
        "[Service]\nUser=facttest-reader\n"
        "EnvironmentFile=-/etc/facttest/optional.env\n"
        "ExecStart=/bin/cat /etc/facttest/secret.conf /etc/facttest/missing.conf\n"
    ),
    "facttest-full.service": (
        "[Service]\nStateDirectory=facttest-full\nExecStart=/bin/sleep infinity\n"
    ),
    "facttest-tick.service": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'exit 3'\n",
    "facttest-tick.timer": "[Timer]\nOnActiveSec=1h\n",
}
DROPIN = "/etc/systemd/system/facttest-files.service.d/50-mode.conf"


def call(ct: BootedSystemd, tool: str, args: dict[str, Any]) -> Any:
    """One read tool, run inside the container as the unprivileged reader."""
    return call_read_tool(ct, tool, args, user=READER)


@pytest.fixture(scope="module")
def host(container: BootedSystemd) -> Iterator[BootedSystemd]:
    ct = container
    if ct.run(["id", READER], check=False).returncode != 0:
        ct.run(["useradd", "--system", "--groups", "systemd-journal", READER])
    for name, text in UNITS.items():
        ct.write_file(f"/etc/systemd/system/{name}", text)
    ct.write_file(DROPIN, "[Service]\nEnvironment=FACT_MODE=strict\n")
    ct.run(["mkdir", "-p", "/etc/facttest"])
    ct.write_file("/etc/facttest/secret.conf", "password = hunter2\n", mode=0o600)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", "facttest-stopped.service", "facttest-listen.service")
    ct.systemctl("start", "facttest-full.service", "facttest-tick.timer")
    ct.systemctl("start", "facttest-tick.service", check=False)
    ct.systemctl("start", "facttest-files.service", check=False)
    yield ct
    units = list(UNITS)
    ct.systemctl("kill", "--signal=CONT", "facttest-stopped.service", check=False)
    ct.systemctl("stop", *units, check=False)
    ct.run(["umount", "-l", "/var/lib/facttest-full"], check=False)
    ct.run(["rm", "-rf", "/etc/facttest", DROPIN, *(f"/etc/systemd/system/{u}" for u in units)])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", *units, check=False)


def test_a_stopped_process_behind_an_active_unit_is_seen(host: BootedSystemd) -> None:
    """SIGSTOP of the main process: systemd still says active/running; /proc says T
    (stopped), and its CPU time does not move while watched."""
    host.systemctl("kill", "--kill-whom=main", "--signal=STOP", "facttest-stopped.service")
    try:
        state = call(host, "read_process_state", {"unit": "facttest-stopped.service"})
    finally:
        host.systemctl("kill", "--kill-whom=main", "--signal=CONT", "facttest-stopped.service")
    assert (state["active_state"], state["sub_state"]) == ("active", "running")
    [main] = state["processes"]
    assert (main["role"], main["visible"], main["comm"], main["state"]) == (
        "main",
        True,
        "sleep",
        "T",
    )
    assert main["cpu_seconds_while_watched"] == 0.0
    running = call(host, "read_process_state", {"unit": "facttest-stopped.service"})
    assert running["processes"][0]["state"] == "S"


def test_who_holds_a_port_is_named_down_to_its_unit(host: BootedSystemd) -> None:
    """A DynamicUser service listening: list_listeners names the port's owner, its
    process and its unit, read without privileges from /proc."""
    host.wait_for(
        lambda: call(host, "list_listeners", {"port": PORT})["listeners"],
        timeout=15,
        what=f"a listener on {PORT}",
    )
    [listener] = call(host, "list_listeners", {"port": PORT})["listeners"]
    assert (listener["address"], listener["port"]) == ("127.0.0.1", PORT)
    assert listener["user"].startswith("facttest-listen")  # the dynamic user's name
    assert [(p["comm"], p["unit"]) for p in listener["processes"]] == [
        ("python3", "facttest-listen.service")
    ]
    assert call(host, "list_listeners", {"port": PORT + 1})["listeners"] == []


def test_a_units_file_and_the_files_it_names(host: BootedSystemd) -> None:
    """systemctl cat with its drop-in, the environment the drop-in sets, and each file
    its commands name: the secret one its user cannot read, the missing one, the optional
    environment file whose absence is no error."""
    unit = call(host, "read_unit_file", {"unit": "facttest-files.service"})
    assert unit["files"] == ["/etc/systemd/system/facttest-files.service", DROPIN]
    assert unit["user"] == READER
    assert "FACT_MODE=strict" in unit["environment"]
    facts = {p["path"]: p for p in unit["paths"]}
    secret = facts["/etc/facttest/secret.conf"]
    assert (secret["exists"], secret["mode"], secret["owner"]) == (True, "0600", "root")
    assert secret["readable_by_unit"] is False
    assert facts["/etc/facttest/missing.conf"]["exists"] is False
    optional = facts["/etc/facttest/optional.env"]
    assert (optional["exists"], optional["optional"]) == (False, True)
    assert facts["/bin/cat"]["readable_by_unit"] is True
    assert "hunter2" not in json.dumps(unit)


def test_a_full_filesystem_under_the_units_state_directory(host: BootedSystemd) -> None:
    """A 64 KiB tmpfs on its StateDirectory=, filled: disk_usage says it is full; before,
    that it had room."""
    before = call(host, "disk_usage", {"unit": "facttest-full.service"})
    [roomy] = before["directories"]
    assert (roomy["path"], roomy["role"], roomy["full"]) == (
        "/var/lib/facttest-full",
        "StateDirectory",
        False,
    )
    host.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", "/var/lib/facttest-full"])
    host.run(
        ["dd", "if=/dev/zero", "of=/var/lib/facttest-full/ballast", "bs=4k", "count=64"],
        check=False,
    )
    [full] = call(host, "disk_usage", {"unit": "facttest-full.service"})["directories"]
    assert full["full"] is True and full["free_bytes"] < 4096
    assert full["size_bytes"] == 65536


def test_a_timer_and_how_its_service_last_ended(host: BootedSystemd) -> None:
    """read_timer says the timer is active, which service it triggers, when it runs next,
    and that its service last ended with exit status 3; asked about the service instead of a
    timer, it refuses."""
    timer = call(host, "read_timer", {"unit": "facttest-tick.timer"})
    assert (timer["active_state"], timer["triggers"]) == ("active", "facttest-tick.service")
    assert timer["next_elapse"] is not None
    assert (timer["service_result"], timer["service_exit_status"]) == ("exit-code", 3)
    refused = call(host, "read_timer", {"unit": "facttest-tick.service"})
    assert refused["error"].startswith("bad arguments for read_timer: unit")


def test_memory_of_a_unit_on_this_host(host: BootedSystemd) -> None:
    """read_memory reads what the unit's cgroup shows; on these hosts (cgroup v1, read-only
    controllers) memory.events is not there, and it says so instead of guessing."""
    memory = call(host, "read_memory", {"unit": "facttest-stopped.service"})
    assert (memory["active_state"], memory["result"]) == ("active", "success")
    assert memory["oom_kill"] == 0
    if not memory["events_available"]:
        assert memory["oom"] == 0
