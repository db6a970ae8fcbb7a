"""Apply windows as the operator meets them on the console: ``opsbot approve`` says the
plan applies in its window (and until when the approval holds), ``--now`` runs it at once
and says so, a window too far away is refused before anything is asked; ``opsbot show``
and ``opsbot plans`` say when an approved plan runs; ``opsbot apply --dry-run`` says it
waits; ``opsbot check-config`` has systemd-analyze check each window.

The windows are computed around the present (a start on a date and minute a few hours
from now, in UTC): the clock is never changed."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from opsbot_cli import plans, show, wire
from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import Accepted, PlanStore, approval_path, approve
from shared_schema import Plan, PlanState, encode_message
from shared_schema.config import ApplyWindow
from shared_schema.executor_socket import WindowWait
from testbed.canned_executor import detail_of, listing_of, summary_of
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import plan_of, submitted

NOW = datetime.now(UTC)
#: A window that opens three hours from now, for an hour.
OPENS = (NOW + timedelta(hours=3)).replace(second=0, microsecond=0)
CLOSES = OPENS + timedelta(hours=1)
LATER = ApplyWindow(start=OPENS.strftime("%Y-%m-%d %H:%M:00 UTC"), duration="1h")
FAR = ApplyWindow(start=f"{NOW.year + 1}-{NOW.month:02d}-01 02:00 UTC", duration="1h")


def at_text(at: datetime) -> str:
    return at.astimezone().strftime("%a %Y-%m-%d %H:%M %Z")


def span() -> str:
    same_day = OPENS.astimezone().date() == CLOSES.astimezone().date()
    return (
        f"{at_text(OPENS)} to {CLOSES.astimezone():%H:%M}"
        if same_day
        else (f"{at_text(OPENS)} to {at_text(CLOSES)}")
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def config_with(path: Path, *windows: ApplyWindow) -> None:
    text = '[executor.allow]\nrestart_unit = ["nginx.service"]\n'
    for window in windows:
        text += (
            f'[[executor.apply_window]]\nstart = "{window.start}"\nduration = "{window.duration}"\n'
        )
    path.write_text(text)


@pytest.fixture
def config(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path / "opsbot.toml"
    config_with(path, LATER)
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(path))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return path


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


def approved_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["approve", *argv, "--json"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert isinstance(value, dict)
    return value


# -- opsbot approve ---------------------------------------------------------------------------


def test_approve_outside_the_window_says_it_applies_in_the_window(
    config: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The window opens in three hours: the approval holds until its end, and approve
    says when the plan runs (--json: runs, the window, no override)."""
    record = submitted(store, plan_of(), at=NOW)
    journal.accepted(record)
    said = approved_json(capsys, record.plan_id, "--sha256", record.sha256[:12])
    assert said["runs"] == f"in its apply window, {span()}"
    assert said["window"] == {"opens_at": OPENS.isoformat(), "closes_at": CLOSES.isoformat()}
    assert said["override_window"] is False
    assert said["approval"]["expires_at"] == CLOSES.isoformat().replace("+00:00", "Z")
    assert str(said["next_apply"]).startswith(f"nothing applies it in its apply window, {span()}")
    assert store.status(record.plan_id).waits_for_window == WindowWait(
        opens_at=OPENS, closes_at=CLOSES
    )


def test_approve_now_overrides_the_window_and_says_it_starts_now(
    config: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`opsbot approve ID --now`: recorded in the approval file, runs "at once", holds for
    approval_ttl_seconds; the plain output says it overrides the window."""
    record = submitted(store, plan_of(), at=NOW)
    journal.accepted(record)
    said = approved_json(capsys, record.plan_id, "--sha256", record.sha256[:12], "--now")
    assert (said["runs"], said["window"], said["override_window"]) == ("at once", None, True)
    data = json.loads(approval_path(approvals_dir, record.plan_id).read_bytes())
    assert data["override_window"] is True
    held = datetime.fromisoformat(data["expires_at"]) - datetime.fromisoformat(data["approved_at"])
    assert held == timedelta(seconds=3600)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12], "--now"]) == 0
    assert "overrides its apply window (--now): " in capsys.readouterr().out


def test_on_a_terminal_approve_asks_to_run_it_in_its_window(
    config: Path,
    store: PlanStore,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The review says when it would run and until when the approval holds, then asks."""
    record = submitted(store, plan_of(), at=NOW)
    journal.accepted(record)
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["approve", record.plan_id]) == 0
    out = capsys.readouterr().out
    assert (
        f"runs      in its apply window, {span()}\n"
        "approval  holds until the end of that window, "
        f"{CLOSES.astimezone():%Y-%m-%d %H:%M:%S %Z}\n"
        "Approve? [y/N] "
    ) in out


