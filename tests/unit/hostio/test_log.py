"""Logging for the journal, the same on every unit: events named as verbs, fields an
operator can filter on (PLAN_ID, PLAN_SHA256, RUN_ID, STEP, ARGV, EXIT_STATUS), one stable
MESSAGE_ID per event, and SYSLOG_IDENTIFIER naming the unit."""

import re
from functools import partial

import pytest
import structlog

from shared_io import log
from shared_io.log import message_id

journal_fields = partial(log.journal_fields, identifier="opsbot-apply")

SHA = "f590a134ee98951d270f8d9c13d23121345b3db810d915a3bdbd252afd419c07"


def test_a_step_event_becomes_upper_case_journal_fields() -> None:
    """plan_id, sha256, step, argv and exit_status become PLAN_ID, PLAN_SHA256, STEP,
    ARGV (shell-quoted, for copy and paste) and EXIT_STATUS."""
    fields = journal_fields(
        {
            "event": "step.finished",
            "level": "info",
            "timestamp": "2026-11-29T21:35:00Z",
            "plan_id": "20261129-213500-1a2b3c4d",
            "sha256": SHA,
            "step": 1,
            "argv": ["systemctl", "restart", "--no-ask-password", "--", "my app.service"],
            "exit_status": 0,
            "output": None,
        }
    )
    assert fields["PLAN_ID"] == "20261129-213500-1a2b3c4d"
    assert fields["PLAN_SHA256"] == SHA
    assert fields["STEP"] == "1"
    assert fields["ARGV"] == "systemctl restart --no-ask-password -- 'my app.service'"
    assert fields["EXIT_STATUS"] == "0"
    assert fields["EVENT"] == "step.finished"
    assert fields["PRIORITY"] == "6"
    assert fields["SYSLOG_IDENTIFIER"] == "opsbot-apply"
    assert "OUTPUT" not in fields
    assert "TIMESTAMP" not in fields and "SHA256" not in fields
    assert fields["MESSAGE"].startswith("step.finished plan_id=20261129-213500-1a2b3c4d ")


def test_levels_map_to_syslog_priorities() -> None:
    """warning and error land in the journal as priorities 4 and 3."""
    assert journal_fields({"event": "approval.refused", "level": "warning"})["PRIORITY"] == "4"
    assert journal_fields({"event": "apply.error", "level": "error"})["PRIORITY"] == "3"


def test_field_names_are_made_journal_safe() -> None:
    """Keys with characters the journal does not allow are mapped to A-Z, 0-9 and _."""
    fields = journal_fields({"event": "x", "peer-uid": 0, "_private": 1})
    assert fields["PEER_UID"] == "0"
    assert fields["PRIVATE"] == "1"


def test_message_id_is_128_bits_of_hex_stable_per_event_and_distinct_between_events() -> None:
    """``journalctl MESSAGE_ID=...`` selects one kind of event: the id is 32 hex digits,
    the same every time for one event name, different for another."""
    accepted = journal_fields({"event": "plan.accepted"})["MESSAGE_ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", accepted)
    assert (
        accepted
        == message_id("plan.accepted")
        == journal_fields({"event": "plan.accepted", "x": 1})["MESSAGE_ID"]
    )
    ids = {
        message_id(e)
        for e in ("plan.accepted", "plan.applied", "step.finished", "approval.refused")
    }
    assert len(ids) == 4


def test_configure_sends_each_event_to_journald_as_its_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """configure(identifier, journal=True) sends every event through systemd.journal.send
    with the MESSAGE and the fields journal_fields makes, under that identifier; bound
    context (plan_id, run_id) comes along."""
    from systemd import journal

    sent: list[tuple[str, dict[str, str]]] = []
    monkeypatch.setattr(journal, "send", lambda message, **fields: sent.append((message, fields)))
    try:
        log.configure("opsbot-diagnose", journal=True)
        with structlog.contextvars.bound_contextvars(run_id="20261129-213500-1a2b3c4d"):
            structlog.get_logger().info("diagnose.finished", plan_id="p", sha256="ab" * 32)
    finally:
        structlog.reset_defaults()
    [(message, fields)] = sent
    assert message.startswith("diagnose.finished ")
    assert fields["SYSLOG_IDENTIFIER"] == "opsbot-diagnose"
    assert (fields["RUN_ID"], fields["PLAN_ID"], fields["PLAN_SHA256"]) == (
        "20261129-213500-1a2b3c4d",
        "p",
        "ab" * 32,
    )
    assert fields["MESSAGE_ID"] == message_id("diagnose.finished")


def test_an_entry_names_the_sink_as_where_it_came_from_without_reading_the_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every entry is sent from the journal sink, so python-systemd is told so
    (CODE_FILE, CODE_FUNC) instead of reading it off the stack for each entry, which
    stats the source file of each frame it reads: under a burst of submits those stats
    ran while the audit chain's turn was held."""
    import linecache

    from systemd import journal

    sent: list[tuple[str, ...]] = []
    monkeypatch.setattr(journal, "sendv", lambda *args: sent.append(args))
    looked_up: list[str] = []
    checkcache = linecache.checkcache
    monkeypatch.setattr(
        linecache, "checkcache", lambda name=None: (looked_up.append(str(name)), checkcache(name))
    )
    try:
        log.configure("opsbot-diagnose", journal=True)
        structlog.get_logger().info("diagnose.finished", run_id="r")
    finally:
        structlog.reset_defaults()
    assert looked_up == []
    [args] = sent
    assert f"CODE_FILE={log.__file__}" in args
    assert "CODE_FUNC=JournaldSink.__call__" in args
    assert "RUN_ID=r" in args


def test_without_a_journal_events_are_stderr_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """Without journald an event is one line on stderr: identifier, level, event, fields."""
    try:
        log.configure("opsbot-executor", journal=False)
        structlog.get_logger().warning("approval.refused", plan_id="p", reason="no approval")
    finally:
        structlog.reset_defaults()
    assert capsys.readouterr().err.strip() == (
        "opsbot-executor: warning: approval.refused plan_id=p reason=no approval"
    )
