"""Each of opsbot's writers is believed for its own events only (opsbot_cli/writers.py):
decisions from root, steps and verdicts from the executor's units as its user, diagnoses
from the diagnosis units as theirs. The diagnose user, logging from inside its own unit
that bob approved a plan root rejected, that a step ran and that the plan is VERIFIED,
writes no line of the plan's history: ``opsbot audit`` says root rejected it and nothing
ran, and shows those entries apart, "not from its writer"; on a collector too; and the
agent's ``plan_story`` leaves them out of the story. The entries are real journal files
(systemd-journal-remote), read by the real CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from opsbot_cli import story
from opsbot_cli.main import main
from opsbot_cli.mcp_server.results import story_result
from opsbot_cli.story import Apart, AuditEntry
from opsbot_cli.writers import (
    APPLY,
    DIAGNOSIS,
    EXECUTOR,
    ROOT,
    NotItsWriter,
    judge,
    writer_of,
)
from tests.unit.console.test_console_audit_summary import (
    ARGV,
    OPSBOT_UID,
    PLAN,
    RUN,
    _reader,
    logged,
    needs_journal_remote,
    opsbot_users_are_nobody,
    write_journal,
)

EXECUTOR_AT = {"uid": OPSBOT_UID, "unit": "opsbot-executor.service", "plan_id": PLAN}
DIAGNOSE_AT = {"uid": OPSBOT_UID, "unit": "opsbot-diagnose.service", "plan_id": PLAN}


def rejected_story() -> list[dict[str, str]]:
    """Diagnosis proposes a plan, the executor accepts it, root (alice) rejects it; then
    the diagnose user, from inside opsbot-diagnose.service, logs that bob approved it,
    that its step ran ok and that it is VERIFIED."""
    return [
        logged(0, "diagnose.step", uid=OPSBOT_UID, unit="opsbot-diagnose.service", run_id=RUN),
        logged(1, "plan.accepted", **EXECUTOR_AT, run_id=RUN, goal="Restart app"),
        logged(2, "plan.rejected", uid=0, unit="session-3.scope", plan_id=PLAN, approver="alice"),
        logged(3, "plan.approved", **DIAGNOSE_AT, approver="bob"),
        logged(4, "step.finished", **DIAGNOSE_AT, step="1", argv=ARGV, outcome="ok"),
        logged(5, "plan.verified", **DIAGNOSE_AT, state="VERIFIED"),
    ]


def test_each_event_has_one_writer_and_is_believed_from_it_alone() -> None:
    """The table: root decides, the executor's daemon takes plans and records verdicts,
    the apply runs steps and moves plans, diagnosis diagnoses. A step from root, a
    verdict from the apply's unit, an approval from the diagnose unit are each one of
    opsbot's writers speaking for another; the diagnose uid in no unit is no writer."""
    assert [writer_of(e) for e in ("plan.approved", "approval.terminal", "rules.decided")] == [
        ROOT
    ] * 3
    assert [writer_of(e) for e in ("plan.accepted", "plan.verified", "plan.unresolved")] == [
        EXECUTOR
    ] * 3
    assert [writer_of(e) for e in ("step.finished", "plan.applied", "approval.consumed")] == [
        APPLY
    ] * 3
    assert writer_of("diagnose.verdict") is DIAGNOSIS and writer_of("config.reloaded") is None
    uids = {"root": 0, "opsbot-executor": 998, "opsbot-diagnose": 997}
    apply, diagnose = "opsbot-apply.service", "opsbot-diagnose.service"
    said = {"EVENT": "step.finished", "_UID": 998, "_SYSTEMD_UNIT": apply}
    assert judge(said, uids) is APPLY
    assert judge({**said, "_UID": 0}, uids) == NotItsWriter(APPLY)
    assert judge({**said, "EVENT": "plan.verified"}, uids) == NotItsWriter(EXECUTOR)
    approved = {"EVENT": "plan.approved", "_UID": 997, "_SYSTEMD_UNIT": diagnose}
    assert judge(approved, uids) == NotItsWriter(ROOT)
    assert judge({**approved, "_SYSTEMD_UNIT": "cron.service"}, uids) is None
    assert judge({**approved, "_UID": 998}, uids) is None  # the executor's uid, not its unit
    assert judge({**approved, "EVENT": "diagnose.step"}, uids) is DIAGNOSIS
    onfailure = {
        "EVENT": "diagnose.step",
        "_UID": 997,
        "_SYSTEMD_UNIT": "opsbot-onfailure@a.service",
    }
    assert judge(onfailure, uids) is DIAGNOSIS
    # On a collector the sending host's uids are unknown: the unit stands for its user.
    assert judge({**said, "_UID": 4242}, None) is APPLY
    assert judge({**approved, "_UID": 4242}, None) == NotItsWriter(ROOT)


