"""Corners of the runbook's evidence that the mutation run found no test for: a port
known only from the baseline (IPv4 or IPv6) for an "Address already in use" naming
none; a reload systemd says failed whose journal line is gone; a step reason that,
with what changed, is exactly at the plan's limit; a queue consumer whose state cannot
be read, still followed to what it needs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools._baseline_store import BaselineListener, Snapshot
from diagnose_svc.tools.read_changes import Change
from diagnose_svc.verdict import PlanVerdict
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept, health
from tests.unit.diagnose.test_runbook import (
    PYTHON_IN_USE,
    _address_in_use,
    _changed_since_healthy,
    cause_of,
    diagnose,
    settings,
    steps_of,
)
from tests.unit.diagnose.test_runbook_blame import failed, service, unreadable
from tests.unit.diagnose.test_runbook_queues import CONFIG, edge, queue_host


@pytest.mark.parametrize("endpoint", ["127.0.0.1:6380", ":::6380"])
def test_an_address_in_use_is_checked_at_the_port_it_held_when_healthy(endpoint: str) -> None:
    """db (no health target) failed with Python's "Address already in use", naming no
    port; when the host was healthy it listened on 6380 (IPv4 or IPv6), free now: it is
    started, its port checked."""
    host = RecordedHost().add(recorded.DB_SHOW, _address_in_use("db.service", 0, PYTHON_IN_USE))
    host.baseline = Snapshot(
        taken_at=datetime(2026, 11, 29, 21, 0, tzinfo=UTC),
        units={"db.service": "active/running"},
        listeners=[BaselineListener(unit="db.service", endpoint=endpoint)],
        edges=[],
        health={},
    )
    verdict, _ = diagnose(host, "db.service")
    assert [step[:2] for step in steps_of(verdict)] == [("start_unit", "db.service")]
    assert ("list_listeners", {"port": 6380}) in host.calls


def test_a_reload_systemd_says_failed_is_a_config_error_without_its_journal_line() -> None:
    """ReloadResult= says its last reload failed, and the journal no longer holds PID
    1's "Reload failed" line (rotated away): still a note that it runs the previous
    configuration, never a restart."""
    config = settings(web=("http://127.0.0.1/", "reloadfail.service"))
    host = RecordedHost(
        health={"web": health("web", "reloadfail.service", "unexpected_status", 500)}
    ).add(recorded.RELOADFAIL_SHOW, recorded.RELOADFAIL_JOURNAL[:1])
    verdict, _ = diagnose(host, "reloadfail.service", config)
    assert cause_of(verdict) == ("config_error", "reloadfail.service")


def _killed_with_change(name_length: int) -> PlanVerdict:
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    host.changes = _changed_since_healthy(
        "killed.service",
        Change(
            at=datetime(2026, 11, 29, 21, 30, tzinfo=UTC),
            kind="file",
            name="/etc/killed/" + "k" * name_length + ".env",
            detail="modified",
        ),
    )
    verdict, _ = diagnose(host, "killed.service")
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    return verdict


def test_a_reason_with_what_changed_is_cut_to_the_plans_limit() -> None:
    """What changed, said after a start's reason, brings it to 501 characters uncut:
    cut to 500 (the plan's limit), the plan is still made and accepted."""
    short = _killed_with_change(1)
    uncut = len(short.plan.steps[0].reason or "")
    verdict = _killed_with_change(1 + 501 - uncut)
    assert len(verdict.plan.steps[0].reason or "") <= 500


def test_a_consumer_whose_state_cannot_be_read_is_still_followed_to_what_it_needs() -> None:
    """The queue backs up; billing, its consumer, cannot be read (the bus times out),
    and ledger, which billing is configured to reach, failed: the plan starts ledger."""
    host = queue_host(service("billing.service"))
    host.add(failed("ledger.service"))
    assert host.configured is not None
    host.configured.append(
        edge("billing.service", "ledger.service", ":21600", "EnvironmentFile=LEDGER")
    )
    verdict = run_diagnosis(
        "front.service",
        "",
        RunbookPolicy(CONFIG),
        unreadable(host, "billing.service"),
        FakeSubmitter([accept()]),
        CONFIG,
    )
    assert [step[:2] for step in steps_of(verdict)] == [("start_unit", "ledger.service")]
