"""``opsbot replay``: the operator asks what today's opsbot would have said of the
diagnoses already recorded. The console runs the real engine (``python -I -m
diagnose_svc.replay``) over a real record store written by a real diagnosis of a
recorded host (the runbook on the KILLED unit: a plan to start it), and renders its
report: agree (0), DIFFERS (4) when a setting keeps the runbook from its plan, the
report whole with ``--json``, a damaged record as a warning, and a store the user may
not read as one line naming who may.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.record import Recording, RecordStore
from diagnose_svc.runtime import run_diagnosis
from opsbot_cli.main import main
from opsbot_cli.say import unfold
from shared_schema import Accept, DiagnoseSettings, Plan
from tests.unit.console.test_console_every_verb import NOBODY, run_in_child
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import RecordedHost

UNIT = "killed.service"


class Executor:
    """The executor's answer to a submit, as the real one gives it: accepted, by the
    plan's own fingerprint."""

    def submit(self, plan: Plan, run_id: str, symptom: str, evidence: object = ()) -> Accept:
        return Accept(plan_id=run_id, sha256=plan.fingerprint())


def record_killed_diagnosis(store: RecordStore) -> str:
    """The runbook diagnoses the KILLED host (a plan: start it); its record kept."""
    settings = DiagnoseSettings()
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    recording = Recording(unit=UNIT, symptom="")
    verdict = run_diagnosis(
        UNIT,
        "",
        RunbookPolicy(settings),
        host.tools(),
        Executor(),
        settings,
        recording=recording,
    )
    assert verdict.kind == "plan"
    store.write(recording.document(verdict))
    return verdict.run_id


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """One recorded diagnosis in a store (0700, as the service keeps it) the console is
    pointed at, beside a config anyone may read; the default settings."""
    base = Path(tempfile.mkdtemp(prefix="opsbot-replay-"))
    base.chmod(0o711)  # another user reaches the config, not the records
    where = base / "records"
    record_killed_diagnosis(RecordStore(where))
    config = base / "opsbot.toml"
    config.write_text("")
    config.chmod(0o644)
    monkeypatch.setenv("OPSBOT_DIAGNOSE_RECORDS", str(where))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    try:
        yield where
    finally:
        shutil.rmtree(base)


def test_the_same_opsbot_agrees_with_what_it_said(
    records: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Replayed through the same settings, the diagnosis agrees: exit 0, then and now."""
    assert main(["replay", "--since", "1h"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[0].startswith("20") and lines[0].endswith("  agree")
    assert f"  {UNIT}  " in lines[0]
    assert lines[1] == f"  then: plan: start_unit {UNIT}"
    assert lines[2] == f"  now:  plan: start_unit {UNIT}"
    assert "1 agree, 0 differ" in lines[3]
    assert all(len(line) <= 100 for line in lines)


def test_a_setting_that_stops_the_runbook_short_differs_and_says_why(
    records: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``[diagnose] max_steps = 2``: now a note where a plan was; exit 4, the summary
    names it and the command that shows it whole."""
    config = records.parent / "fewer-steps.toml"
    config.write_text("[diagnose]\nmax_steps = 2\n")
    assert main(["replay", "--config", str(config)]) == 4
    printed = capfd.readouterr().out
    lines = printed.splitlines()
    assert lines[0].endswith("  DIFFERS")
    assert lines[1] == f"  then: plan: start_unit {UNIT}"
    assert lines[2].startswith("  now:  note: ")
    assert "0 agree, 1 differ" in printed
    assert "     1  now a note where a plan was" in lines
    assert lines[-1].startswith("one of them whole: opsbot replay 20")


def test_json_is_the_engine_s_report(records: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``--json``: the engine's document, for a script (the fleet playbook reads it)."""
    assert main(["replay", "--json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["summary"]["agree"] == 1
    [replayed] = report["replays"]
    assert replayed["then"] == replayed["now"]
    assert replayed["unit"] == UNIT


def test_nothing_recorded_since_when_is_said_and_is_not_a_difference(
    records: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A window with no diagnosis in it: one line saying so, exit 0."""
    assert main(["replay", "--since", "2099-01-01 UTC"]) == 0
    assert capfd.readouterr().out.startswith("no recorded diagnosis since 2099-01-01")


def test_a_damaged_record_is_a_warning_and_the_others_are_replayed(
    records: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A record cut short is named on stderr, why, and the good one is still replayed."""
    damaged = records / "20261206-000000-0badc0de.json.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00not gzip at all")
    assert main(["replay", "--since", "3650d"]) == 0
    said = capfd.readouterr()
    assert said.err.startswith(f"opsbot: warning: record {damaged.name} skipped: damaged")
    assert "1 agree, 0 differ" in said.out
    assert "     1  records skipped (warnings above)" in said.out


def test_more_than_fifty_records_show_their_progress_on_stderr(
    records: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """60 records: the engine says how far it is on stderr as it goes (the console lets
    its stderr through), the report on stdout is whole."""
    [one] = list(records.glob("*.json.gz"))
    document = json.loads(gzip.decompress(one.read_bytes()))
    store = RecordStore(records)
    for n in range(59):
        store.write(document | {"run_id": f"{one.name[:15]}-{n:08x}"})
    assert main(["replay", "--json"]) == 0
    said = capfd.readouterr()
    assert json.loads(said.out)["summary"]["agree"] == 60
    assert "replay: 6 of 60 records" in said.err.splitlines()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_a_user_who_may_not_read_the_records_is_told_who_may(records: Path) -> None:
    """Records are the diagnose user's (0700): anyone else gets one line naming the
    directory and who may read it, exit 1, no traceback."""
    scratch = records.parent / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)
    ran = run_in_child(["replay"], scratch, NOBODY, [])
    assert ran.status == 1, ran.err
    assert "Traceback" not in ran.err
    assert unfold(ran.err)[0] == (
        f"opsbot: error: permission denied reading {records}: run as root or opsbot-diagnose"
    )
