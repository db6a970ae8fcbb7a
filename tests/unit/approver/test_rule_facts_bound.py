"""The facts root's approver keeps with each rule decision, against its state's bytes.

The diagnose user decides how many plans the rules are asked about, and each decision's
facts (plans.rule_facts: 16 units' histories and readings, opsbot's recent refusals) may
come to ~100 KB: 2000 of them would be ~200 MiB, far past the state file's 8 MiB. Past
the bound the facts go first: every status link a human was sent, and every rule record
(whose approvals count against a rule's limit), are kept.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from approver_svc import state as state_module
from approver_svc.state import ApproverState, StateFile, WatchRecord
from shared_schema.approver_socket import RuleDecision, RuleFacts, UnitPast, UnitRead

NOW = datetime(2026, 12, 6, 23, 0, tzinfo=UTC)
SHA = "a" * 64


def _facts(n: int) -> RuleFacts:
    """The facts of a plan of 16 units with long names, each unreadable."""
    units = [f"{'u' * 200}{n:04d}{i:02d}.service" for i in range(16)]
    return RuleFacts(
        recent=["x" * 300] * 16,
        history=[UnitPast(unit=u, unreadable="e" * 300) for u in units],
        reading=[UnitRead(unit=u, error="e" * 300) for u in units],
    )


def test_rule_facts_past_the_state_bytes_go_before_status_links_and_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 rule decisions, their facts ~20 KB each, and 50 status links, in a state bound
    to 1 MiB: the file is written within it, every status link and every rule record
    (approvals too) is still there; only the oldest records' facts are gone."""
    monkeypatch.setattr(state_module, "MAX_STATE_BYTES", 1024 * 1024)
    state = ApproverState()
    for n in range(200):
        state.record_rule(
            RuleDecision(
                plan_id=f"20261206-23{n // 60:02d}{n % 60:02d}-{n:08x}",
                sha256=SHA,
                at=NOW,
                units=["app.service"],
                tools=["restart_unit"],
                outcome="approved" if n % 10 == 0 else "for humans",
                facts=_facts(n),
            )
        )
    for n in range(50):
        state.watch(
            f"{n:064x}",
            WatchRecord(
                plan_id="20261206-230000-00000000", sha256=SHA, expires_at=NOW + timedelta(days=1)
            ),
        )
    store = StateFile(tmp_path)

    store.save(state)

    assert len(store.path.read_bytes()) <= 1024 * 1024
    kept = store.load()
    assert len(kept.watches) == 50
    assert len(kept.ruled) == 200
    assert any(d.facts is not None for d in kept.ruled.values())
