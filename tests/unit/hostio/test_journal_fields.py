"""The journal fields are the same on every unit: a plan's id is PLAN_ID and its
fingerprint PLAN_SHA256 whoever logs it, a diagnosis is RUN_ID, a step STEP, a command
line ARGV and its outcome EXIT_STATUS; SYSLOG_IDENTIFIER names the unit. Pinned here on
the real code paths of both halves, through the one journald setup (shared_io.log)."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from diagnose_svc.actions import CallTool, SubmitPlan
from diagnose_svc.runtime import run_diagnosis
from executor_svc.apply import Applier
from plans import PlanStore
from shared_io import log
from shared_io.run import run
from shared_schema import DiagnoseSettings
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, ScriptedPolicy, accept
from tests.unit.plans.helpers import (
    NOW,
    POLICY,
    Systemctl,
    approved,
    plan_of,
    submitted,
    unit_in,
)

ROOT = Path(__file__).resolve().parents[3]
#: Each program and the SYSLOG_IDENTIFIER it logs as.
IDENTIFIERS = {
    "opsbot": "opsbot",
    "opsbot-executor": "opsbot-executor",
    "opsbot-apply": "opsbot-apply",
    "opsbot-diagnose": "opsbot-diagnose",
    "opsbot-approver": "opsbot-approver",
    "opsbot-notify": "opsbot-notify",
    "opsbot-web": "opsbot-web",
}
#: Spellings the two halves used before they shared one setup; none may come back.
RETIRED = {"SHA256", "STATUS", "RETURNCODE"}

Sent = list[dict[str, str]]


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    """What would reach journald, as field dicts (MESSAGE included)."""
    from systemd import journal as sd_journal

    sent: Sent = []
    monkeypatch.setattr(
        sd_journal, "send", lambda message, **fields: sent.append({"MESSAGE": message, **fields})
    )
    log.configure("opsbot-test", verbose=True, journal=True)
    structlog.contextvars.clear_contextvars()
    yield sent
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def events(sent: Sent, name: str) -> Sent:
    return [fields for fields in sent if fields["EVENT"] == name]


def test_an_apply_logs_plan_step_argv_and_exit_status(
    journal: Sent, store: PlanStore, approvals_dir: Path
) -> None:
    """opsbot-apply: step.finished carries PLAN_ID, PLAN_SHA256, STEP, ARGV, EXIT_STATUS."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    Applier(
        store,
        approvals_dir,
        POLICY,
        actor="root",
        now=lambda: NOW,
        read_state=unit_in("failed"),
        run_step=Systemctl(),
    ).apply_all()
    [finished] = events(journal, "step.finished")
    assert finished["PLAN_ID"] == record.plan_id
    assert finished["PLAN_SHA256"] == record.sha256
    assert finished["STEP"] == "1"
    assert finished["ARGV"] == "systemctl restart --no-ask-password -- nginx.service"
    assert finished["EXIT_STATUS"] == "0"
    assert all(RETIRED.isdisjoint(fields) for fields in journal)


def test_a_diagnosis_logs_its_run_and_the_plan_it_proposed(journal: Sent) -> None:
    """opsbot-diagnose: every event of a run carries RUN_ID; the one that ends it with a
    plan carries PLAN_ID and PLAN_SHA256, as the executor's own events do."""
    host = RecordedHost().add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    plan = {
        "goal": "Restart killed.service",
        "steps": [{"tool": "restart_unit", "args": {"unit": "killed.service"}}],
    }
    policy = ScriptedPolicy(
        [CallTool(tool="read_unit_status", args={"unit": "killed.service"}), SubmitPlan(plan=plan)]
    )
    verdict = run_diagnosis(
        "killed.service",
        "down",
        policy,
        host.tools(),
        FakeSubmitter([accept("ab" * 32)]),
        DiagnoseSettings(),
    )
    [finished] = events(journal, "diagnose.finished")
    assert finished["RUN_ID"] == verdict.run_id
    assert (finished["PLAN_ID"], finished["PLAN_SHA256"]) == ("20261129-214500-0a1b2c3d", "ab" * 32)
    assert all(f["RUN_ID"] == verdict.run_id for f in journal if f["EVENT"].startswith("diagnose."))
    assert all(RETIRED.isdisjoint(fields) for fields in journal)


def test_a_command_logs_its_argv_and_exit_status(journal: Sent) -> None:
    """The one runner, used by both halves: ARGV (shell-quoted) and EXIT_STATUS."""
    run(["sh", "-c", "exit 3"], timeout=5)
    [finished] = events(journal, "command.finished")
    assert (finished["ARGV"], finished["EXIT_STATUS"]) == ("sh -c 'exit 3'", "3")
    assert finished["MESSAGE_ID"] == log.message_id("command.finished")


def _configure_calls(module: str) -> set[str]:
    path = ROOT / (module.replace(".", "/") + ".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "configure"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def test_every_program_logs_under_its_own_identifier() -> None:
    """Each program pyproject installs configures logging once, as itself."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(IDENTIFIERS)
    for program, target in scripts.items():
        module = target.split(":")[0]
        assert _configure_calls(module) == {IDENTIFIERS[program]}, (program, module)
