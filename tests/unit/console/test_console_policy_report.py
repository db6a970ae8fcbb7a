"""``sudo opsbot policy report|pause|resume``, against root's opsbot-approver served on a
real socket (tests/unit/approver/bench.py): at 3 a.m. the operator reads what each rule
did, stops every rule at once and lets them decide again; and wherever a plan a rule
approved is shown (``opsbot plans``, ``opsbot show``, ``opsbot audit``, the approval
page), the rule is named as a rule, never as if a person."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from approver_svc.view import plan_view
from opsbot_cli import story
from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import PlanStore, approval_path
from plans.records import Transition
from shared_schema import OpsbotConfig, PlanState
from shared_schema.approver_socket import ApplyRules, RulesApplied
from shared_schema.config import ApproverSettings
from tests.unit.approver.bench import Bench, bench
from tests.unit.console.test_console_audit_summary import (
    OPSBOT_UID,
    PLAN,
    RUN,
    logged,
    needs_journal_remote,
    opsbot_users_are_nobody,
    write_journal,
)
from tests.unit.executor.conftest import RunningExecutor
from tests.unit.plans.helpers import NOW, POLICY, plan_of, step, submitted

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="root's requests to the approver: the test must run as root"
)

NIGHT_RESTARTS = {
    "name": "night-restarts",
    "mode": "enforce",
    "tools": ["restart_unit"],
    "units": ["nginx.service"],
}
WORKERS = {"name": "workers", "tools": ["restart_unit"], "units": ["worker@*.service"]}


def config(*rules: dict[str, object]) -> OpsbotConfig:
    return OpsbotConfig.model_validate(
        {
            "executor": POLICY.model_dump(mode="json"),
            "approvers": {"alice": ApproverSettings().model_dump()},
            "approve": {"rule": list(rules)},
        }
    )


@pytest.fixture
def approver(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Bench]:
    """opsbot-approver with an enforce rule for nginx and a shadow rule for the workers;
    the console pointed at its root socket, as carol behind sudo."""
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)
    # The approver's log lines go to stderr (as once the console configured logging),
    # never between the lines of the console's output.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    with bench(tmp_path, store, approvals_dir, config=config(NIGHT_RESTARTS, WORKERS)) as b:
        assert b.root_socket is not None
        monkeypatch.setenv("OPSBOT_APPROVER_SOCKET", str(b.root_socket))
        monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
        monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
        monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
        monkeypatch.setenv("SUDO_USER", "carol")
        yield b


def rules(b: Bench) -> RulesApplied:
    """What opsbot-rules.service does when a plan is stored."""
    reply = b.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied), reply
    return reply


def propose(b: Bench, unit: str, goal: str = "restart it") -> str:
    record = b.submit(
        submitted(
            b.store,
            plan_of(step("restart_unit", unit, expect={"active_state": ["failed"]}), goal=goal),
            b.clock(),
        )
    )
    b.clock.advance(1)
    return record.plan_id


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """``opsbot ARGV``: its status, its lines on stdout, its own lines on stderr (the
    approver serving in this process logs there too); none over 100 columns."""
    capsys.readouterr()
    status = main(list(argv))
    said = capsys.readouterr()
    lines = said.out.splitlines()
    own = ("opsbot: error: ", "opsbot: hint: ", " " * 8)
    err = [line for line in said.err.splitlines() if line.startswith(own)]
    assert all(len(line) <= 100 for line in lines + err), said
    return status, lines, "\n".join(err)


def words(lines: list[str]) -> str:
    """Lines as one text, folding undone."""
    return " ".join(" ".join(lines).split())


def test_the_report_says_per_rule_what_it_did_would_have_done_and_refused(
    approver: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """nginx is restarted by the enforce rule; worker@1's restart the shadow rule would
    have approved, and a human approved it and it held; app.service no rule names. The
    report says so rule by rule, in 100 columns; --json carries the same for a script."""
    b = approver
    propose(b, "nginx.service")
    worker = propose(b, "worker@1.service")
    propose(b, "app.service")
    rules(b)
    status = b.store.status(worker)
    history = [Transition(state=PlanState.VERIFIED, at=b.clock(), by="verify")]
    b.store.save_status(status.model_copy(update={"state": PlanState.VERIFIED, "history": history}))

    code, lines, _ = run(capsys, "policy", "report")
    assert code == 0
    assert lines[0] == "standing approval rules: running (never paused)"
    assert "rule night-restarts (enforce): approved 1 plan" in lines
    assert "rule workers (shadow): would have approved 1 plan" in lines
    assert "  what became of those it would have approved: 1 VERIFIED" in lines
    at = lines.index("rule workers (shadow): would have approved 1 plan")
    assert lines[at + 2 : at + 4] == [
        "  refused 2 plans, most often:",
        "     1  nginx.service is not one of its units (worker@*.service)",
    ]
    assert "records: 3 plans decided, kept by opsbot-approver; none dropped" in lines
    assert any(f"{worker}  rule workers would have approved it" in line for line in lines)

    assert main(["policy", "report", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["paused"] is False and (said["records"], said["dropped"]) == (3, 0)
    by_name = {rule["name"]: rule for rule in said["rules"]}
    assert (by_name["night-restarts"]["approved"], by_name["workers"]["would_approve"]) == (1, 1)
    assert by_name["workers"]["ended"] == {"VERIFIED": 1}


def test_pause_stops_every_rule_at_once_and_resume_lets_them_decide_again(
    approver: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """carol, behind sudo, pauses the rules with a reason: she is told that every rule
    stopped, the next nginx plan waits for a human (no approval written), and the report
    opens with who paused it, when and why. After resume, a new plan is approved again."""
    b = approver
    code, lines, _ = run(capsys, "policy", "pause", "--reason", "restarts loop  tonight")
    assert code == 0
    assert lines[0] == (
        "paused every standing approval rule, by carol at "
        f"{NOW.astimezone():%Y-%m-%d %H:%M:%S %Z}: restarts loop tonight"
    )
    assert "every rule stops at once: none approves a plan" in words(lines)
    waiting = propose(b, "nginx.service")
    [decided] = rules(b).decided
    assert decided.outcome == "for humans"
    assert not approval_path(b.approvals_dir, waiting).exists()
    code, lines, _ = run(capsys, "policy", "report")
    assert lines[0].startswith("standing approval rules: PAUSED by carol at ")
    assert lines[0].endswith(": restarts loop tonight")
    assert "  resume: sudo opsbot policy resume" in lines

    b.clock.advance(60)
    code, lines, _ = run(capsys, "policy", "resume")
    assert code == 0
    assert lines[0].startswith("resumed the standing approval rules, by carol at ")
    assert "the plans proposed while paused still wait for a human" in words(lines)
    fresh = propose(b, "nginx.service", goal="again")
    [decided] = rules(b).decided
    assert (decided.plan_id, decided.outcome) == (fresh, "approved")
    code, lines, _ = run(capsys, "policy", "report")
    assert lines[0].startswith("standing approval rules: running (resumed by carol at ")


def test_pause_names_the_login_behind_sudo_else_the_user(
    approver: Bench, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without sudo (a root shell), the pause is root's; --json says so for a script."""
    monkeypatch.delenv("SUDO_USER")
    assert main(["policy", "pause", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["paused"], said["by"], said["reason"]) == (True, "root", "")


def test_without_an_approver_nothing_is_paused_and_the_operator_is_told_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """opsbot-approver not installed: no socket. Each verb ends in one error line and one
    hint (how to enable it), exit 1, never a traceback."""
    monkeypatch.setenv("OPSBOT_APPROVER_SOCKET", str(tmp_path / "approver.sock"))
    monkeypatch.delenv("OPSBOT_DEBUG", raising=False)
    for verb, undone in (
        ("pause", "nothing was paused"),
        ("resume", "nothing was resumed"),
        ("report", "no report"),
    ):
        code, lines, err = run(capsys, "policy", verb)
        assert (code, lines) == (1, [])
        assert "Traceback" not in err
        said = unfold(err)
        assert said[0].startswith(f"opsbot: error: {undone}: no socket at {tmp_path}")
        assert said[1].startswith("opsbot: hint: is it installed (install.sh) and enabled?")
        assert len(said) == 2


def test_report_pause_and_resume_are_root_s(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As another user: a usage error whose hint repeats the command line with sudo."""
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    for argv in (["report"], ["pause", "--reason", "bad night"], ["resume"]):
        code, _, err = run(capsys, "policy", *argv)
        assert code == 2
        hint = "opsbot: hint: run it as root: sudo opsbot policy " + " ".join(argv)
        assert hint.replace("bad night", "'bad night'") in unfold(err)


def test_what_does_not_go_with_a_verb_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An ID is for test only, --reason for pause and resume only; a reason is bounded."""
    assert main(["policy", "report", "20261129-213500-1a2b3c4d"]) == 2
    assert "`opsbot policy report` takes no ID" in capsys.readouterr().err
    assert main(["policy", "report", "--reason", "x"]) == 2
    assert "--reason goes with pause and resume" in capsys.readouterr().err
    assert main(["policy", "pause", "--reason", "x" * 501]) == 2
    assert "--reason: at most 500 characters" in capsys.readouterr().err


def test_plans_and_show_name_the_rule_never_a_person(
    approver: Bench,
    executor: RunningExecutor,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The enforce rule approved nginx's restart: `opsbot plans` says which rule in a BY
    RULE column, `opsbot show` on its own line with the rule's sha256, and its history
    says the rule; --json has the rule and its sha256 whole."""
    b = approver
    monkeypatch.setenv("OPSBOT_SOCKET", str(executor.socket))
    plan_id = propose(b, "nginx.service", goal="restart nginx")
    rules(b)
    rule_sha = b.service.config.approve.rule[0].sha256

    code, lines, _ = run(capsys, "plans", "--no-pager")
    assert code == 0
    assert lines[0].split()[:4] == ["PLAN", "STATE", "BY", "RULE"]
    [line] = [line for line in lines if line.startswith(plan_id)]
    assert line.split()[1:3] == ["APPROVED", "night-restarts"]

    code, lines, _ = run(capsys, "show", plan_id, "--no-pager")
    assert code == 0
    assert "approved  by rule night-restarts, not by a person ([[approve.rule]] sha256 " in (
        "\n".join(lines)
    )
    assert f"sha256 {rule_sha[:16]}...)" in "\n".join(lines)
    assert any(line.endswith("APPROVED    by rule night-restarts") for line in lines)

    assert main(["show", plan_id, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["approved_by"], summary["approved_by_rule"]) == ("", "night-restarts")
    assert summary["rule_sha256"] == rule_sha


def test_the_approval_page_says_a_rule_approved_it(approver: Bench) -> None:
    """The page's view of a plan the rule approved: its state says which rule."""
    b = approver
    plan_id = propose(b, "nginx.service")
    rules(b)
    record = b.store.load(plan_id)
    view = plan_view(
        record,
        b.store.status(plan_id),
        b.store.verified_plan(record),
        policy=POLICY,
        now=b.clock(),
        host="web1",
        read_state=lambda unit: "failed (failed)",
    )
    assert view.state == "APPROVED by rule night-restarts"


@needs_journal_remote
def test_audit_says_the_rule_approved_it_and_shows_its_sha256(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal of a plan root's approver approved by rule: the summary says "rule
    night-restarts approved" (never as if a person), the plan.approved entry shows
    approved_by_rule= and rule_sha256=, and --json has both whole."""
    executor = {"uid": OPSBOT_UID, "unit": "opsbot-executor.service"}
    approver = {"uid": 0, "unit": "opsbot-approver.service", "plan_id": PLAN}
    entries = [
        logged(
            1,
            "plan.accepted",
            **executor,
            run_id=RUN,
            plan_id=PLAN,
            sha256="5" * 64,
            goal="Restart nginx",
            peer_uid=str(OPSBOT_UID),
        ),
        logged(
            2, "plan.approved", **approver, approved_by_rule="night-restarts", rule_sha256="7" * 64
        ),
    ]
    journal = write_journal(tmp_path / "system.journal", entries)
    capsys.readouterr()
    opsbot_users_are_nobody(monkeypatch)

    def reader(files: tuple[Path, ...] | None) -> object:
        from systemd import journal as systemd_journal

        return systemd_journal.Reader(files=[str(f) for f in files or (journal,)])

    monkeypatch.setattr(story, "_open", reader)
    assert main(["audit", PLAN, "--no-pager"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        'nobody proposed "Restart nginx"; rule night-restarts approved; nothing ran: APPROVED'
    )
    assert "    approved_by_rule=night-restarts rule_sha256=7777777777777777..." in lines
    assert main(["audit", PLAN, "--json"]) == 0
    [approved] = [
        e for e in json.loads(capsys.readouterr().out)["entries"] if "approved_by_rule" in e
    ]
    assert approved["rule_sha256"] == "7" * 64