def test_a_window_too_far_away_is_refused_before_anything_is_asked(
    config: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The only window is months away: exit 5, the error and the hint to use --now or
    change the config; nothing asked, nothing written. --now approves it."""
    config_with(config, FAR)
    record = submitted(store, plan_of(), at=NOW)
    journal.accepted(record)
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["approve", record.plan_id]) == 5
    out, err = capsys.readouterr()
    assert "Approve?" not in out
    assert "opsbot: error: no apply window opens within 7 days" in err
    assert "`opsbot approve --now`" in err and "[executor.apply_window]" in err
    assert not approval_path(approvals_dir, record.plan_id).exists()
    said = approved_json(capsys, record.plan_id, "--sha256", record.sha256[:12], "--now")
    assert said["runs"] == "at once"


# -- opsbot apply --dry-run -------------------------------------------------------------------


def test_the_dry_run_says_the_plan_waits_for_its_window(
    config: Path,
    store: PlanStore,
    approvals_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Approved outside the window: the dry run prints when it will run and exits 3
    (waiting), as for a plan that waits for approval."""
    record = submitted(store, plan_of(), at=NOW)
    approve(
        store,
        approvals_dir,
        record.plan_id,
        sha256_prefix=record.sha256,
        accepted=Accepted(frozenset({record.sha256}), NOW - timedelta(days=1)),
        approver="alice",
        now=datetime.now(UTC),
        ttl_seconds=3600,
        windows=[LATER],
    )
    capsys.readouterr()  # what approve() logged, structlog unconfigured in this test
    assert main(["apply", "--dry-run", "--json"]) == 3
    [outcome] = json.loads(capsys.readouterr().out)
    assert (outcome["state"], outcome["would"]) == ("APPROVED", "wait")
    assert outcome["message"] == (
        f"would not run now: approved; waits for its apply window, {span()} (its "
        "preconditions are checked then)"
    )
    assert main(["apply", "--dry-run"]) == 3
    said = " ".join(capsys.readouterr().out.split())
    assert f"APPROVED would not run now: approved; waits for its apply window, {span()}" in said


# -- opsbot show, opsbot plans ----------------------------------------------------------------

ONE = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)
WAIT = WindowWait(
    opens_at=datetime(2026, 12, 2, 2, 0, tzinfo=UTC), closes_at=datetime(2026, 12, 2, 4, tzinfo=UTC)
)


def test_show_says_when_an_approved_plan_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan waiting for its window: a ``runs`` line under its state."""
    reply = encode_message(detail_of(ONE, PlanState.APPROVED, waits_for_window=WAIT))
    detail = wire.plan_detail(wire.decode_reply(reply))
    assert isinstance(detail, dict)
    lines = show.render(detail, None, full=True)
    assert lines[1:3] == [
        "state     APPROVED",
        "runs      in its apply window, "
        f"{at_text(WAIT.opens_at)} to {WAIT.closes_at.astimezone():%H:%M} "
        "(opsbot-apply.timer runs it then, checking its preconditions again)",
    ]
    plain_detail = wire.plan_detail(
        wire.decode_reply(encode_message(detail_of(ONE, PlanState.APPROVED)))
    )
    assert isinstance(plain_detail, dict)
    assert not any(line.startswith("runs") for line in show.render(plain_detail, None))


def test_plans_has_a_runs_column_where_a_plan_waits_for_its_window() -> None:
    """A RUNS column after STATE, only when a listed plan waits: its window's start, "-"
    for plans that are not approved."""
    listing = listing_of(
        summary_of(ONE, PlanState.PROPOSED, "20261201-100000-00000001"),
        summary_of(ONE, PlanState.APPROVED, "20261201-110000-00000002", waits_for_window=WAIT),
    )
    shaped = wire.plan_list(wire.decode_reply(encode_message(listing)))
    assert isinstance(shaped, dict)
    lines = plans.table(shaped["plans"])
    assert lines[0].split() == ["PLAN", "STATE", "RUNS", "SUBMITTED", "UNITS", "GOAL"]
    assert lines[1].split()[:3] == ["20261201-100000-00000001", "PROPOSED", "-"]
    assert " ".join(lines[2].split()[:6]) == (
        f"20261201-110000-00000002 APPROVED {at_text(WAIT.opens_at)}"
    )
    assert shaped["plans"][1]["waits_for_window"] == {
        "opens_at": "2026-12-02T02:00:00Z",
        "closes_at": "2026-12-02T04:00:00Z",
    }
    without = plans.table(shaped["plans"][:1])
    assert "RUNS" not in without[0]


# -- opsbot check-config ----------------------------------------------------------------------


def test_check_config_has_systemd_check_each_window(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window systemd takes: listed, and the next one said; a start it refuses: exit 78
    with systemd's words and which window."""
    main(["check-config"])
    out = capsys.readouterr().out
    assert f"  applies in window: {LATER.start} for 1h\n" in out
    assert f"  apply window: next {span()}\n" in out
    config_with(config, LATER, ApplyWindow(start="Mon..Fri 25:00", duration="1h"))
    assert main(["check-config"]) == 78
    err = "\n".join(unfold(capsys.readouterr().err))  # each line whole, as it folded to fit
    assert f"opsbot: error: {config}, window 2: apply window start 'Mon..Fri 25:00': " in err
    assert "Failed to parse calendar specification" in err
