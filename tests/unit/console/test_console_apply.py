"""``sudo opsbot apply`` starts opsbot-apply.service and reports what that run did, from
the unit's journal: only entries journald attributes to that unit, from the executor's
user or root, count; the first ``apply.outcomes`` ends the report; a failed run's own
line and exit status reach the operator. With nothing approved it says so and starts
nothing; while the unit runs, its follower wakes the moment the start returns. (Starting
the unit for real and the steps running as the executor's user:
tests/attacks/test_attack_polkit.py.)"""

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import opsbot_cli.apply
from opsbot_cli.apply import ApplyReport, _plan_status, _summary, follow_apply_unit
from opsbot_cli.errors import ConsoleError
from opsbot_cli.main import main
from plans import APPLY_UNIT, PlanStore
from shared_io.run import RunResult
from tests.unit.plans.helpers import approved, plan_of, submitted

EXECUTOR_UID = 998
TRUSTED = frozenset({0, EXECUTOR_UID})
PLAN = "20261129-213500-1a2b3c4d"


def outcome(state: str = "APPLIED", ran: bool = True, message: str = "1 step(s) ran") -> Any:
    return {"plan_id": PLAN, "state": state, "message": message, "argv": [], "ran": ran}


def entry(event: str, unit: str = APPLY_UNIT, uid: int = EXECUTOR_UID, **fields: Any) -> Any:
    return {"_SYSTEMD_UNIT": unit, "_UID": uid, "EVENT": event, **fields}


def outcomes_entry(*outcomes: Any, **kw: Any) -> Any:
    return entry("apply.outcomes", OUTCOMES=json.dumps(list(outcomes)), **kw)


def started(status: int) -> RunResult:
    stderr = "" if status == 0 else "Job for opsbot-apply.service failed.\n"
    return RunResult(("systemctl", "start", APPLY_UNIT), status, "", stderr, 0.1)


def shown(report: ApplyReport) -> tuple[int, list[Any]]:
    """The exit status and the outcomes shown (verification already in their states)."""
    seen: list[Any] = []

    def show(outcomes: list[Any]) -> int:
        seen.extend(outcomes)
        return max((_plan_status(o) for o in outcomes), default=0)

    return report.exit_status(show), seen


def test_the_runs_outcomes_are_shown_and_a_failed_step_exits_6() -> None:
    """The run's apply.outcomes is what the operator sees; a plan whose step failed makes
    the exit status 6 (the unit itself exited 1 for it: not an error of the run); a
    verified plan beside one waiting for approval makes it 3."""
    report = ApplyReport(TRUSTED, started=started(1))
    report.take(outcomes_entry(outcome("FAILED")))
    assert shown(report) == (6, [outcome("FAILED")])

    ok = ApplyReport(TRUSTED, started=started(0))
    ok.take(outcomes_entry(outcome("VERIFIED"), outcome("PROPOSED", ran=False)))
    assert shown(ok) == (3, [outcome("VERIFIED"), outcome("PROPOSED", ran=False)])


@pytest.mark.parametrize(
    ("state", "ran", "status"),
    [
        ("VERIFIED", True, 0),
        ("UNRESOLVED", True, 6),
        ("APPLIED", True, 6),  # not verified when the wait ended: not known to be fixed
        ("FAILED", True, 6),
        ("STALE", False, 5),
        ("EXPIRED", False, 5),
        ("APPROVED", False, 5),  # its approval was refused
        ("PROPOSED", False, 3),
        ("INTERRUPTED", False, 6),
    ],
)
def test_each_end_of_a_plan_has_its_exit_status(state: str, ran: bool, status: int) -> None:
    """What a script reads off ``opsbot apply`` for each way a plan can end the run."""
    assert _plan_status(outcome(state, ran=ran)) == status


def test_the_summary_counts_plans_steps_and_failures() -> None:
    """One closing line like terraform's, counting what ran and how it ended."""
    two = {**outcome("VERIFIED"), "argv": [["systemctl", "restart", "a"], ["x"]]}
    failed = {**outcome("FAILED"), "argv": [["systemctl", "start", "b"]]}
    waiting = outcome("PROPOSED", ran=False)
    assert _summary([two, failed, waiting]) == (
        "Apply complete: 3 plans (1 FAILED, 1 PROPOSED, 1 VERIFIED), 2 ran 3 steps, 1 failed"
    )
    assert _summary([]) == "Apply complete: 0 plans (nothing to do), 0 ran 0 steps, 0 failed"


