"""``opsbot``, the operator's command line: one clear line on error with an exit status
that means something (2 usage, 78 config), no tracebacks; approve binds a root-written
approval to exactly the plan's fingerprint."""

import json
import re
from pathlib import Path

import pytest

from opsbot_cli import main as cli
from opsbot_cli.main import build_parser, main
from opsbot_cli.say import unfold
from plans import PlanStore, StatusRecord, approval_path, check_approval, utcnow
from shared_schema import Approval, PlanState
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.executor.conftest import RunningExecutor
from tests.unit.plans.helpers import approved, plan_of, restart_argv, step, submitted

# The subcommands the module docstring documents ("    opsbot NAME ...").
SUBCOMMANDS = re.findall(r"^    opsbot ([a-z-]+)", cli.__doc__ or "", re.MULTILINE)


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The CLI's paths pointed into tmp_path; returns the config file's path."""
    config = tmp_path / "opsbot.toml"
    config.write_text('[executor.allow]\nrestart_unit = ["nginx.service", "app.service"]\n')
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_SOCKET", str(tmp_path / "executor.sock"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return config


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    """The system journal ``opsbot approve`` reads, scripted (see scripted_journal.py)."""
    return install(monkeypatch)


def error_lines(err: str) -> list[str]:
    """The error lines, each whole (a long one is folded to 100 columns)."""
    return [line for line in unfold(err) if line.startswith("opsbot: error: ")]


def test_check_config_names_a_bad_key_in_one_line_and_exits_78(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt key makes ``opsbot check-config`` exit 78 (EX_CONFIG) with one error
    naming the file, the line and the key, and the key it most likely meant (and a hint
    where to read up), no traceback."""
    env.write_text("[executor]\nstep_timeout_secs = 30\n")
    assert main(["check-config"]) == 78
    out, err = capsys.readouterr()
    assert error_lines(err) == [
        f"opsbot: error: {env}:2: executor.step_timeout_secs: unknown key (did you mean "
        "step_timeout_seconds?)"
    ]
    assert [line for line in unfold(err) if line not in error_lines(err)] == [
        "opsbot: hint: see docs/operating.md, 'The config file', for every key and its default"
    ]
    assert "Traceback" not in err and out == ""


def test_check_config_names_a_denylisted_unit(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Allowing sshd in the config is a config error naming executor.allow."""
    env.write_text('[executor.allow]\nrestart_unit = ["sshd.service"]\n')
    assert main(["check-config"]) == 78
    [line] = error_lines(capsys.readouterr().err)
    assert "executor.allow: restart_unit: 'sshd.service' matches the built-in denylist" in line


def test_check_config_refuses_a_file_that_is_not_toml(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config that is not TOML at all is a config error too, in one line."""
    env.write_text("[executor\nallow = ")
    assert main(["check-config"]) == 78
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"opsbot: error: {env}: not valid TOML: ")


