"""The record of every diagnosis (diagnose_svc/record.py): what an operator replays later.

Each diagnosis is kept whole, exactly as its policy saw it (after redaction); the store
stays within its size and age bounds, the oldest going first; a record that is not the
store owner's or is damaged is skipped with a warning while the others still load; a
record that cannot be written never costs the operator the diagnosis; and the threads of
a busy daemon writing at once lose nothing.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog

from diagnose_svc import daemon
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.record import SUFFIX, VERSION, Recording, RecordStore, Skipped
from diagnose_svc.runtime import run_diagnosis
from shared_schema import DiagnoseSettings, RecordSettings
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept

#: What the killed service logged before it died: a licence key the operator's pattern
#: redacts, and a password the built-in rules do.
SECRET_KEY = "LIC-7Q2Z9XK4"
SECRET_PASSWORD = "hunter2-correct-horse"
LEAKY_JOURNAL = [
    *recorded.KILLED_JOURNAL[:1],
    ("2026-11-29T21:44:39.000000Z", "info", "killed", f"licence {SECRET_KEY} accepted"),
    ("2026-11-29T21:44:39.100000Z", "info", "killed", f"db url password={SECRET_PASSWORD}"),
    *recorded.KILLED_JOURNAL[1:],
]
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _run_id(when: datetime, n: int) -> str:
    return f"{when:%Y%m%d-%H%M%S}-{n:08x}"


def _document(run_id: str, unit: str = "app.service", padding: str = "") -> dict[str, Any]:
    """A record as a Recording makes it, with ``padding`` in a tool's answer."""
    return {
        "version": VERSION,
        "run_id": run_id,
        "unit": unit,
        "symptom": "",
        "calls": [{"tool": "tail_journal", "digest": "0" * 64, "args": {}, "output": padding}],
        "verdict": {"kind": "note", "ended_by": "final_note"},
    }