def test_entries_from_another_unit_or_user_are_not_believed() -> None:
    """Anyone can log EVENT=apply.outcomes; journald's _SYSTEMD_UNIT and the kernel's
    _UID cannot be forged: a forgery from the executor's daemon, a user's session, or
    another uid in a unit of that name is ignored."""
    report = ApplyReport(TRUSTED, started=started(0))
    report.take(outcomes_entry(outcome("APPLIED"), unit="opsbot-executor.service"))
    report.take(outcomes_entry(outcome("APPLIED"), unit="session-3.scope", uid=1000))
    report.take(outcomes_entry(outcome("APPLIED"), uid=1000))
    assert report.outcomes is None
    report.take(outcomes_entry(outcome("PROPOSED", ran=False), uid=0))
    assert shown(report) == (3, [outcome("PROPOSED", ran=False)])


def test_the_first_outcomes_end_the_report() -> None:
    """The run apply waited for ends with its apply.outcomes; what a later run (the timer,
    the path unit) logs after it is not part of this report."""
    steps: list[Any] = []
    report = ApplyReport(TRUSTED, on_step=steps.append, started=started(0))
    report.take(entry("step.finished", PLAN_ID=PLAN, STEP="1", OUTCOME="ok"))
    report.take(outcomes_entry(outcome("VERIFIED")))
    report.take(entry("step.finished", PLAN_ID=PLAN, STEP="1", OUTCOME="failed"))
    report.take(outcomes_entry(outcome("FAILED")))
    assert [s["OUTCOME"] for s in steps] == ["ok"]
    assert shown(report) == (0, [outcome("VERIFIED")])


def test_a_run_that_failed_says_why_with_its_own_exit_status() -> None:
    """A bad config stops the run before any plan: its apply.failed line is the error,
    with its hint, and the exit status is the run's (78, EX_CONFIG)."""
    report = ApplyReport(TRUSTED, started=started(1))
    report.take(
        entry(
            "apply.failed",
            ERROR="/etc/opsbot/opsbot.toml: executor.allow: bad",
            HINT="see README.md",
            EXIT_STATUS="78",
        )
    )
    with pytest.raises(ConsoleError) as caught:
        shown(report)
    assert caught.value.message == f"{APPLY_UNIT}: /etc/opsbot/opsbot.toml: executor.allow: bad"
    assert (caught.value.hint, caught.value.exit_status) == ("see README.md", 78)


def test_a_run_that_left_no_outcomes_is_an_error() -> None:
    """systemctl failed and the unit logged nothing of ours: systemctl's line, and where
    to look; a run that succeeded without outcomes is an error too, never a silent 0."""
    failed = ApplyReport(TRUSTED, started=started(1))
    with pytest.raises(ConsoleError) as caught:
        shown(failed)
    assert "Job for opsbot-apply.service failed." in caught.value.message
    assert caught.value.hint == f"journalctl -u {APPLY_UNIT} -n 30"
    with pytest.raises(ConsoleError, match="holds no outcomes"):
        shown(ApplyReport(TRUSTED, started=started(0)))


def test_unreadable_outcomes_are_an_error() -> None:
    """An apply.outcomes whose OUTCOMES is not a list of objects is refused, not shown."""
    report = ApplyReport(TRUSTED)
    with pytest.raises(ConsoleError, match="cannot be read"):
        report.take(entry("apply.outcomes", OUTCOMES="[1, 2"))


# -- what is started, and when the follower wakes ----------------------------------------

START = ["systemctl", "start", "--no-ask-password", APPLY_UNIT]


