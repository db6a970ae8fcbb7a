"""The records as a compromised diagnose user leaves them for root's ``opsbot replay``.

The diagnose user owns its state directory, so it may put anything where the records and
the outcomes are: a symlink to a directory root owns (whose files would pass the store's
owner check, read as root), a FIFO named as a record (root's replay would wait on it for
ever), records shaped otherwise than a Recording (root's replay would end in a traceback).
Each is skipped, or read as nothing, and every other record is still replayed.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.record import MAX_RECORD_BYTES, SUFFIX, VERSION, RecordStore, Skipped
from diagnose_svc.replay import recorded_plans, replay_store
from opsbot_cli.replay import diagnosis_lines
from opsbot_cli.replay_rules import lines as rules_lines
from plans.rules_replay import RuleReplayed
from shared_schema import DiagnoseSettings

#: The diagnose user, as the tests play it (any uid but root's).
DIAGNOSE_UID = 65534
RUN_ID = "20261206-120000-0000000a"


def _record(run_id: str = RUN_ID, **fields: Any) -> bytes:
    document: dict[str, Any] = {
        "version": VERSION,
        "run_id": run_id,
        "unit": "app.service",
        "symptom": "",
        "verdict": {"kind": "note", "ended_by": "final_note"},
    }
    document.update(fields)
    return gzip.compress(json.dumps(document).encode())


def _state(tmp_path: Path) -> Path:
    """The diagnose user's state directory (0700, its own)."""
    state = tmp_path / "opsbot-diagnose"
    state.mkdir(mode=0o700)
    os.chown(state, DIAGNOSE_UID, DIAGNOSE_UID)
    return state


def test_a_records_directory_symlinked_to_roots_reads_nothing_of_roots(tmp_path: Path) -> None:
    """The diagnose user replaces its records directory by a symlink to a directory of
    root's holding a root-owned file named as a record: root's replay reads none of it
    (the owner compared is the records directory's own, and it is a symlink)."""
    roots = tmp_path / "roots"
    roots.mkdir(mode=0o700)
    (roots / f"{RUN_ID}{SUFFIX}").write_bytes(_record(unit="roots-secret.service"))
    state = _state(tmp_path)
    (state / "records").symlink_to(roots)

    loaded = list(RecordStore(state / "records").load())

    assert [type(entry) for entry in loaded] == [Skipped]


def test_an_outcomes_directory_symlinked_to_roots_says_no_outcome(tmp_path: Path) -> None:
    """The outcomes directory a symlink to root's directory, where a root-owned file has a
    plan id's name: no outcome is read out of root's file."""
    roots = tmp_path / "roots"
    roots.mkdir(mode=0o700)
    (roots / "plan-1").write_text(json.dumps({"outcome": "roots-secret"}))
    records = _state(tmp_path) / "records"
    records.mkdir(mode=0o700)
    os.chown(records, DIAGNOSE_UID, DIAGNOSE_UID)
    (records / "outcomes").symlink_to(roots)

    assert RecordStore(records).outcome("plan-1") is None


def test_a_fifo_named_as_a_record_never_holds_the_replay(tmp_path: Path) -> None:
    """A FIFO with a record's name, nobody writing to it: the replay skips it at once
    instead of waiting for a writer that never comes."""
    records = tmp_path / "records"
    records.mkdir(mode=0o700)
    os.mkfifo(records / f"{RUN_ID}{SUFFIX}", 0o600)
    loaded: list[Any] = []
    reader = threading.Thread(
        target=lambda: loaded.extend(RecordStore(records).load()), daemon=True
    )

    reader.start()
    reader.join(timeout=10)

    assert not reader.is_alive(), "the replay waits on a FIFO"
    assert [type(entry) for entry in loaded] == [Skipped]


def test_misshapen_records_are_skipped_and_the_others_replayed(tmp_path: Path) -> None:
    """Records shaped otherwise than a Recording (a verdict that is a string, tools or
    calls that are numbers, a plan whose steps are a number) are each skipped as damaged;
    the good record beside them is still replayed, and the plans list still made."""
    records = tmp_path / "records"
    records.mkdir(mode=0o700)
    misshapen: list[dict[str, Any]] = [
        {"verdict": "plan"},
        {"tools": 5},
        {"calls": 7},
        {"verdict": {"kind": "plan", "plan_id": "p", "plan": {"steps": 5}}},
    ]
    for n, fields in enumerate(misshapen):
        run_id = f"20261206-11000{n}-0000000{n}"
        (records / f"{run_id}{SUFFIX}").write_bytes(_record(run_id, **fields))
    (records / f"{RUN_ID}{SUFFIX}").write_bytes(_record())
    store = RecordStore(records)

    settings = DiagnoseSettings()
    report = replay_store(store, RunbookPolicy(settings), settings)
    plans = recorded_plans(store)

    assert [r["run_id"] for r in report["replays"]] == [RUN_ID]
    assert len(report["skipped"]) == len(misshapen)
    assert all(s["why"].startswith("damaged") for s in report["skipped"])
    assert [s["record"] for s in plans["skipped"]] == [f"20261206-110000-00000000{SUFFIX}"]


def test_what_a_record_says_reaches_the_terminal_printable() -> None:
    """A verdict kind, a plan id and an outcome written by the diagnose user with terminal
    escapes in them: ``opsbot replay`` and ``opsbot replay --rules`` print none of the
    escapes to root's terminal."""
    escape = "\x1b]0;owned\x07\x1b[2J"
    replayed = {
        "run_id": RUN_ID,
        "unit": "app.service",
        "then": {"kind": f"plan{escape}", "what": []},
        "now": {"kind": "note", "what": []},
    }
    rule = RuleReplayed("r", "auto")
    rule.approved.append({"plan_id": "p1", "steps": ["restart app.service"], "ended": escape})
    rule.ended[escape] += 1
    rule.not_replayable.append({"plan_id": f"p2{escape}", "why": "no record"})

    said = [*diagnosis_lines(replayed), *rules_lines([rule], 2, datetime.now(UTC), [])]

    assert not [line for line in said if "\x1b" in line or "\x07" in line]


def test_a_record_grown_after_its_size_was_read_is_read_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The diagnose user makes a record huge (a sparse file) right after the replay read
    its size: the replay reads no more than a record may be, and skips it."""
    records = tmp_path / "records"
    records.mkdir(mode=0o700)
    path = records / f"{RUN_ID}{SUFFIX}"
    path.write_bytes(_record())
    small = os.stat(path)
    real_fstat = os.fstat

    def grown_after(fd: int) -> os.stat_result:
        found = real_fstat(fd)
        if found.st_ino == small.st_ino:
            os.truncate(path, 4 * MAX_RECORD_BYTES)  # after the size was read
            return small
        return found

    monkeypatch.setattr("diagnose_svc.record.os.fstat", grown_after)

    [loaded] = RecordStore(records).load()

    assert isinstance(loaded, Skipped)
