"""What every unit test may use: a real plan store and a root-owned approvals directory
in tmp_path, an injected clock and a scripted systemctl, and structlog reset around each
test (a daemon or the console configures logging for its process; no test may leak that
into the next)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from plans import PlanStore
from testbed.skips import skip_unless
from tests.unit.plans.helpers import Clock, Systemctl


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults and no bound context (the CLI
    configures logging for its process; a test must not leak that into the next)."""
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def store(tmp_path: Path) -> PlanStore:
    state = tmp_path / "state"
    state.mkdir(mode=0o750)
    plan_store = PlanStore(state)
    plan_store.ensure()
    return plan_store


@pytest.fixture
def approvals_dir(tmp_path: Path) -> Path:
    """/var/lib/opsbot-approvals in miniature: root's, mode 0755."""
    skip_unless(
        os.geteuid() == 0, "approvals are trusted only when root owns them; run the tests as root"
    )
    directory = tmp_path / "approvals"
    directory.mkdir()
    os.chmod(directory, 0o755)
    return directory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def systemctl() -> Systemctl:
    return Systemctl()
