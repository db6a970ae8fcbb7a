"""opsbot-diagnose's command line: one line and an exit status for each error class."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from diagnose_svc.daemon import main, render, unit_arg
from diagnose_svc.policies import RunbookPolicy, make_policy
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_io.config import HINT
from shared_schema import DiagnoseSettings, Plan


@pytest.fixture(autouse=True)
def _structlog_defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() configures structlog for the process; undo that after each test."""
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    yield
    structlog.reset_defaults()


def test_bad_config_is_one_line_and_ex_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A configuration error prints its line and key path and exits 78 (Restart= does not
    loop)."""
    config = tmp_path / "opsbot.toml"
    config.write_text("[diagnose]\nmax_steps = 0\n")
    status = main(["run", "--config", str(config), "nginx.service"])
    assert status == 78
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"opsbot-diagnose: {config}:2: diagnose.max_steps: Input should be greater than or "
        "equal to 1"
    )
    assert err[1] == f"opsbot-diagnose: hint: {HINT}"


def test_bad_unit_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Something that is not a unit name exits 64 with the reason."""
    status = main(["run", "--config", str(tmp_path / "none.toml"), "not a unit"])
    assert status == 64
    assert "is not a valid unit name" in capsys.readouterr().err


def test_embedded_policy_is_the_default() -> None:
    """[diagnose.model] kind = embedded (the default) gives the runbook."""
    assert isinstance(make_policy(DiagnoseSettings()), RunbookPolicy)


def test_render() -> None:
    """A plan verdict shows id, fingerprint, steps and how to approve; a note its text."""
    plan = Plan.model_validate(
        {
            "goal": "Restart failed a.service",
            "steps": [{"tool": "restart_unit", "args": {"unit": "a.service"}, "reason": "why"}],
        }
    )
    common = {"run_id": "r1", "unit": "a.service", "steps_used": 3, "tokens": 0, "evidence": []}
    text = render(
        PlanVerdict(plan_id="20261129-214500-0a1b2c3d", sha256="0" * 64, plan=plan, **common)
    )
    assert text.splitlines() == [
        "diagnosis r1 of a.service: 3 steps",
        f"plan 20261129-214500-0a1b2c3d proposed (sha256 {'0' * 64}): Restart failed a.service",
        "  1. restart_unit a.service: why",
        "review and approve it with: sudo opsbot approve 20261129-214500-0a1b2c3d",
    ]
    note = render(NoteVerdict(ended_by="final_note", text="all fine", **common))
    assert note.splitlines()[1] == "all fine"


def test_a_unit_without_a_type_is_a_service() -> None:
    """`opsbot-diagnose run app` diagnoses app.service, as systemctl reads `app` (what
    opsbot-onfailure@app.service passes as %i when the watch drop-in names it with %N);
    a name that ends in a unit type keeps it, and an instance with dots gets the suffix."""
    assert unit_arg("app") == "app.service"
    assert unit_arg("app.service") == "app.service"
    assert unit_arg("app.socket") == "app.socket"
    assert unit_arg("getty@tty1") == "getty@tty1.service"
    assert unit_arg("backup@2.5") == "backup@2.5.service"
