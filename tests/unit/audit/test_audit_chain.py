"""The chained trail, entry by entry: a writer chains each entry about a plan to the one
before it, in the plan's chain and the day's, and keeps its heads; the verifier names an
entry deleted (also the newest), edited, moved or made up, and passes the trail as it was
written. Entries here are the fields a writer sends (shared_io.log.journal_fields) with
the fields journald adds; the same trail through real journal files and real daemons is
tests/attacks/test_attack_audit.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from opsbot_cli import audit_verify
from opsbot_cli.audit_verify import ChainReport, check_chain
from shared_io.audit_chain import Chain, entry_hash, plan_head_path, read_head
from shared_io.log import journal_fields

PLAN = "20261203-061137-b13ac71b"
EVENTS = ("plan.accepted", "approval.consumed", "step.finished", "plan.applied", "plan.verified")


def written(tmp_path: Path, events: tuple[str, ...] = EVENTS) -> list[dict[str, str]]:
    """``events`` about PLAN as the executor writes them, as the journal keeps them."""
    chain = Chain("executor", tmp_path)
    entries = []
    for n, event in enumerate(events):
        fields = journal_fields({"event": event, "plan_id": PLAN, "n": n}, "opsbot-apply")
        with chain.link(fields, now=datetime(2026, 12, 3, 6, n, tzinfo=UTC)):
            pass  # sent here
        fields.update({"_UID": "997", "_SYSTEMD_UNIT": "opsbot-apply.service", "CODE_LINE": "12"})
        sent = datetime(2026, 12, 3, 0, 0, n, tzinfo=UTC)
        fields["__REALTIME_TIMESTAMP"] = str(int(sent.timestamp()) * 1_000_000)
        entries.append(fields)
    return entries


def problems(tmp_path: Path, entries: list[dict[str, str]]) -> list[str]:
    report = ChainReport("executor", PLAN)
    head = read_head(plan_head_path(tmp_path, PLAN))
    check_chain(report, entries, "CHAIN_SEQ", "CHAIN_PREV", head)
    return report.problems


def test_the_trail_as_written_is_intact_and_the_head_is_its_last_entry(tmp_path: Path) -> None:
    """Five entries are numbered 1 to 5, each linking the hash before it in both chains;
    the head is the last one, and the verifier finds nothing."""
    entries = written(tmp_path)
    assert [e["CHAIN_SEQ"] for e in entries] == ["1", "2", "3", "4", "5"]
    assert entries[1]["CHAIN_PREV"] == entries[0]["AUDIT_HASH"]
    assert entries[1]["DAY_PREV"] == entries[0]["AUDIT_HASH"]
    head = read_head(plan_head_path(tmp_path, PLAN))
    assert (head.seq, head.hash) == (5, entries[-1]["AUDIT_HASH"])
    assert problems(tmp_path, entries) == []


def test_a_deleted_entry_is_named_by_its_number_and_neighbour(tmp_path: Path) -> None:
    """Entry #3 deleted: the first problem says #3 is missing, after #2 and which event #2
    was."""
    entries = written(tmp_path)
    del entries[2]
    said = problems(tmp_path, entries)
    assert said[0].startswith("missing: #3, after #2 (approval.consumed at 2026-12-"), said


def test_the_newest_entry_deleted_is_named_from_the_writers_head(tmp_path: Path) -> None:
    """The newest entry deleted leaves no gap in the journal: the writer's head still
    counts it."""
    entries = written(tmp_path)
    said = problems(tmp_path, entries[:-1])
    assert said == ["missing: #5, after #4 (plan.applied at 2026-12-03 00:00:03 UTC)"], said


def test_an_edited_entry_is_named(tmp_path: Path) -> None:
    """An entry whose event was renamed no longer matches the hash it carries: named as
    altered."""
    entries = written(tmp_path)
    entries[2]["EVENT"] = "step.skipped"
    said = problems(tmp_path, entries)
    assert said[0].startswith("altered: #3 (step.skipped at"), said


def test_two_entries_swapped_with_their_times_are_named(tmp_path: Path) -> None:
    """Two entries swapped, each given the other's time: the later number comes first,
    named as out of order."""
    entries = written(tmp_path)
    a, b = entries[1], entries[2]
    a["__REALTIME_TIMESTAMP"], b["__REALTIME_TIMESTAMP"] = (
        b["__REALTIME_TIMESTAMP"],
        a["__REALTIME_TIMESTAMP"],
    )
    entries[1], entries[2] = b, a
    said = problems(tmp_path, entries)
    assert said == [
        "out of order: #2 (approval.consumed at 2026-12-03 00:00:02 UTC) comes after "
        "#3 (step.finished at 2026-12-03 00:00:01 UTC) in the journal"
    ], said


def test_an_entry_made_up_to_replace_one_does_not_link(tmp_path: Path) -> None:
    """A forger who deletes #3 and writes a new #3 with a right hash of its own fields
    still cannot make #4's link name it."""
    entries = written(tmp_path)
    forged = dict(entries[2], REASON="made up")
    forged["AUDIT_HASH"] = entry_hash(forged)
    entries[2] = forged
    said = problems(tmp_path, entries)
    assert said == ["unlinked: #4 (plan.applied at 2026-12-03 00:00:03 UTC) does not follow #3"]


