"""When ``sudo opsbot approve`` refuses, it says why in the operator's terms, in lines of at
most 100 columns, and writes nothing:

- a ``--sha256`` that matches neither the plan nor anything the executor logged for it
  was mistyped (or copied from another plan): it does not match what you reviewed; the
  plan did not change, so the error does not say it did;
- a plan whose steps ran was approved and applied once: the error says when, and points
  to ``opsbot audit ID``, not to a new diagnosis.

The journal is scripted at its one door (plans.witness), the rest runs for real."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.screen import when
from plans import PlanRecord, PlanStore, StatusRecord, approval_path, transition
from shared_schema import PlanState
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import NOW, plan_of, submitted

#: When the apply that ran the plan ended.
APPLIED_AT = NOW + timedelta(minutes=3)


class Terminal(io.StringIO):
    """stdin on a terminal, where the operator would type "y"."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    config = tmp_path / "opsbot.toml"
    config.write_text('[executor.allow]\nrestart_unit = ["nginx.service"]\n')
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return config


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


def refused(err: str) -> list[str]:
    """stderr of a refusal: one error line, a hint folded under it; none over 100
    columns."""
    lines = err.splitlines()
    assert lines[0].startswith("opsbot: error: ") and lines[1].startswith("opsbot: hint: ")
    assert all(line.startswith(" " * 8) for line in lines[2:])
    assert max(len(line) for line in lines) <= 100, lines
    return lines


def ran(store: PlanStore, record: PlanRecord, end: PlanState) -> None:
    """The plan's life up to ``end``: approved, applied by opsbot-apply (its steps ended
    at APPLIED_AT), then verified if ``end`` says so."""
    status = store.status(record.plan_id, record)
    moves = [(PlanState.APPROVED, NOW), (PlanState.APPLYING, NOW + timedelta(minutes=2))]
    if end is not PlanState.APPLYING:
        ended = PlanState.FAILED if end is PlanState.FAILED else PlanState.APPLIED
        moves.append((ended, APPLIED_AT))
    if end in (PlanState.VERIFIED, PlanState.UNRESOLVED):
        moves.append((end, APPLIED_AT + timedelta(seconds=30)))
    for state, at in moves:
        status = transition(status, state, by="opsbot-apply", at=at)
    store.save_status(status)


def test_a_mistyped_sha256_does_not_match_what_you_reviewed(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bob reviewed the plan and typed its sha256 with two digits swapped: exit 5, the
    plan does not match what he reviewed and nothing was approved; the hint gives the
    plan's first 16 digits beside his and where to compare them. The plan did not change,
    and the error does not say it did."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    typed = record.sha256[1] + record.sha256[0] + record.sha256[2:12]
    assert typed != record.sha256[:12]
    assert main(["approve", record.plan_id, "--sha256", typed]) == 5
    err = capsys.readouterr().err
    lines = refused(err)
    assert lines[0] == (
        f"opsbot: error: plan {record.plan_id} does not match what you reviewed: "
        "nothing was approved"
    )
    hint = " ".join(line.strip() for line in lines[1:])
    assert f"`opsbot show {record.plan_id}` prints its sha256" in hint
    assert f"which starts {record.sha256[:16]}, not {typed}" in hint
    assert "changed since" not in err
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_a_plan_that_cannot_be_approved_is_refused_for_its_state_first(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A STALE plan and a --sha256 that is not its own (a script's placeholder): the plan
    is refused for its state, as before, with the hint to diagnose again; the digits are
    beside the point."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    store.save_status(StatusRecord(plan_id=record.plan_id, state=PlanState.STALE))
    assert main(["approve", record.plan_id, "--sha256", "0" * 16]) == 5
    err = capsys.readouterr().err
    assert refused(err)[0] == (
        f"opsbot: error: plan {record.plan_id} is STALE; only PROPOSED plans can be approved"
    )
    assert "diagnose again" in err and "does not match" not in err


@pytest.mark.parametrize(
    "end", [PlanState.APPLIED, PlanState.VERIFIED, PlanState.UNRESOLVED, PlanState.FAILED]
)
def test_a_plan_that_ran_was_applied_and_its_story_is_in_the_audit(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
    end: PlanState,
) -> None:
    """alice approves a plan from yesterday's notification that opsbot-apply already ran:
    exit 5 (refused, as before), saying it was applied and when, in the state it ended
    in; the hint points to `opsbot audit ID`, and nobody is told to diagnose again."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    ran(store, record, end)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    err = capsys.readouterr().err
    lines = refused(err)
    assert lines[0] == (
        f"opsbot: error: plan {record.plan_id} was applied at {when(APPLIED_AT)} ({end})"
    )
    assert f"`opsbot audit {record.plan_id}`" in " ".join(line.strip() for line in lines[1:])
    assert "diagnose again" not in err
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_on_a_terminal_a_plan_that_ran_is_refused_before_anything_is_asked(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --sha256, on a terminal: the same refusal, and no review to say "y" to."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    ran(store, record, PlanState.VERIFIED)
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["approve", record.plan_id]) == 5
    out, err = capsys.readouterr()
    assert "Approve?" not in out
    assert refused(err)[0].endswith(f"was applied at {when(APPLIED_AT)} (VERIFIED)")
    assert "diagnose again" not in err


def test_a_plan_being_applied_now_says_since_when(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The apply is running the plan's steps right now: it is being applied, since the
    apply took it; the audit tells the rest."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    ran(store, record, PlanState.APPLYING)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    err = capsys.readouterr().err
    began = when(NOW + timedelta(minutes=2))
    assert refused(err)[0] == (
        f"opsbot: error: plan {record.plan_id} is being applied now since {began}"
    )
    assert "diagnose again" not in err


def test_a_status_without_history_still_says_applied(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A status record that kept no history (written by hand, or by an older opsbot): it
    was applied, when is not known, and the audit has the story."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    store.save_status(StatusRecord(plan_id=record.plan_id, state=PlanState.APPLIED))
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    lines = refused(capsys.readouterr().err)
    assert lines[0] == f"opsbot: error: plan {record.plan_id} was applied (APPLIED)"
    assert f"`opsbot audit {record.plan_id}`" in " ".join(line.strip() for line in lines[1:])
