"""The unit tests' own logging (tests/unit/conftest.py): a log line a daemon's thread
writes while pytest has the terminal back (between a test's setup, call and teardown)
lands in pytest's capture, never in ``pytest -q``'s dots; capture_logs() still sees
every event a test asserts on."""

from __future__ import annotations

import io
import sys

import pytest
import structlog
from structlog.testing import capture_logs


def test_a_log_line_while_pytest_has_the_terminal_is_not_printed_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest puts the terminal back as sys.stdout while it reports: an event logged
    then (here, sys.stdout swapped for a stand-in terminal) does not reach it."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    structlog.get_logger("opsbot.server").info("server.ready", socket="/run/opsbot/x.sock")
    assert terminal.getvalue() == ""


def test_capture_logs_still_sees_each_event() -> None:
    """A test asserting on events gets them, with their keys, as before."""
    with capture_logs() as logs:
        structlog.get_logger("opsbot.server").info("server.ready", socket="/run/opsbot/x.sock")
    assert logs == [{"event": "server.ready", "socket": "/run/opsbot/x.sock", "log_level": "info"}]
