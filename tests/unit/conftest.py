"""What every unit test may use: a real plan store and a root-owned approvals directory
in tmp_path, an injected clock and a scripted systemctl, and structlog reset around each
test (a daemon or the console configures logging for its process; no test may leak that
into the next)."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from plans import PlanStore
from testbed.skips import skip_unless
from tests.unit.plans.helpers import Clock, Systemctl


def _test_logging() -> None:
    """structlog as the test process has it: its default processors (capture_logs()
    swaps them for a test's assertions), writing to the stream pytest captures for the
    test now running. structlog's own default prints to whatever ``sys.stdout`` is at
    the moment of each event, which, while pytest reports between a test's setup, call
    and teardown, is the terminal: a daemon's thread logging then (``server.ready``)
    printed into ``pytest -q``'s dots. This logger holds the capture's stream itself."""
    structlog.reset_defaults()
    structlog.configure(logger_factory=structlog.WriteLoggerFactory(sys.stdout))


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts and ends with the test process's logging (_test_logging) and no
    bound context (the CLI and the daemons configure logging for their process; a test
    must not leak that into the next)."""
    _test_logging()
    structlog.contextvars.clear_contextvars()
    yield
    _test_logging()
    structlog.contextvars.clear_contextvars()


@pytest.fixture(autouse=True)
def _no_polkit_of_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine running the tests may have polkitd (scripts/setup installs it for the
    containers) but is no host of opsbot's: no unit test may find a polkit rule there and
    write a grant into /etc/polkit-1 (a test that needs polkit's mode says so itself)."""
    monkeypatch.setattr("plans.polkit.POLKITD_PATHS", ())


@pytest.fixture(autouse=True)
def _no_systemd_bus_of_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit state is read over this machine's system bus where there is one
    (shared_io/unit_bus.py); a unit test scripts systemctl instead, and must read what it
    scripted, not this machine's systemd (the bus reader's own tests say otherwise)."""
    monkeypatch.setenv("OPSBOT_SYSTEMD_READ", "systemctl")


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