def _inflated(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def test_a_diagnosis_is_kept_as_its_policy_saw_it_redacted(tmp_path: Path) -> None:
    """The runbook diagnoses the killed service whose journal holds a licence key and a
    password: its record holds the question, every tool call with its answer and the
    verdict, and neither secret appears anywhere in the file once inflated."""
    settings = DiagnoseSettings(redact_patterns=[r"LIC-[0-9A-Z]{8}"])
    host = RecordedHost().add(recorded.KILLED_SHOW, LEAKY_JOURNAL)
    recording = Recording(unit="killed.service", symptom="it stopped")
    verdict = run_diagnosis(
        "killed.service",
        "it stopped",
        RunbookPolicy(settings),
        host.tools(),
        FakeSubmitter([accept()]),
        settings,
        recording=recording,
    )
    path = RecordStore(tmp_path / "records", settings.record).write(recording.document(verdict))

    assert path.name == f"{verdict.run_id}{SUFFIX}"
    assert path.stat().st_mode & 0o777 == 0o600
    text = _inflated(path)
    assert SECRET_KEY not in text and SECRET_PASSWORD not in text
    kept = json.loads(text)
    assert (kept["unit"], kept["symptom"], kept["policy"]) == (
        "killed.service",
        "it stopped",
        "runbook",
    )
    assert [c["tool"] for c in kept["calls"]] == [name for name, _ in host.calls]
    journal = next(c for c in kept["calls"] if c["tool"] == "tail_journal")
    messages = [line["message"] for line in journal["output"]["lines"]]
    assert "licence [REDACTED] accepted" in messages
    assert any("password=[REDACTED]" in m for m in messages)
    assert kept["verdict"]["kind"] == "plan"
    assert kept["replies"][0]["reply"]["verdict"] == "ACCEPT"


def test_a_store_past_its_size_loses_its_oldest_first(tmp_path: Path) -> None:
    """Records that do not compress, 1 MiB allowed: once past it the oldest go, the store
    stays within its bound, and the newest are all still there."""
    store = RecordStore(tmp_path / "records", RecordSettings(max_mib=1))
    written = []
    for n in range(24):
        run_id = _run_id(NOW - timedelta(minutes=24 - n), n)
        noise = base64.b64encode(os.urandom(60_000)).decode()
        store.write(_document(run_id, padding=noise), now=NOW)
        written.append(run_id)

    left = store.names()
    on_disk = sum(p.stat().st_size for p in store.directory.glob(f"*{SUFFIX}"))
    assert on_disk <= 1024 * 1024
    assert 0 < len(left) < len(written)
    assert left == written[-len(left) :]


def test_records_past_their_age_go(tmp_path: Path) -> None:
    """max_days = 35: at the next write, the records started more than 35 days ago go;
    one of 34 days stays."""
    store = RecordStore(tmp_path / "records", RecordSettings(max_days=35))
    ages = (40, 36, 34, 1)
    for n, days in enumerate(ages):
        store.write(
            _document(_run_id(NOW - timedelta(days=days), n)), now=NOW - timedelta(days=days)
        )
    newest = _run_id(NOW, 9)
    store.write(_document(newest), now=NOW)

    assert store.names() == [
        _run_id(NOW - timedelta(days=34), 2),
        _run_id(NOW - timedelta(days=1), 3),
        newest,
    ]


def _damage(store: RecordStore, good: bytes) -> dict[str, str]:
    """Records no replay may trust, each as the store holds it; their names and why each
    is skipped."""
    base = NOW - timedelta(hours=1)
    names = {
        kind: _run_id(base, n)
        for n, kind in enumerate(("uid", "cut", "json", "version", "id", "link", "deep"))
    }
    paths = {kind: store.directory / f"{name}{SUFFIX}" for kind, name in names.items()}

    paths["uid"].write_bytes(gzip.compress(json.dumps(_document(names["uid"])).encode()))
    os.chown(paths["uid"], 4242, 4242)
    paths["cut"].write_bytes(gzip.compress(json.dumps(_document(names["cut"])).encode())[:-9])
    paths["json"].write_bytes(gzip.compress(b'{"version": 1, "run_id": '))
    old = {**_document(names["version"]), "version": VERSION + 1}
    paths["version"].write_bytes(gzip.compress(json.dumps(old).encode()))
    paths["id"].write_bytes(gzip.compress(json.dumps(_document(names["json"])).encode()))
    elsewhere = store.directory.parent / "planted.json.gz"
    elsewhere.write_bytes(good)
    paths["link"].symlink_to(elsewhere)
    # Nested deeper than a JSON reader recurses (written by a diagnose user gone bad).
    paths["deep"].write_bytes(gzip.compress(b"[" * 200_000 + b"]" * 200_000))
    return {
        f"{names['uid']}{SUFFIX}": "written by uid 4242",
        f"{names['cut']}{SUFFIX}": "damaged",
        f"{names['json']}{SUFFIX}": "damaged",
        f"{names['version']}{SUFFIX}": "not a record of this version",
        f"{names['id']}{SUFFIX}": "its run id is not its name",
        f"{names['link']}{SUFFIX}": "cannot open it",
        f"{names['deep']}{SUFFIX}": "damaged",
    }


def test_a_record_of_another_uid_or_damaged_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """Beside two good records: one owned by another uid, a gzip cut short, JSON cut short,
    another version, one whose run id is not its name, a symlink and JSON nested past any
    reader's depth. Each is skipped,
    said why, and warned about; the good ones still load."""
    store = RecordStore(tmp_path / "records")
    first, last = _run_id(NOW - timedelta(hours=2), 0), _run_id(NOW, 1)
    store.write(_document(first))
    store.write(_document(last))
    good = (store.directory / f"{first}{SUFFIX}").read_bytes()
    damaged = _damage(store, good)

    with structlog.testing.capture_logs() as logs:
        loaded = list(store.load())

    assert [d["run_id"] for d in loaded if isinstance(d, dict)] == [first, last]
    skipped = {s.name: s.why for s in loaded if isinstance(s, Skipped)}
    assert sorted(skipped) == sorted(damaged)
    for name, why in damaged.items():
        assert why in skipped[name], (name, skipped[name])
    warned = {e["record"] for e in logs if e["event"] == "record.skipped"}
    assert warned == set(damaged)
    assert all(e["log_level"] == "warning" for e in logs if e["event"] == "record.skipped")


def test_a_record_that_cannot_be_written_costs_no_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """opsbot-diagnose's state directory holds a file where the records' directory should
    be: the diagnosis still returns its verdict (the plan), and the record's loss is a
    warning naming the run."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "records").write_text("not a directory\n")
    monkeypatch.setenv("STATE_DIRECTORY", str(state))
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    monkeypatch.setattr(daemon, "READ_TOOLS", host.tools())
    monkeypatch.setattr(daemon, "ExecutorClient", lambda path: FakeSubmitter([accept()]))

    with structlog.testing.capture_logs() as logs:
        verdict = daemon.diagnose_once(
            "killed.service", "", DiagnoseSettings(), tmp_path / "executor.sock"
        )

    assert verdict.kind == "plan"
    [lost] = [e for e in logs if e["event"] == "record.not_kept"]
    assert lost["log_level"] == "warning"
    assert lost["run_id"] == verdict.run_id
    assert str(state / "records") in lost["error"]


def test_threads_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    """Eight threads of a busy daemon keep forty diagnoses each through the process's one
    store, 1 MiB allowed: every write succeeds, the store is full to its bound and no
    further, and what it holds is exactly the newest records, none missing among them."""
    store = RecordStore(tmp_path / "records", RecordSettings(max_mib=1))
    start = threading.Barrier(8)
    numbers = itertools.count()
    written: list[str] = []
    failures: list[BaseException] = []

    def keep() -> None:
        start.wait()
        for _ in range(40):
            n = next(numbers)
            run_id = _run_id(NOW - timedelta(hours=1) + timedelta(seconds=n), n)
            noise = base64.b64encode(os.urandom(6_000)).decode()
            try:
                store.write(_document(run_id, padding=noise), now=NOW)
            except BaseException as exc:  # kept for the assertion below
                failures.append(exc)
            written.append(run_id)

    threads = [threading.Thread(target=keep) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not failures, failures
    left = store.names()
    sizes = [p.stat().st_size for p in store.directory.glob(f"*{SUFFIX}")]
    assert sum(sizes) <= 1024 * 1024 < sum(sizes) + max(sizes)
    assert left == sorted(written)[-len(left) :]
    assert all(isinstance(d, dict) for d in store.load())
