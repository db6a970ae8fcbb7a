"""opsbot-rules.service starts only where root's opsbot.toml holds a standing rule: its
``ExecCondition=`` says no for a host without one (systemd skips the unit, no failure),
and yes for one it cannot read, so that the approver says what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from approver_svc.has_rules import has_rules

RULE = """
[[approve.rule]]
name = "night-restarts"
tools = ["restart_unit"]
units = ["app.service"]
"""


@pytest.mark.parametrize(
    ("text", "runs"),
    [
        ("[executor]\nplan_ttl_seconds = 3600\n", False),
        ("[approve]\n", False),
        (RULE, True),
        ("[approve]\nrule = [{name = 'a', tools = ['start_unit'], units = ['x.service']}]\n", True),
        ("[approve\nrule = ", True),  # not TOML: the approver will say why
        ("approve = 3\n", True),  # not a table: the same
    ],
)
def test_the_trigger_runs_only_where_a_rule_is_written(
    tmp_path: Path, text: str, runs: bool
) -> None:
    """Each config as root wrote it, and whether the trigger runs."""
    config = tmp_path / "opsbot.toml"
    config.write_text(text)
    assert has_rules(config) is runs


def test_without_a_config_nothing_runs(tmp_path: Path) -> None:
    """No opsbot.toml at all (a host being set up): no rule, the unit is skipped."""
    assert has_rules(tmp_path / "missing.toml") is False


def test_the_condition_exits_0_or_1_for_the_config_opsbot_config_names(tmp_path: Path) -> None:
    """As systemd runs it: exit 0 (run) with a rule, 1 (skip) without, for the file
    OPSBOT_CONFIG names."""
    config = tmp_path / "opsbot.toml"
    statuses = []
    for text in (RULE, "[approve]\n"):
        config.write_text(text)
        done = subprocess.run(
            [sys.executable, "-m", "approver_svc.has_rules"],
            env={"OPSBOT_CONFIG": str(config), "PATH": "/usr/bin:/bin"},
            cwd=Path(__file__).resolve().parents[3],
            check=False,
        )
        statuses.append(done.returncode)
    assert statuses == [0, 1]


def test_the_unit_checks_the_condition_before_it_starts() -> None:
    """units/opsbot-rules.service runs the condition before the trigger."""
    unit = (Path(__file__).resolve().parents[3] / "units/opsbot-rules.service").read_text()
    lines = [line for line in unit.splitlines() if line.startswith("Exec")]
    assert lines == [
        "ExecCondition=/opt/opsbot/venv/bin/python -m approver_svc.has_rules",
        "ExecStart=/opt/opsbot/venv/bin/python -m approver_svc.trigger",
    ]