def test_a_link_forged_by_another_uid_is_named_and_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hash alone has no key: the diagnose user (in group systemd-journal) reads the
    last link and forges the next, a ``plan.verified`` #6 with a right hash and link, from its
    own unit. journald records its uid: ``opsbot audit --verify`` does not believe it: the
    executor's chain is the five entries its writer sent, intact, and the forgery is
    listed apart (so logging such fields makes no chain fail either)."""
    entries = written(tmp_path)
    forged = journal_fields({"event": "plan.verified", "plan_id": PLAN}, "opsbot-verify")
    last = entries[-1]
    forged.update(
        CHAIN="executor",
        CHAIN_SEQ="6",
        CHAIN_PREV=last["AUDIT_HASH"],
        AUDIT_DAY=last["AUDIT_DAY"],
        DAY_SEQ="6",
        DAY_PREV=last["AUDIT_HASH"],
    )
    forged["AUDIT_HASH"] = entry_hash(forged)
    forged.update(
        {
            "_UID": "998",
            "_SYSTEMD_UNIT": "opsbot-verify.service",
            "__REALTIME_TIMESTAMP": str(int(datetime(2026, 12, 3, 0, 1, tzinfo=UTC).timestamp()))
            + "000000",
        }
    )
    monkeypatch.setattr(audit_verify, "local_uids", lambda: {"root": 0, "opsbot-executor": 997})
    monkeypatch.setattr(audit_verify, "CHAIN_DIRS", {"executor": tmp_path})
    monkeypatch.setattr(audit_verify, "read_entries", lambda matches, against: [*entries, forged])
    [report] = audit_verify.verify_plan(PLAN, None)
    assert (report.entries, report.head, report.problems) == (5, 5, [])
    assert report.not_its_writers == [
        "#6 (plan.verified at 2026-12-03 00:01:00 UTC) names the executor's chain but uid 998 "
        "wrote it in opsbot-verify.service: not believed"
    ]
    assert report.as_json()["not_from_its_writer"] == report.not_its_writers


def test_a_second_entry_under_one_number_is_named_as_a_fork(tmp_path: Path) -> None:
    """After the real #3, a made-up #3 with a right hash of its own fields and a right
    link to #2: the chain forked, and --verify says so; the same entry sent twice (a
    journal upload retried) is one entry and no problem."""
    entries = written(tmp_path)
    made_up = dict(entries[2], EVENT="step.skipped", REASON="made up")
    made_up["AUDIT_HASH"] = entry_hash(made_up)
    said = problems(tmp_path, [*entries[:3], made_up, *entries[3:]])
    assert said == [
        "forked: #3 (step.skipped at 2026-12-03 00:00:02 UTC) is a second, different entry "
        "numbered #3 after (step.finished at 2026-12-03 00:00:02 UTC): one was made up, or "
        "its writer was killed between sending it and keeping its head"
    ], said
    assert problems(tmp_path, [*entries[:3], dict(entries[2]), *entries[3:]]) == []
