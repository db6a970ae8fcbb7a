"""``opsbot policy check`` and ``opsbot policy test ID``: the operator writes a standing
approval rule and sees what it reaches, and which plan it would approve and why not."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import PlanStore, utcnow
from plans.records import StatusRecord, Transition
from shared_schema import PlanState
from tests.unit.plans.helpers import plan_of, step, submitted, systemd_says_failed

CONFIG = """\
[executor.allow]
restart_unit = ["app.service", "worker@1.service"]

[[approve.rule]]
name = "workers"
tools = ["restart_unit"]
units = ["worker@*.service"]

[[approve.rule]]
name = "db"
tools = ["restart_unit", "start_unit"]
units = ["db.service"]
"""

#: The precondition diagnosis writes for a unit it found failed (a rule needs one).
DOWN = {"active_state": ["failed"]}


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    config = tmp_path / "opsbot.toml"
    config.write_text(CONFIG)
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    # Root's reading of the plan's units (plans.readings): each failed.
    monkeypatch.setattr("plans.readings._show", systemd_says_failed)
    return config


def test_check_says_what_each_rule_reaches_and_warns_of_one_that_reaches_nothing(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """workers reaches worker@1 through its glob; db names a unit the allowlist lacks, so
    it reaches nothing: a warning naming the rule and the tool, exit 1."""
    assert main(["policy", "check"]) == 1
    out = capsys.readouterr().out
    assert "    restart_unit reaches now: worker@1.service\n" in out
    assert "warning: rule db: restart_unit of db.service reaches no unit" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert main(["policy", "check", "--json"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["rules"][0]["reaches"] == {"restart_unit": ["worker@1.service"]}
    assert [rule["mode"] for rule in said["rules"]] == ["shadow", "shadow"]


def test_check_without_rules_says_every_plan_waits_for_a_human(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No [[approve.rule]]: nothing to check, exit 0."""
    env.write_text('[executor.allow]\nrestart_unit = ["app.service"]\n')
    assert main(["policy", "check"]) == 0
    assert "no [[approve.rule]]: every plan waits for a human" in capsys.readouterr().out


def test_test_names_the_rule_that_would_approve_and_why_the_others_would_not(
    env: Path, store: PlanStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """A restart of worker@1 waits: the workers rule would approve it (exit 0); a
    restart of app.service is for a human (exit 3), with each rule's reason."""
    worker = submitted(
        store, plan_of(step("restart_unit", "worker@1.service", expect=DOWN)), utcnow()
    )
    assert main(["policy", "test", worker.plan_id]) == 0
    assert "rule workers (shadow) would approve it" in capsys.readouterr().out
    app = submitted(store, plan_of(step("restart_unit", "app.service", expect=DOWN)), utcnow())
    assert main(["policy", "test", app.plan_id, "--json"]) == 3
    said = json.loads(capsys.readouterr().out)
    assert said["rule"] is None
    assert said["refused"] == [
        {"rule": "workers", "reason": "app.service is not one of its units (worker@*.service)"},
        {"rule": "db", "reason": "app.service is not one of its units (db.service)"},
    ]


def test_test_explains_a_suspension_in_100_columns(
    env: Path, store: PlanStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """worker@1's last fix ended UNRESOLVED: the rule is suspended for it, and the reason
    is folded to fit."""
    now = utcnow()
    last = submitted(
        store,
        plan_of(step("restart_unit", "worker@1.service", expect=DOWN), goal="before"),
        now - timedelta(hours=1),
    )
    ended = [Transition(state=PlanState.UNRESOLVED, at=now - timedelta(minutes=50), by="t")]
    store.save_status(StatusRecord(plan_id=last.plan_id, state=PlanState.UNRESOLVED, history=ended))
    plan = submitted(store, plan_of(step("restart_unit", "worker@1.service", expect=DOWN)), now)
    assert main(["policy", "test", plan.plan_id]) == 3
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert f"{last.plan_id}, ended UNRESOLVED: rules are suspended" in " ".join(out.split())


def test_test_needs_an_id_and_root(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an ID, a usage error saying where ids come from; as another user, the
    hint repeats the command with sudo."""
    assert main(["policy", "test"]) == 2
    assert "needs the plan's ID" in capsys.readouterr().err
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert main(["policy", "test", "20261129-213500-1a2b3c4d"]) == 2
    err = unfold(capsys.readouterr().err)
    assert "opsbot: hint: run it as root: sudo opsbot policy test 20261129-213500-1a2b3c4d" in err


def test_check_warns_of_a_glob_that_reaches_the_whole_allowlist(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """units = ["*.service"] reaches every unit the allowlist holds for the tool, and
    every unit allowed later: check says so, so that it is meant."""
    env.write_text(
        '[executor.allow]\nrestart_unit = ["app.service", "worker@1.service"]\n'
        '[[approve.rule]]\nname = "all"\ntools = ["restart_unit"]\nunits = ["*.service"]\n'
    )
    assert main(["policy", "check"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "rule all: restart_unit of *.service reaches every unit [executor.allow]" in out
