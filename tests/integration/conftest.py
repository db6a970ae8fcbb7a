"""Fixtures for the integration tests that need a booted systemd (see container.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.container import BootedSystemd, can_boot

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected below this directory with ``integration``."""
    for item in items:
        if Path(item.path).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def container() -> Iterator[BootedSystemd]:
    """A systemd booted in a throw-away container, shared by the whole test session.

    Skips when this machine cannot boot one, except under CI (``CI=true``), where that fails.
    """
    ok, reason = can_boot()
    if not ok:
        message = f"cannot boot the systemd container bench: {reason}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    with BootedSystemd() as booted:
        yield booted


REPO = "/usr/src/opsbot"
PYTHON = "/opt/opsbot/venv/bin/python"
EXECUTOR_SOCKET = "/run/opsbot/executor.sock"
# The units opsbot may act on in these tests; anything else must stay out of reach.
TEST_CONFIG = """\
[executor]
step_timeout_seconds = 30
approval_ttl_seconds = 600

[executor.allow]
restart_unit = ["demo-web.service", "demo-db.service"]
start_unit = ["demo-web.service", "demo-db.service"]
reset_failed_unit = ["demo-web.service"]
"""
DEMO_UNIT = """\
[Unit]
Description=opsbot test target {name}

[Service]
ExecStart=/bin/sleep infinity
"""


@pytest.fixture(scope="session")
def opsbot(container: BootedSystemd) -> BootedSystemd:
    """The container with opsbot installed as an operator would: install.sh, the config,
    the polkit rule, and `systemctl enable --now` of the socket, timer and path."""
    container.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)
    for name in ("demo-web", "demo-db", "demo-other"):
        container.write_file(f"/etc/systemd/system/{name}.service", DEMO_UNIT.format(name=name))
    container.run(["bash", f"{REPO}/packaging/install.sh", "--offline", "--enable"], timeout=300)
    container.systemctl("start", "demo-web.service", "demo-db.service", "demo-other.service")
    container.run(["useradd", "--create-home", "-G", "opsbot-operators", "olivia"])
    container.run(["useradd", "--create-home", "mallory"])
    return container