def test_check_config_reports_a_valid_config(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A valid config is reported valid with what it allows, as JSON for scripts."""
    main(["check-config", "--json"])
    info = json.loads(capsys.readouterr().out)
    assert info["config"] == str(env)
    assert info["allow"] == {"restart": ["app.service", "nginx.service"]}


@pytest.mark.parametrize("plan_id", ["../x", "20261129-213500-1A2B3C4D", "latest"])
def test_approve_with_a_bad_id_exits_2_with_a_clear_line(
    env: Path, capsys: pytest.CaptureFixture[str], plan_id: str
) -> None:
    """``opsbot approve ../x`` exits 2 (usage) saying it is not a plan id and what ids
    look like; nothing is written."""
    assert main(["approve", plan_id]) == 2
    err = capsys.readouterr().err
    assert error_lines(err) == [f"opsbot: error: {plan_id!r} is not a plan id"]
    assert "ids look like 20261129-213500-1a2b3c4d" in err
    assert "Traceback" not in err


def test_show_without_an_executor_socket_says_so(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no executor listening, ``opsbot show`` exits non-zero with one line saying
    there is no socket at the executor's path, and a hint naming the socket unit to
    enable; no traceback."""
    assert main(["show", "20261129-213500-1a2b3c4d"]) != 0
    err = capsys.readouterr().err
    assert len(error_lines(err)) == 1
    flat = " ".join(err.split())  # a long path wraps the line at 100 columns
    assert re.match(
        rf"opsbot: error: no (executor )?socket at {re.escape(str(env.parent))}/executor\.sock "
        "opsbot: hint: is opsbot-executor.socket enabled?",
        flat,
    )
    assert "Traceback" not in err


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_each_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``opsbot COMMAND --help`` prints its usage and exits 0."""
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: opsbot {command}")


def test_the_parser_knows_exactly_the_documented_subcommands() -> None:
    """The subcommands the module docstring documents are the ones the parser has (and
    the core ones an operator needs are among them)."""
    assert {"plans", "show", "approve", "reject", "apply", "check-config"} <= set(SUBCOMMANDS)
    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "command")
    assert choices is not None and sorted(choices) == sorted(SUBCOMMANDS)


def test_approve_writes_a_valid_approval_and_marks_the_plan_approved(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``sudo opsbot approve ID --sha256 PREFIX`` writes an approval bound to the plan's
    fingerprint that the executor's checks accept, marks the plan APPROVED by the
    operator, and prints exactly what will run."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 0
    out = capsys.readouterr().out
    assert f"approved plan {record.plan_id} (sha256 {record.sha256[:16]}...)" in out
    assert "  systemctl restart --no-ask-password -- nginx.service" in out
    checked = check_approval(approvals_dir, record, store, utcnow(), ttl_ceiling_seconds=3600)
    assert checked.approval.sha256 == record.sha256
    assert checked.approval.approver == "root"
    status = store.status(record.plan_id)
    assert (status.state, status.approved_by) == (PlanState.APPROVED, "root")


def test_approve_json_prints_the_approval(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--json`` prints the approval written, with its expiry, and what will apply it
    (here, an approvals directory no opsbot-apply unit reads: nothing)."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    sha = record.sha256[:12]
    assert main(["approve", record.plan_id, "--sha256", sha, "--ttl", "60", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["applies"] is False
    assert said["next_apply"].startswith("nothing applies it on its own")
    approval = Approval.model_validate(said["approval"])
    assert approval == Approval.model_validate_json(
        approval_path(approvals_dir, record.plan_id).read_bytes()
    )
    assert (approval.expires_at - approval.approved_at).total_seconds() == 60


def test_approve_refuses_a_ttl_beyond_the_configured_one(
    env: Path, store: PlanStore, approvals_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator cannot approve for longer than approval_ttl_seconds allows."""
    record = submitted(store, plan_of(), at=utcnow())
    assert main(["approve", record.plan_id, "--sha256", record.sha256, "--ttl", "999999"]) == 2
    assert "exceeds approval_ttl_seconds=3600" in capsys.readouterr().err
    assert not approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize(
    "final", [PlanState.REJECTED, PlanState.INTERRUPTED, PlanState.STALE, PlanState.EXPIRED]
)
def test_approve_refuses_a_plan_that_is_already_final(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
    final: PlanState,
) -> None:
    """A rejected (or interrupted, stale, expired) plan cannot be approved: refused, exit
    5, saying its state and to diagnose again; no approval file is written. (A plan that
    ran: test_console_approve_refusals.py.)"""
    record = submitted(store, plan_of(), at=utcnow())
    store.save_status(StatusRecord(plan_id=record.plan_id, state=final))
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    err = capsys.readouterr().err
    assert error_lines(err) == [
        f"opsbot: error: plan {record.plan_id} is {final}; only PROPOSED plans can be approved"
    ]
    assert "diagnose again" in err
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_approve_of_an_unknown_plan_says_so(
    env: Path, journal: ScriptedJournal, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed id with no plan: exit 1, "no plan ID"."""
    assert main(["approve", "20261129-213500-1a2b3c4d", "--sha256", "ab" * 6]) == 1
    assert error_lines(capsys.readouterr().err) == [
        "opsbot: error: no plan 20261129-213500-1a2b3c4d"
    ]


def test_a_rejected_plan_is_never_approved(
    env: Path, store: PlanStore, journal: ScriptedJournal, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot reject`` makes the plan REJECTED with the reason; approving it afterwards
    is refused."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    assert main(["reject", record.plan_id, "--reason", "wrong unit"]) == 0
    status = store.status(record.plan_id)
    assert (status.state, status.reason) == (PlanState.REJECTED, "wrong unit")
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    assert f"plan {record.plan_id} is REJECTED" in capsys.readouterr().err


def test_apply_dry_run_prints_what_would_run(
    env: Path, store: PlanStore, approvals_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot apply --dry-run`` lists each open plan with the argv it would run and
    what each step does."""
    record = submitted(store, plan_of(), at=utcnow())
    approved(store, approvals_dir, record, at=utcnow())
    assert main(["apply", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{record.plan_id}  APPROVED    would run 1 step (dry run: nothing was run)" in out
    assert "  1. systemctl restart --no-ask-password -- nginx.service" in out
    assert "     -> restart nginx.service: stop the unit and start it again" in out
    assert store.status(record.plan_id).state is PlanState.APPROVED


def test_plans_and_show_ask_the_running_executor(
    env: Path, executor: RunningExecutor, store: PlanStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a real executor socket, ``opsbot plans`` lists the plan and ``opsbot show``
    prints its goal and each step as a diff with the argv that will run."""
    record = submitted(
        store,
        plan_of(
            step("reset_failed_unit", "nginx.service"),
            step("restart_unit", "nginx.service", reason="start limit hit"),
            goal="bring nginx back",
        ),
        at=utcnow(),
    )
    assert main(["plans"]) == 0
    listing = capsys.readouterr().out
    assert record.plan_id in listing and "PROPOSED" in listing and "bring nginx back" in listing

    assert main(["show", record.plan_id]) == 0
    shown = capsys.readouterr().out
    assert f"plan      {record.plan_id}" in shown
    assert f"sha256    {record.sha256}" in shown
    assert "  1. nginx.service: reset-failed\n" in shown
    assert "     run: systemctl reset-failed --no-ask-password -- nginx.service\n" in shown
    assert "  2. nginx.service: restart\n" in shown
    assert "     run: systemctl restart --no-ask-password -- nginx.service\n" in shown
    assert "     why: start limit hit\n" in shown

    assert main(["show", record.plan_id, "--argv"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "systemctl reset-failed --no-ask-password -- nginx.service",
        " ".join(restart_argv("nginx.service")),
    ]


def test_show_of_an_unknown_plan_through_the_executor_says_so(
    env: Path, executor: RunningExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    """The executor's REJECT reason becomes the CLI's one error line."""
    assert main(["show", "20261129-213500-1a2b3c4d"]) == 1
    assert error_lines(capsys.readouterr().err) == [
        "opsbot: error: no plan 20261129-213500-1a2b3c4d"
    ]
