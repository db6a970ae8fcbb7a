"""Smoke tests for the systemd container bench itself (testbed/container.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.container import REPO_MOUNT, REPO_ROOT, BootedSystemd

PROBE = "bench-probe.service"
PLAIN_USER = "benchuser"


@pytest.fixture(scope="module")
def probe(container: BootedSystemd) -> Iterator[str]:
    """A transient ``sleep 600`` service named bench-probe.service, stopped afterwards."""
    container.run(["systemd-run", f"--unit={PROBE}", "sleep", "600"])
    container.wait_for(lambda: _is_active(container, PROBE), timeout=15, what=f"{PROBE} active")
    yield PROBE
    container.systemctl("stop", PROBE, check=False)
    container.systemctl("reset-failed", PROBE, check=False)


@pytest.fixture(scope="module")
def plain_user(container: BootedSystemd) -> str:
    """An unprivileged login user that exists only inside the container."""
    if container.run(["id", PLAIN_USER], check=False).returncode != 0:
        container.run(["useradd", "--create-home", "--shell", "/bin/bash", PLAIN_USER])
    return PLAIN_USER


def _is_active(container: BootedSystemd, unit: str) -> bool:
    state = container.systemctl("is-active", unit, check=False).stdout.strip()
    return state == "active"


def _invocation_id(container: BootedSystemd, unit: str) -> str:
    return container.systemctl("show", "--property=InvocationID", "--value", unit).stdout.strip()


def test_systemd_is_pid1_and_system_is_up(container: BootedSystemd) -> None:
    """PID 1 in the container is systemd and the system reports running or degraded."""
    assert container.run(["cat", "/proc/1/comm"]).stdout.strip() == "systemd"
    exe = container.run(["readlink", "/proc/1/exe"]).stdout.strip()
    assert exe.endswith("/systemd/systemd"), exe
    state = container.systemctl("is-system-running", check=False).stdout.strip()
    assert state in ("running", "degraded")
    assert container.boot_state in ("running", "degraded")


def test_transient_service_restart_changes_invocation_id(
    container: BootedSystemd, probe: str
) -> None:
    """A transient service is active; a restart gives it a new InvocationID (and is logged)."""
    assert _is_active(container, probe)
    before = _invocation_id(container, probe)
    assert len(before) == 32, before
    container.systemctl("restart", probe)
    container.wait_for(lambda: _is_active(container, probe), timeout=15, what=f"{probe} active")
    after = _invocation_id(container, probe)
    assert len(after) == 32, after
    assert after != before
    container.wait_for(
        lambda: container.journal("--unit", probe, "--output=cat").count(f"Started {probe}") >= 2,
        timeout=10,
        what="two starts of the probe in the journal",
    )


def test_unprivileged_user_cannot_restart(
    container: BootedSystemd, probe: str, plain_user: str
) -> None:
    """A plain user's ``systemctl restart`` is refused by polkit and leaves the unit alone."""
    before = _invocation_id(container, probe)
    result = container.run(["systemctl", "restart", probe], user=plain_user, check=False)
    assert result.returncode != 0
    assert "Interactive authentication required" in result.stderr, result.stderr
    assert _invocation_id(container, probe) == before


def test_repo_is_visible_read_only(container: BootedSystemd) -> None:
    """The checkout is bound at /usr/src/opsbot with the host's content and cannot be written."""
    this_file = "tests/integration/test_container_bench.py"
    inside = container.run(["cat", f"{REPO_MOUNT}/{this_file}"]).stdout
    assert inside == (REPO_ROOT / this_file).read_text()
    options = container.run(["findmnt", "-no", "OPTIONS", REPO_MOUNT]).stdout
    assert "ro" in options.strip().split(","), options
    probe_name = ".bench-write-probe"
    result = container.run(["touch", f"{REPO_MOUNT}/{probe_name}"], check=False)
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr, result.stderr
    assert not (REPO_ROOT / probe_name).exists()


def test_write_file_is_seen_inside(container: BootedSystemd) -> None:
    """write_file works both on the overlay root (host side) and on container mounts (/run)."""
    for path in ("/etc/opsbot-bench/probe.conf", "/run/opsbot-bench/probe.conf"):
        container.write_file(path, f"path={path}\n", mode=0o640)
        assert container.run(["cat", path]).stdout == f"path={path}\n"
        assert container.run(["stat", "-c", "%a %U", path]).stdout.split() == ["640", "root"]
    assert not Path("/etc/opsbot-bench").exists(), "the write reached the host's /etc"