@needs_journal_remote
def test_the_diagnose_users_decision_step_and_verdict_are_shown_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan root rejected, and the diagnose user's own unit logging bob's approval, a
    step and VERIFIED: the summary says alice rejected it, nothing ran, REJECTED; the
    story holds the diagnosis, the acceptance and the rejection; the three forged entries
    are after it, under "not from its writer", each saying whose event it is; --json
    has them apart."""
    journal = write_journal(tmp_path / "system.journal", rejected_story())
    capsys.readouterr()
    opsbot_users_are_nobody(monkeypatch)
    monkeypatch.setattr(story, "_open", lambda files: _reader(files or (journal,)))
    assert main(["audit", PLAN, "--no-pager"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        'opsbot-diagnose proposed "Restart app"; alice rejected it; nothing ran: REJECTED'
    )
    apart = lines.index("not from its writer (3): another writer's events, not the plan's history")
    history = "\n".join(lines[:apart])
    assert "plan.rejected" in history
    for forged in ("plan.approved", "step.finished", "plan.verified", "bob"):
        assert forged not in history
    rest = "\n".join(lines[apart:])
    assert "plan.approved" in rest and "[opsbot-diagnose.service (uid 65534)]" in rest
    assert "    (only root writes it)" in lines
    assert "    (only the apply (opsbot-apply.service as opsbot-executor) writes it)" in lines
    assert max(len(line) for line in lines) <= 100

    assert main(["audit", PLAN, "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert [e["event"] for e in said["entries"]] == [
        "diagnose.step",
        "plan.accepted",
        "plan.rejected",
    ]
    assert [(e["event"], e["not_from_its_writer"]) for e in said["not_from_its_writer"]] == [
        ("plan.approved", "only root writes it"),
        ("step.finished", "only the apply (opsbot-apply.service as opsbot-executor) writes it"),
        (
            "plan.verified",
            "only the executor (opsbot-executor.service as opsbot-executor) writes it",
        ),
    ]


@needs_journal_remote
def test_on_a_collector_a_hosts_diagnose_user_speaks_only_for_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """web1's file on the collector, with its diagnose unit's forged approval, step and
    verdict: web1's section says alice rejected the plan and nothing ran, and lists the
    three apart."""
    remote = tmp_path / "remote"
    remote.mkdir()
    write_journal(remote / "remote-web1.journal", rejected_story())
    capsys.readouterr()
    assert main(["audit", PLAN, "--no-pager", "--remote-dir", str(remote), "--host", "web1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("host web1  (remote-web1.journal)")
    assert lines[at + 1] == (
        'opsbot-diagnose proposed "Restart app"; alice rejected it; nothing ran: REJECTED'
    )
    assert any(line.startswith("not from its writer (3)") for line in lines)
    assert main(["audit", PLAN, "--json", "--remote-dir", str(remote), "--host", "web1"]) == 0
    web1 = json.loads(capsys.readouterr().out)["hosts"]["web1"]
    assert [e["event"] for e in web1["not_from_its_writer"]] == [
        "plan.approved",
        "step.finished",
        "plan.verified",
    ]


def test_the_agents_story_leaves_out_what_is_not_from_its_writer() -> None:
    """plan_story's text: the story is the rejection; the diagnose user's approval is a
    line apart, by its event and source and whose event it is, its fields (bob) left
    out."""
    at = datetime(2026, 12, 1, 10, 15, tzinfo=UTC)
    rejected = AuditEntry(at, "session-3.scope (uid root)", "plan.rejected", {"APPROVER": "alice"})
    forged = AuditEntry(
        at, "opsbot-diagnose.service (uid 65534)", "plan.approved", {"APPROVER": "bob"}, PLAN
    )
    text = story_result(
        PLAN, "REJECTED", [rejected], 0, "summary", [Apart(forged, NotItsWriter(ROOT))]
    )
    assert "1 entries written by opsbot itself" in text
    assert (
        "left out, not from its writer: plan.approved [opsbot-diagnose.service (uid 65534)] at "
        "2026-12-01T10:15:00+00:00: only root writes it; not the plan's history"
    ) in text
    assert "bob" not in text
