"""Fixtures for the attack suite: tests/integration's session fixtures ``container`` and
``opsbot``, registered here too, so the attacks get a booted systemd of their own (one per
conftest that registers them) with opsbot installed as an operator would: what they
break, edit or leave behind never reaches the integration tests.

Every test below this directory is marked ``integration``: the container tests boot a
real systemd, and the in-process ones start real daemons, mount tmpfs and change users,
which needs root just the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import structlog

from testbed.skips import skip_unless
from tests.integration.conftest import container, opsbot  # noqa: F401


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults and no bound context: an
    in-process daemon logs through structlog, and must not inherit another test's setup."""
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def root() -> None:
    """For attacks that mount a tmpfs or run a client as another user: root is needed.
    Skips without it, except under CI (``CI=true``), where that fails."""
    skip_unless(os.geteuid() == 0, "this attack needs root (mount, setuid)")
