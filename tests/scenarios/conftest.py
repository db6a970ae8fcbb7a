"""Fixtures for the scenario host: a booted systemd and the scenario stack installed in it.

``container`` is tests/integration's session fixture, re-exported: the scenarios get their
own container (one per conftest that defines it), so nothing they break reaches the
integration tests.  ``installed_stack`` installs the stack once per naming (default, then
renamed); ``stack`` resets it to healthy before and after each test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed import daemons, graph as graphs
from testbed.container import BootedSystemd, can_boot
from testbed.host import REPO
from testbed.skips import skip_unless
from testbed.stack import DEFAULT_STACK, RENAMED_STACK, Stack, install, reset, uninstall
from tests.integration import conftest as integration

#: The booted container: tests/integration's session fixture, registered here too.
container = integration.container
STACKS = {"default": DEFAULT_STACK, "renamed": RENAMED_STACK}


@pytest.fixture(scope="session")
def opsbot_installed(container: BootedSystemd) -> BootedSystemd:
    """opsbot installed in the scenario container as an operator would, sockets enabled."""
    container.run(["bash", f"{REPO}/packaging/install.sh", "--offline", "--enable"], timeout=300)
    container.write_file("/etc/opsbot/llm_api_key", "sk-scenario-key\n", mode=0o600)
    return container


@pytest.fixture(scope="session")
def graph_host(opsbot_installed: BootedSystemd) -> BootedSystemd:
    """The scenario container with opsbot installed and the graph nodes' script and user."""
    graphs.prepare(opsbot_installed)
    return opsbot_installed


@pytest.fixture(scope="session")
def daemon_host() -> Iterator[BootedSystemd]:
    """A container of its own for the real-software graphs, so that their nginx sites,
    daemons and journal never meet the scenario stack's (which keeps Debian's default
    site): opsbot installed as an operator would, and the graphs' app, user and Debian's
    daemons (haproxy, redis, memcached) set up for instances."""
    ok, reason = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {reason}")
    with BootedSystemd() as ct:
        ct.run(["bash", f"{REPO}/packaging/install.sh", "--offline", "--enable"], timeout=300)
        ct.write_file("/etc/opsbot/llm_api_key", "sk-scenario-key\n", mode=0o600)
        graphs.prepare(ct)
        daemons.prepare(ct)
        yield ct


@pytest.fixture(scope="session", params=list(STACKS.values()), ids=list(STACKS))
def installed_stack(request: pytest.FixtureRequest, container: BootedSystemd) -> Iterator[Stack]:
    """The scenario stack installed and healthy, once under each naming; removed afterwards."""
    stack: Stack = request.param
    install(container, stack)
    yield stack
    uninstall(container, stack)


@pytest.fixture
def stack(container: BootedSystemd, installed_stack: Stack) -> Iterator[Stack]:
    """The installed stack, reset to healthy before and after the test."""
    reset(container, installed_stack)
    yield installed_stack
    reset(container, installed_stack)
