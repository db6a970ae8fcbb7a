"""``sudo opsbot replay --rules FILE``: the operator writes a standing rule and asks what
it would have approved of last month's plans. The console reads the plans the recorded
diagnoses proposed (the real engine, ``python -I -m diagnose_svc.replay --plans``), root's
approver's records over its real socket, and the executor's store for how each plan
ended: the same rule in FILE approves what `opsbot policy report` says it would have
in shadow. Another user is told it is root's."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from diagnose_svc.record import Recording, RecordStore
from opsbot_cli.main import main
from shared_schema.approver_socket import PolicyReport, PolicyReported
from shared_schema.verdict import PlanVerdict
from tests.unit.approver.bench import Bench
from tests.unit.approver.test_rules_replay import (
    RESTARTS,
    asked,
    restart,
    shadowing as shadowing,  # noqa: F401
    verified,
)
from tests.unit.console.test_console_every_verb import NOBODY, run_in_child

pytestmark = pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="root's approver: the test must run as root"
)

CONFIG = """\
[executor.allow]
restart_unit = ["nginx.service", "app.service", "worker@1.service"]
"""
RULES = """\
[[approve.rule]]
name = "night-restarts"
tools = ["restart_unit"]
units = ["nginx.service", "worker@*.service"]
max_per_unit = 2
period = "24h"
"""


def keep_record(records: RecordStore, b: Bench, plan_id: str) -> None:
    """The diagnosis that proposed ``plan_id``, recorded as the daemon keeps it."""
    stored = b.store.load(plan_id)
    plan = b.store.verified_plan(stored)
    run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(4)
    verdict = PlanVerdict(
        run_id=run_id,
        unit=plan.units()[0],
        steps_used=1,
        tokens=0,
        evidence=[],
        plan_id=plan_id,
        sha256=stored.sha256,
        plan=plan,
    )
    records.write(Recording(unit=plan.units()[0], symptom="").document(verdict))


@pytest.fixture
def console(
    shadowing: Bench,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Bench, RecordStore, Path]]:
    """The approver's bench, a record store and a config the console is pointed at, and
    a rules file holding the approver's own rule."""
    config = tmp_path / "opsbot.toml"
    config.write_text(CONFIG)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    records = RecordStore(tmp_path / "records")
    assert shadowing.root_socket is not None
    monkeypatch.setenv("OPSBOT_APPROVER_SOCKET", str(shadowing.root_socket))
    monkeypatch.setenv("OPSBOT_DIAGNOSE_RECORDS", str(records.directory))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(shadowing.store.root))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    yield shadowing, records, rules


def test_the_rule_replayed_approves_what_the_policy_report_says(
    console: tuple[Bench, RecordStore, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    """Two diagnoses proposed restarts, nginx.service's (root read it failed; a human
    approved it and it held) and app.service's (not the rule's). `--rules` with the
    approver's own rule: the one plan the report says it would have approved, VERIFIED,
    and the other refused, in JSON and in words."""
    b, records, rules = console
    nginx = restart(b, "nginx.service")
    app = restart(b, "app.service")
    asked(b)
    verified(b, nginx)
    for plan_id in (nginx, app):
        keep_record(records, b, plan_id)
    report = b.as_root(PolicyReport())
    assert isinstance(report, PolicyReported)
    [summary] = report.rules

    assert main(["replay", "--rules", str(rules), "--json"]) == 0
    said = json.loads(capfd.readouterr().out)
    [rule] = said["rules"]
    assert rule["name"] == RESTARTS["name"] and said["plans"] == 2
    assert [a["plan_id"] for a in rule["approved"]] == [nginx]
    assert rule["would_approve"] == summary.would_approve == 1
    assert rule["ended"] == summary.ended == {"VERIFIED": 1}
    assert rule["refused"] == summary.refused
    assert rule["not_replayable"] == []

    assert main(["replay", "--rules", str(rules)]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[1] == "rule night-restarts (shadow): would have approved 1"
    assert lines[2] == f"  {nginx}  restart_unit nginx.service (ended VERIFIED)"
    assert all(len(line) <= 100 for line in lines)


def test_another_user_is_told_the_rules_past_is_roots(
    console: tuple[Bench, RecordStore, Path], tmp_path: Path
) -> None:
    """The approver's records and the plan store are root's: `opsbot replay --rules` as
    another user is a usage error (2) that says to run it as root, before anything is
    read."""
    _, _, rules = console
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)
    ran = run_in_child(["replay", "--rules", str(rules)], scratch, NOBODY, [NOBODY])
    assert ran.status == 2, ran
    assert "must run as root" in " ".join(ran.err.split())  # folded to 100 columns
    assert "Traceback" not in ran.err


def test_a_rules_file_without_a_rule_is_a_usage_error_before_anything_is_read(
    console: tuple[Bench, RecordStore, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A FILE with no [[approve.rule]], or one the config would refuse, is said in one
    line naming the file (exit 2); no record is read."""
    empty = tmp_path / "empty.toml"
    empty.write_text("[executor]\n")
    assert main(["replay", "--rules", str(empty)]) == 2
    err = " ".join(capfd.readouterr().err.split())  # folded to 100 columns
    assert f"--rules {empty}: no [[approve.rule]] in it" in err
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(RULES.replace('period = "24h"', 'period = "1s"'))
    assert main(["replay", "--rules", str(wrong)]) == 2
    err = " ".join(capfd.readouterr().err.split())
    assert f"--rules {wrong}: approve.rule.0.period" in err and "Traceback" not in err
