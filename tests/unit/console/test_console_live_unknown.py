"""Where systemd cannot say a unit's state, every place that shows live state says "live
state unknown" and why, and goes on: the approve screen, the approval page's view of a
plan, and what `opsbot approve` says will apply the plan. A state that could not be read
is never shown as a state (the one reader, shared_io.unit_show, raises; it never answers
an empty state)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from approver_svc import view
from opsbot_cli import approve
from plans import PlanStore, review, start_apply
from shared_io.errors import UnitStateError
from shared_io.paths import Paths
from shared_io.run import RunResult
from shared_io.unit_show import UnitState, read_unit_state, show
from tests.unit.plans.helpers import NOW, POLICY, plan_of, step, submitted

WHY = "cannot read the state of app.service: Failed to connect to bus: No such file"


def unreadable(unit: str, timeout: float = 0) -> UnitState:
    raise UnitStateError(WHY)


def test_the_reader_raises_instead_of_answering_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """systemctl that exits non-zero, or prints one block for two units, is an error that
    names the units and what systemctl said; never an empty state."""
    said = RunResult((), 1, "", "Failed to connect to bus", 0.01)
    monkeypatch.setattr("shared_io.unit_show.run", lambda *a, **k: said)
    with pytest.raises(UnitStateError, match="app.service: Failed to connect to bus"):
        read_unit_state("app.service")
    one = RunResult((), 0, "ActiveState=active\n", "", 0.01)
    monkeypatch.setattr("shared_io.unit_show.run", lambda *a, **k: one)
    with pytest.raises(UnitStateError, match="1 blocks for 2 units"):
        show(["a.service", "b.service"], ["ActiveState"])


def test_the_approve_screen_says_live_state_unknown_and_asks(
    store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, `opsbot approve` shows each step's precondition; where the unit's
    state cannot be read (the console's one reader, opsbot_cli.live, as `opsbot show`
    reads it), the precondition says unknown, a line "live state unknown: WHY" follows
    it, nothing is said to be as expected or not, and it still asks."""
    plan = plan_of(step("restart_unit", "app.service", expect={"active_state": ["failed"]}))
    record = submitted(store, plan)
    monkeypatch.setattr("opsbot_cli.live.read_unit_state", unreadable)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    monkeypatch.setenv("COLUMNS", "100")
    screen = io.StringIO()
    reviewed = review(store, approvals_dir, record.plan_id, _witnessed(record.sha256))
    assert approve.confirmed(reviewed, 600, screen) is False
    lines = screen.getvalue().splitlines()
    assert "     precondition: app.service is failed: unknown" in lines
    assert f"live state unknown: {WHY}" in " ".join(line.strip() for line in lines)
    assert max(len(line) for line in lines) <= 100
    assert not any("as expected" in line for line in lines)
    assert lines[-1] == "Approve? [y/N] "


def test_the_page_says_live_state_unknown(
    store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval page's view of a plan says the unit's live state is unknown, and why,
    where a state would be."""
    monkeypatch.setattr(view, "read_unit_state", unreadable)
    plan = plan_of(step("restart_unit", "app.service"))
    record = submitted(store, plan)
    status = store.status(record.plan_id, record)
    shown = view.plan_view(record, status, plan, policy=POLICY, now=NOW, host="web1")
    assert shown.steps[0].live == f"live state unknown: {WHY}"


def test_what_applies_the_plan_is_unknown_where_the_timer_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After an approval, where opsbot-apply.path is not active and the timer's state
    cannot be read, approve says nothing is known to apply the plan, and why, and
    promises nothing."""

    def no_show(units: list[str], properties: list[str], **kw: object) -> list[object]:
        raise UnitStateError(WHY)

    monkeypatch.setattr("plans.apply_unit.show", no_show)
    inactive = RunResult((), 3, "", "", 0.01)
    monkeypatch.setattr("plans.apply_unit.run", lambda *a, **k: inactive)
    said, applies = start_apply(Paths.from_env({}))
    assert not applies
    assert said.startswith("nothing is known to apply it")
    assert f"live state of opsbot-apply.timer is unknown: {WHY}" in said


def _witnessed(sha256: str) -> object:
    from plans import Accepted

    return Accepted(frozenset({sha256}), NOW)
