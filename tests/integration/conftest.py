"""Fixtures for the integration tests that need a booted systemd (testbed/container.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd, can_boot
from testbed.host import TEST_CONFIG, install_demo_units, install_opsbot
from testbed.phone import Phone, set_up_phone, tear_down_phone
from testbed.skips import skip_unless


@pytest.fixture(scope="session")
def container() -> Iterator[BootedSystemd]:
    """A systemd booted in a throw-away container, shared by the whole test session.

    Skips when this machine cannot boot one, except under CI (``CI=true``), where that fails.
    """
    ok, reason = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {reason}")
    with BootedSystemd() as booted:
        yield booted


@pytest.fixture(scope="session")
def opsbot(container: BootedSystemd) -> BootedSystemd:
    """The container with opsbot installed as an operator would: install.sh, the config,
    the polkit rule, and `systemctl enable --now` of the sockets, timer and path."""
    install_demo_units(container)
    install_opsbot(container, TEST_CONFIG)
    container.run(["useradd", "--create-home", "-G", "opsbot-operators", "olivia"])
    container.run(["useradd", "--create-home", "mallory"])
    return container


@pytest.fixture(scope="module")
def phone(opsbot: BootedSystemd) -> Iterator[Phone]:
    """The container as a host whose plans are announced on a signed webhook and by mail,
    with approvers alice, bob, carol and dave (testbed/phone.py); back to the tests'
    config afterwards."""
    ready = set_up_phone(opsbot)
    yield ready
    tear_down_phone(opsbot)
