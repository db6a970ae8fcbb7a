"""Logging for the journal: events named as verbs, fields an operator can filter on
(PLAN_ID, PLAN_SHA256, STEP, ARGV, EXIT_STATUS), and one stable MESSAGE_ID per event."""

import re
from pathlib import Path

from structlog.testing import capture_logs

from executor_svc.log import journal_fields, message_id
from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from executor_svc.store import PlanStore
from shared_schema import Accept, SubmitPlan

from .helpers import NOW, POLICY, plan_of

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
    assert fields["SYSLOG_IDENTIFIER"] == "opsbot"
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


def test_submitting_a_plan_logs_plan_accepted_with_its_id_and_fingerprint(tmp_path: Path) -> None:
    """When a plan is accepted, the event ``plan.accepted`` carries the plan id and
    sha256 the reply gave, and the steps as argv."""
    store = PlanStore(tmp_path)
    store.ensure()
    service = ExecutorService(store, POLICY, lambda: NOW, tmp_path / "approvals")
    diagnose = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
    with capture_logs() as events:
        reply = service.submit(SubmitPlan(plan=plan_of().model_dump(mode="json")), diagnose)
    assert isinstance(reply, Accept)
    [accepted] = [e for e in events if e["event"] == "plan.accepted"]
    assert accepted["plan_id"] == reply.plan_id
    assert accepted["sha256"] == reply.sha256 == plan_of().fingerprint()
    assert accepted["duplicate"] is False
    assert accepted["log_level"] == "info"
    assert accepted["steps"] == "systemctl restart --no-ask-password -- nginx.service"
