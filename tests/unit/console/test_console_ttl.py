"""``sudo opsbot approve ID --ttl DURATION``: the approval holds for exactly the duration
asked, written as systemd writes durations (``90``, ``30s``, ``30m``, ``2h``, ``1h 30min``);
anything else (``0``, ``-5``, ``abc``, beyond approval_ttl_seconds) is one usage line,
exit 2, and leaves the plan PROPOSED with no approval written."""

from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import PlanStore, approval_path, utcnow
from shared_schema import Approval, PlanState
from shared_schema.timespan import parse_timespan
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import plan_of, submitted

CEILING = 4 * 3600


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The CLI's paths pointed into tmp_path, approvals allowed for up to four hours."""
    config = tmp_path / "opsbot.toml"
    config.write_text(
        f"[executor]\napproval_ttl_seconds = {CEILING}\n"
        '[executor.allow]\nrestart_unit = ["nginx.service"]\n'
    )
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_SOCKET", str(tmp_path / "executor.sock"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return config


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [("90", 90), ("30s", 30), ("30m", 1800), ("2h", 7200), ("1h 30min", 5400)],
)
def test_approve_holds_for_the_duration_asked(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
    ttl: str,
    seconds: int,
) -> None:
    """An operator who types ``--ttl 30m`` gets an approval that expires 30 minutes after
    it was given, as ``systemd-run --on-active=30m`` would read it."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    argv = ["approve", record.plan_id, "--sha256", record.sha256[:12], "--ttl", ttl, "--json"]
    assert main(argv) == 0
    approval = Approval.model_validate_json(
        approval_path(approvals_dir, record.plan_id).read_bytes()
    )
    assert (approval.expires_at - approval.approved_at).total_seconds() == seconds
    assert "Traceback" not in capsys.readouterr().err


def test_approve_without_ttl_holds_for_the_configured_ceiling(
    env: Path, store: PlanStore, approvals_dir: Path, journal: ScriptedJournal
) -> None:
    """No ``--ttl``: the approval holds for approval_ttl_seconds, the documented default."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12], "--json"]) == 0
    approval = Approval.model_validate_json(
        approval_path(approvals_dir, record.plan_id).read_bytes()
    )
    assert (approval.expires_at - approval.approved_at).total_seconds() == CEILING


@pytest.mark.parametrize(
    ("ttl", "says"),
    [
        ("0", "a whole number of seconds, >= 1"),
        ("0s", "a whole number of seconds, >= 1"),
        ("-5", "takes a systemd duration"),
        ("abc", "takes a systemd duration"),
        ("", "takes a systemd duration"),
        ("5 3", "takes a systemd duration"),
        ("1.5s", "a whole number of seconds, >= 1"),
        ("4h 1s", f"(14401 s) exceeds approval_ttl_seconds={CEILING}"),
        ("1d", f"(86400 s) exceeds approval_ttl_seconds={CEILING}"),
    ],
)
def test_approve_refuses_a_bad_ttl_in_one_line_and_leaves_the_plan_proposed(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
    ttl: str,
    says: str,
) -> None:
    """``--ttl 0`` no longer becomes the default silently and ``--ttl -5`` no longer ends
    in a pydantic traceback: each is one usage line (exit 2), and nothing is approved."""
    record = submitted(store, plan_of(), at=utcnow())
    journal.accepted(record)
    argv = ["approve", record.plan_id, "--sha256", record.sha256[:12], f"--ttl={ttl}"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    [line] = unfold(captured.err)
    assert line.startswith("opsbot: error: --ttl") and says in line
    assert captured.out == ""
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is PlanState.PROPOSED


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("30s", 30.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1h 30min", 5400.0),
        ("1h30min", 5400.0),
        ("2 hours", 7200.0),
        ("1d 12h", 129600.0),
        ("1w", 604800.0),
        ("500ms", 0.5),
        (" 5min ", 300.0),
        ("0", 0.0),
    ],
)
def test_timespans_read_as_systemd_reads_them(text: str, seconds: float) -> None:
    """The parser reads what systemd.time(7) documents, in seconds."""
    assert parse_timespan(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "  ", "-5", "abc", "h", "5 3", "1hx", "5mins", "30 m s", "1h -5m", "1e3", "٣"]
)
def test_timespans_that_are_not_systemd_durations_are_none(text: str) -> None:
    """Anything systemd would refuse is None, never a guess at what was meant."""
    assert parse_timespan(text) is None
