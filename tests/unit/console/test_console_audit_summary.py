"""``opsbot audit ID`` starts with one line that tells the story before the story does:
who proposed what, who approved it, what ran, and where it ended::

    opsbot-diagnose proposed "Restart app"; bob approved; ran restart app.service (ok): VERIFIED

The entries are real journal files, written by systemd-journal-remote from the fields
opsbot's units log (shared_io.log.journal_fields), read by the real CLI through the one
door to the journal (opsbot_cli.story._open), as on a host and on a collector."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli import story
from opsbot_cli.audit import summary
from opsbot_cli.main import main
from opsbot_cli.story import AuditEntry
from opsbot_cli.writers import DIAGNOSE_USER
from plans import EXECUTOR_USER
from shared_io.log import journal_fields
from shared_io.run import run

JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")
PLAN = "20261201-101500-0a1b2c3d"
FOLLOW_UP = "20261201-103000-9f8e7d6c"
RUN = "7d3c0b1e2f4a4b5c8d9e0f1a2b3c4d5e"
#: The executor's and the diagnosis's user in these tests: one every host has.
OPSBOT_UID = 65534
ARGV = "systemctl restart --no-ask-password -- app.service"
AT = datetime(2026, 12, 1, 10, 15, tzinfo=UTC)

needs_journal_remote = pytest.mark.skipif(
    not JOURNAL_REMOTE.exists() and os.environ.get("CI") != "true",
    reason="systemd-journal-remote is not installed (apt-get install systemd-journal-remote)",
)


def logged(seconds: int, event: str, *, uid: int, unit: str, **fields: str) -> dict[str, str]:
    """One entry as journald stores what ``unit`` (as ``uid``) logged on host web1."""
    return {
        "__REALTIME_TIMESTAMP": str(1_764_584_100_000_000 + seconds * 1_000_000),
        "__MONOTONIC_TIMESTAMP": str(5_000_000 + seconds * 1_000_000),
        "_BOOT_ID": "0123456789abcdef0123456789abcdef",
        "_HOSTNAME": "web1",
        "_UID": str(uid),
        "_GID": str(uid),
        "_SYSTEMD_UNIT": unit,
        "_TRANSPORT": "journal",
        **journal_fields({"event": event, **fields}, unit.split(".")[0]),
    }


def opsbot_users_are_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """On this host, opsbot's writers' users (the executor's, the diagnosis's) are
    OPSBOT_UID, as in these journals."""
    users = {"root": 0, EXECUTOR_USER: OPSBOT_UID, DIAGNOSE_USER: OPSBOT_UID}
    monkeypatch.setattr(story, "local_uids", lambda: users)


def verified_story() -> list[dict[str, str]]:
    """A plan's whole life: diagnosis proposes it, the executor accepts it (from the
    diagnose user), bob approves it as root, the apply restarts app.service, it is
    VERIFIED."""
    executor = {"uid": OPSBOT_UID, "unit": "opsbot-executor.service"}
    apply = {"uid": OPSBOT_UID, "unit": "opsbot-apply.service", "plan_id": PLAN}
    return [
        logged(0, "diagnose.step", uid=OPSBOT_UID, unit="opsbot-diagnose.service", run_id=RUN),
        logged(
            1,
            "plan.accepted",
            **executor,
            run_id=RUN,
            plan_id=PLAN,
            sha256="5" * 64,
            goal="Restart app",
            peer_uid=str(OPSBOT_UID),
        ),
        logged(2, "plan.approved", uid=0, unit="session-3.scope", plan_id=PLAN, approver="bob"),
        logged(3, "plan.applying", **apply, state="APPLYING"),
        logged(4, "step.finished", **apply, step="1", argv=ARGV, exit_status="0", outcome="ok"),
        logged(5, "plan.applied", **apply, state="APPLIED"),
        logged(6, "plan.verified", **executor, plan_id=PLAN, state="VERIFIED"),
    ]


def write_journal(path: Path, entries: Sequence[Mapping[str, str]]) -> Path:
    """``path`` as systemd-journal-remote writes it, from ``entries`` in export format."""
    export = path.with_suffix(".export")
    blocks = ["".join(f"{k}={v}\n" for k, v in fields.items()) for fields in entries]
    export.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    done = run([str(JOURNAL_REMOTE), f"--output={path}", str(export)], timeout=30)
    assert done.ok, done
    export.unlink()
    return path


def entry(event: str, plan_id: str = PLAN, peer: str = "", **fields: str) -> AuditEntry:
    return AuditEntry(AT, "opsbot-executor.service (uid 998)", event, fields, plan_id, peer)


@needs_journal_remote
def test_the_audit_of_a_plan_starts_with_its_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the host: the first line says the diagnose user proposed "Restart app", bob
    approved it, the restart of app.service ran ok and the plan is VERIFIED; a blank
    line, then the story, entry by entry; nothing over 100 columns."""
    journal = write_journal(tmp_path / "system.journal", verified_story())
    capsys.readouterr()  # what the runner logged writing it
    opsbot_users_are_nobody(monkeypatch)
    monkeypatch.setattr(story, "_open", lambda files: _reader(files or (journal,)))
    assert main(["audit", PLAN, "--no-pager"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        'nobody proposed "Restart app"; bob approved; ran restart app.service (ok): VERIFIED'
    )
    assert lines[1] == "" and "diagnose.step" in lines[2]
    assert max(len(line) for line in lines) <= 100


@needs_journal_remote
def test_on_a_collector_each_hosts_section_starts_with_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the journal collector, web1's section: its name and file, then the summary of
    what web1 says of the plan (its diagnose user seen only as a uid there), then the
    story."""
    remote = tmp_path / "remote"
    remote.mkdir()
    write_journal(remote / "remote-web1.journal", verified_story())
    capsys.readouterr()  # what the runner logged writing it
    assert main(["audit", PLAN, "--no-pager", "--remote-dir", str(remote)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("host web1  (remote-web1.journal)")
    assert lines[at + 1] == (
        f'uid {OPSBOT_UID} proposed "Restart app"; bob approved; ran restart app.service (ok): '
        "VERIFIED"
    )


def test_a_plan_rejected_before_anything_ran() -> None:
    """Proposed, then rejected by alice: nothing ran, and it ended REJECTED."""
    said = summary(
        PLAN,
        [
            entry("plan.accepted", peer="opsbot-diagnose", GOAL="Start db"),
            entry("plan.rejected", APPROVER="alice", REASON="not now"),
        ],
    )
    assert said == 'opsbot-diagnose proposed "Start db"; alice rejected it; nothing ran: REJECTED'


def test_a_plan_waiting_for_approval_says_so() -> None:
    """Only the executor's acceptance so far: not approved, nothing ran, PROPOSED."""
    said = summary(PLAN, [entry("plan.accepted", peer="root", GOAL="Start db")])
    assert said == 'root proposed "Start db"; not approved; nothing ran: PROPOSED'


def test_a_long_story_fits_one_line_and_the_state_stays() -> None:
    """A 200-character goal and three steps: the line fits 100 columns, the steps
    counted by how they ended, the goal cut with an ellipsis, the state last; with -v the
    line is whole, each step named."""
    steps = [
        entry("step.finished", ARGV=f"{ARGV[:-11]}unit-{i}.service", OUTCOME=outcome)
        for i, outcome in enumerate(["ok", "ok", "failed"])
    ]
    told = [
        entry("plan.accepted", peer="opsbot-diagnose", GOAL="g" * 200),
        entry("plan.approved", APPROVER="bob"),
        *steps,
        entry("plan.failed", STATE="FAILED"),
    ]
    said = summary(PLAN, told)
    assert len(said) == 100
    assert said.startswith('opsbot-diagnose proposed "gggg')
    assert said.endswith('g…"; bob approved; ran 3 steps (2 ok, 1 failed): FAILED')
    whole = summary(PLAN, told, verbose=True)
    assert "g" * 200 in whole and "ran restart unit-0.service (ok), " in whole
    assert whole.endswith("restart unit-2.service (failed): FAILED")


def test_a_short_story_names_each_step() -> None:
    """Two steps and a short goal fit: each step is named with how it ended."""
    start_db = "systemctl start --no-ask-password -- db.service"
    said = summary(
        PLAN,
        [
            entry("plan.accepted", peer="root", GOAL="Start db"),
            entry("plan.approved", APPROVER="bob"),
            entry("step.finished", ARGV=start_db, OUTCOME="ok"),
            entry("step.finished", ARGV=ARGV, OUTCOME="ok"),
            entry("plan.applied", STATE="APPLIED"),
        ],
    )
    assert said == (
        'root proposed "Start db"; bob approved; ran start db.service (ok), restart app.service '
        "(ok): APPLIED"
    )


def test_an_incidents_other_plans_are_not_in_the_summary() -> None:
    """The audit of an incident's first plan tells the follow-up's story too; the
    summary is of the plan asked about, and the follow-up's steps do not count."""
    said = summary(
        PLAN,
        [
            entry("plan.accepted", peer="opsbot-diagnose", GOAL="Restart app"),
            entry("plan.approved", APPROVER="bob"),
            entry("step.finished", ARGV=ARGV, OUTCOME="ok"),
            entry("plan.unresolved", STATE="UNRESOLVED"),
            entry("plan.accepted", plan_id=FOLLOW_UP, peer="opsbot-diagnose", GOAL="Start db"),
            entry("step.finished", plan_id=FOLLOW_UP, ARGV=ARGV, OUTCOME="failed"),
            entry("plan.verified", plan_id=FOLLOW_UP, STATE="VERIFIED"),
        ],
    )
    assert said == (
        'opsbot-diagnose proposed "Restart app"; bob approved; ran restart app.service (ok): '
        "UNRESOLVED"
    )


def _reader(files: tuple[Path, ...]) -> Any:
    from systemd import journal

    return journal.Reader(files=[str(f) for f in files])
