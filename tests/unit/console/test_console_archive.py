"""``sudo opsbot archive-approvals`` (opsbot-archive.service, waited for in the apply unit's
stop) on approvals of both kinds: an ``--now`` approval stays while its plan's steps run
and goes once its plan ended or it expired, its grant swept at once; a plain one goes once
used, with no sweep (it has no grant); and the run after every apply builds no model when
no approval may be an ``--now`` one."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from opsbot_cli.main import main
from plans import (
    PlanRecord,
    PlanStore,
    approval_path,
    transition,
    used_dir,
    utcnow,
    write_approval as approve,
)
from shared_schema import PlanState
from testbed.container import REPO_ROOT
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import plan_of, step, submitted


class Started:
    ok = True


SWEEP = ["systemctl", "start", "--no-block", "opsbot-polkit-rule.service"]


@pytest.fixture
def sweeps(
    store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> list[list[str]]:
    """What the archive asked systemctl (the grants' sweep), not of this machine's."""
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    asked: list[list[str]] = []

    def run(argv: list[str], timeout: float) -> Started:
        asked.append(argv)
        return Started()

    monkeypatch.setattr("opsbot_cli.archive.run_program", run)
    return asked


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


def moved_to_used(approvals_dir: Path) -> list[str]:
    used = used_dir(approvals_dir)
    return sorted(p.name.split(".")[0] for p in used.iterdir()) if used.exists() else []


def in_state(store: PlanStore, record: PlanRecord, *states: PlanState) -> None:
    status = store.status(record.plan_id, record)
    for state in states:
        status = transition(status, state, by="opsbot-executor", at=utcnow())
    store.save_status(status)


def test_a_now_approval_stays_while_its_steps_run_and_goes_when_its_plan_ended_or_expired(
    sweeps: list[list[str]],
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three used approvals: a plain one (moved), an ``--now`` one whose plan is APPLYING
    (it stays, its grant with it, until the plan is APPLIED), and an ``--now`` one that
    expired on a plan the apply marked EXPIRED (moved, said as expired). Each run that
    moved an --now approval starts the grants' sweep."""
    plain, running, dead = (
        submitted(store, plan_of(step("restart_unit", unit)))
        for unit in ("nginx.service", "app.service", "worker@1.service")
    )
    now = utcnow()
    approve(approvals_dir, plain, "root", now, 600)
    approve(approvals_dir, running, "root", now, 600, override_window=True)
    approve(approvals_dir, dead, "root", now - timedelta(hours=2), 600, override_window=True)
    for record in (plain, running):
        assert store.consume(record.plan_id, "0" * 64, "opsbot-executor", now)
    in_state(store, running, PlanState.APPROVED, PlanState.APPLYING)
    in_state(store, dead, PlanState.APPROVED, PlanState.EXPIRED)
    assert main(["archive-approvals"]) == 0
    assert moved_to_used(approvals_dir) == sorted([plain.plan_id, dead.plan_id])
    assert approval_path(approvals_dir, running.plan_id).exists()
    out = capsys.readouterr().out
    assert f"{dead.plan_id}  approval expired (--now): moved to" in out
    assert f"{plain.plan_id}  approval used: moved to" in out
    assert sweeps == [SWEEP]
    in_state(store, running, PlanState.APPLIED)
    assert main(["archive-approvals", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["moved"] == [running.plan_id]
    assert not approval_path(approvals_dir, running.plan_id).exists()
    assert sweeps == [SWEEP, SWEEP]


def test_moving_plain_approvals_starts_no_sweep(
    sweeps: list[list[str]], store: PlanStore, approvals_dir: Path, journal: ScriptedJournal
) -> None:
    """Used approvals without --now have no grant: moving them starts no run of root's
    polkit-rule unit (a process that writes the whole rule again); nothing moved, none."""
    first, second = (
        submitted(store, plan_of(step("restart_unit", unit)))
        for unit in ("nginx.service", "app.service")
    )
    for record in (first, second):
        approve(approvals_dir, record, "root", utcnow(), 600)
    assert main(["archive-approvals"]) == 0
    assert moved_to_used(approvals_dir) == [] and sweeps == []
    for record in (first, second):
        assert store.consume(record.plan_id, "0" * 64, "opsbot-executor", utcnow())
    assert main(["archive-approvals"]) == 0
    assert moved_to_used(approvals_dir) == sorted([first.plan_id, second.plan_id])
    assert sweeps == []


RUN_THE_VERB = """
import json, sys
import opsbot_cli.archive
from opsbot_cli.main import main

class Started:
    ok = True

opsbot_cli.archive.run_program = lambda argv, timeout: Started()
status = main(["archive-approvals", "--json"])
print(json.dumps({"status": status, "pydantic": "pydantic" in sys.modules}))
"""


def test_archiving_a_used_plain_approval_builds_no_model(
    store: PlanStore, approvals_dir: Path
) -> None:
    """After an apply used a plain approval, the archive that runs in the apply unit's
    stop moves it without loading pydantic (no plan store, no approval model): its
    consumed marker and the file's own JSON say enough."""
    record = submitted(store, plan_of())
    approve(approvals_dir, record, "root", utcnow(), 600)
    assert store.consume(record.plan_id, "0" * 64, "opsbot-executor", utcnow())
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO_ROOT),
        "OPSBOT_STATE_DIR": str(store.root),
        "OPSBOT_APPROVALS_DIR": str(approvals_dir),
        "OPSBOT_NO_JOURNAL": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", RUN_THE_VERB], env=env, capture_output=True, text=True, timeout=60
    )
    said = json.loads(proc.stdout.splitlines()[-1])
    assert said == {"status": 0, "pydantic": False}, proc.stderr
    assert moved_to_used(approvals_dir) == [record.plan_id]