class Systemd:
    """What the console asks of systemd (opsbot_cli.apply's runner): each argv, in order;
    ``systemctl start`` takes ``start_seconds``, as a oneshot's run does."""

    def __init__(self, start_seconds: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.start_seconds = start_seconds

    def __call__(self, argv: Sequence[str], **_: object) -> RunResult:
        self.calls.append(list(argv))
        if list(argv) == START:
            time.sleep(self.start_seconds)
        return RunResult(tuple(argv), 0, "", "", 0.0)


@pytest.fixture
def as_root(store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Systemd:
    """Root's ``opsbot apply`` on the store and approvals of the test, its runner
    scripted (nothing reaches this machine's systemd)."""
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    systemd = Systemd()
    monkeypatch.setattr(opsbot_cli.apply, "run", systemd)
    return systemd


def test_nothing_approved_says_so_and_starts_no_unit(
    as_root: Systemd, store: PlanStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """No plan approved: ``nothing approved``, the plans that wait for approval as the
    apply would list them, and the status they make (3, or 0 with none); systemd is not
    asked for anything."""
    said = f"nothing approved: {APPLY_UNIT} not started (no plan in {store.root}"
    assert main(["apply"]) == 0
    out = capsys.readouterr().out
    # Folded to 100 columns, the end cut where the state directory's path is long.
    assert " ".join(out.split()).startswith(said)
    assert out.endswith(
        "\nno open plans\nApply complete: 0 plans (nothing to do), 0 ran 0 steps, 0 failed\n"
    )
    record = submitted(store, plan_of())
    assert main(["apply"]) == 3
    out = capsys.readouterr().out
    assert " ".join(out.split()).startswith(said)
    assert out.endswith(
        f"\n{record.plan_id}  PROPOSED    waiting for approval\n"
        "Apply complete: 1 plan (1 PROPOSED), 0 ran 0 steps, 0 failed\n"
    )
    assert main(["apply", "--json"]) == 3
    assert json.loads(capsys.readouterr().out) == [
        {
            "plan_id": record.plan_id,
            "state": "PROPOSED",
            "message": "waiting for approval",
            "argv": [],
            "ran": False,
        }
    ]
    assert as_root.calls == []


def test_an_approved_plan_starts_the_unit(
    as_root: Systemd,
    store: PlanStore,
    approvals_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An approved plan waits: ``opsbot apply`` starts opsbot-apply.service, whatever else
    waits for approval. (No unit runs here, so the journal holds no outcomes of the run:
    journald is asked to write out what it was sent, and the console says what is
    missing.)"""
    submitted(store, plan_of(goal="waits for approval"))
    approved(store, approvals_dir, submitted(store, plan_of(goal="approved")))
    assert main(["apply"]) == 1
    assert as_root.calls == [START, ["journalctl", "--sync"]]
    assert "its journal holds no outcomes of the run" in capsys.readouterr().err


@pytest.mark.serial
def test_the_follower_wakes_when_the_start_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run ends (``systemctl start`` returns) 0.1 s after it began: the console is
    back within a blink of it, not at its next look at the journal."""
    systemd = Systemd(start_seconds=0.1)
    monkeypatch.setattr(opsbot_cli.apply, "run", systemd)
    began = time.monotonic()
    report = follow_apply_unit()
    assert time.monotonic() - began < 0.4
    assert report.started is not None and report.started.ok


def test_nothing_approved_loads_no_model_and_no_structlog(store: PlanStore, tmp_path: Path) -> None:
    """Run as root's program with only a plan waiting for approval, ``opsbot apply`` reads
    the store's files and answers: no model is built, structlog and the journal's library
    are not loaded (what takes a started apply most of its start)."""
    submitted(store, plan_of())
    code = (
        "import json, os, sys\nos.geteuid = lambda: 0\nsys.argv = ['opsbot', 'apply']\n"
        "from opsbot_cli.main import main\nstatus = main()\n"
        "print(json.dumps([status, sorted(sys.modules)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
            "OPSBOT_STATE_DIR": str(store.root),
            "OPSBOT_APPROVALS_DIR": str(tmp_path / "approvals"),
        },
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    status, loaded = json.loads(done.stdout.splitlines()[-1])
    assert status == 3, done.stdout
    assert not {"pydantic", "structlog", "systemd"} & {m.split(".")[0] for m in loaded}
