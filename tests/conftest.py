"""What every test shares: the markers, given by where a test lives.

    integration   tests/integration, tests/attacks, tests/scenarios: they boot a real
                  systemd in a container, or start daemons, mount and change users as root
    slow          a test a developer skips in the inner loop (``scripts/test -m "not
                  slow"``): every integration test, and the unit tests marked so
    serial        run alone, after the parallel pass: load, quota, crash and timing tests
                  whose figures another worker's containers would disturb

Each booted-container module is one xdist group (``--dist loadgroup``): its module- and
session-scoped containers live on one worker, and two modules that share a container by
name stay together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: Where a test boots systemd or acts as root on the host.
INTEGRATION = tuple(TESTS / name for name in ("integration", "attacks", "scenarios"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by where it lives: ``integration`` (and so ``slow``) below the
    container suites, and each container module its own xdist group."""
    for item in items:
        path = Path(item.path).resolve()
        if any(path.is_relative_to(root) for root in INTEGRATION):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)
            if item.get_closest_marker("xdist_group") is None:
                group = path.relative_to(TESTS).with_suffix("").as_posix()
                item.add_marker(pytest.mark.xdist_group(group))
