"""``opsbot plans`` lists as systemctl lists: a header, one line a plan of at most 100
columns (goal and units cut with an ellipsis; ``-l``/``--full`` whole, ``--json`` always
whole), times with their zone, ``N plans listed.``; ``--no-legend`` drops header and
footer; ``--state`` (any case, repeated or comma-separated) and ``--since`` (a systemd
time span ago, or a date and time) filter, and a bad value is one usage line, exit 2;
which pager a person at a terminal gets; ``--no-pager`` accepted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from opsbot_cli import plans, screen
from opsbot_cli.main import main
from shared_schema import Plan, PlanState
from testbed.canned_executor import canned_executor, listing_of, summary_of

NOW = datetime.now(UTC).replace(microsecond=0)
SHORT = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)
LONG = Plan.model_validate(
    {
        "goal": "bring the whole web tier back after the certificate rotation went wrong " * 2,
        "steps": [
            {"tool": "restart_unit", "args": {"unit": f"web-frontend-{i}.service"}}
            for i in range(4)
        ],
    }
)
LISTING = listing_of(
    summary_of(SHORT, PlanState.PROPOSED, "20261201-100000-00000001", NOW - timedelta(days=3)),
    summary_of(LONG, PlanState.FAILED, "20261201-110000-00000002", NOW - timedelta(hours=5)),
    summary_of(SHORT, PlanState.APPROVED, "20261201-120000-00000003", NOW - timedelta(hours=1)),
)


@pytest.fixture
def executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An executor that lists three plans: PROPOSED three days ago, FAILED five hours
    ago (a long goal, four units), APPROVED an hour ago."""
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, LISTING):
        yield


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["plans", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def ids(lines: list[str]) -> list[str]:
    return [line.split()[0][-1] for line in lines if line.startswith("2026")]


@pytest.mark.usefixtures("executor")
def test_the_listing_has_a_legend_zones_and_fits_100_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Header, a line a plan with its time and zone, a footer; no line over 100 columns,
    the long goal and units cut with an ellipsis."""
    lines = listed(capsys)
    assert lines[0].split() == ["PLAN", "STATE", "SUBMITTED", "UNITS", "GOAL"]
    assert lines[-2:] == ["", "3 plans listed."]
    assert max(len(line) for line in lines) <= 100
    failed = next(line for line in lines if "FAILED" in line)
    assert failed.endswith("…") and len(failed) == 100
    assert "web-frontend-0.serv…" in failed
    assert screen.when(NOW - timedelta(hours=5)) in failed
    assert screen.when(NOW).endswith(" UTC")  # the zone; this machine's is UTC


@pytest.mark.usefixtures("executor")
def test_full_and_json_show_goal_and_units_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """``-l``/``--full`` prints the goal and units whole, as ``systemctl -l`` does;
    ``--json`` is never cut."""
    for flag in ("-l", "--full"):
        failed = next(line for line in listed(capsys, flag) if "FAILED" in line)
        assert failed.endswith(LONG.goal.strip())
        assert ",".join(LONG.units()) in failed
    shown = json.loads("\n".join(listed(capsys, "--json")))
    assert [p["goal"] for p in shown] == [SHORT.goal, LONG.goal, SHORT.goal]


@pytest.mark.usefixtures("executor")
def test_no_legend_prints_only_the_plans(capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-legend``: no header, no footer, one line a plan (for ``awk``)."""
    lines = listed(capsys, "--no-legend")
    assert [line.split()[0] for line in lines] == [p.plan_id for p in LISTING.plans]


@pytest.mark.usefixtures("executor")
@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--state", "proposed"], ["1"]),
        (["--state", "Approved", "--state", "FAILED"], ["2", "3"]),
        (["--state", "proposed,approved"], ["1", "3"]),
        (["--state", "stale"], []),
        (["--since", "2h"], ["3"]),
        (["--since", "1d"], ["2", "3"]),
        (["--since", "1d 12h", "--state", "proposed"], []),
        (["--since=-6h"], ["2", "3"]),
        (["--since", "6 h ago"], ["2", "3"]),
        (["--since", (NOW - timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%S UTC")], ["3"]),
        (["--since", (NOW - timedelta(hours=6)).isoformat()], ["2", "3"]),
        (["--since", (NOW - timedelta(days=4)).strftime("%Y-%m-%d")], ["1", "2", "3"]),
    ],
)
def test_state_and_since_filter(
    argv: list[str], shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--state`` in any case, repeated or comma-separated; ``--since`` a time span ago
    (``2h``, ``1d 12h``, ``-6h``, ``6 h ago``) or a date and time (as plans prints it,
    ISO with its zone, or a day); both together."""
    assert ids(listed(capsys, "--no-legend", *argv)) == shown
    as_json = json.loads("\n".join(listed(capsys, "--json", *argv)))
    assert [p["plan_id"][-1] for p in as_json] == shown


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["--state", "done"],
            "--state 'done': not a plan state (`opsbot plans --help` lists them)",
        ),
        (["--state", "proposed,"], "--state '': not a plan state"),
        (
            ["--since", "yesterday-ish"],
            "--since 'yesterday-ish': not a time span (2h, 1d) or a date (2026-12-01 15:20)",
        ),
        (["--since", "2 parsecs"], "--since '2 parsecs': not a time span"),
    ],
)
def test_a_bad_state_or_since_is_one_usage_line(
    argv: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A state that is not one, or a time that is neither: exit 2 and one line, before
    any executor is asked (none listens here)."""
    monkeypatch.setenv("OPSBOT_SOCKET", str(tmp_path / "nobody.sock"))
    assert main(["plans", *argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"opsbot: error: {said}")


def test_the_pager_is_for_a_person_at_a_terminal() -> None:
    """As systemctl: no pager unless stdout is a terminal; ``$SYSTEMD_PAGER`` first,
    then ``$PAGER``, then less; an empty one or ``cat`` means none."""
    assert screen.pager_argv({}, is_tty=False) is None
    assert screen.pager_argv({"PAGER": "most"}, is_tty=False) is None
    assert screen.pager_argv({}, is_tty=True) == ["less"]
    assert screen.pager_argv({"PAGER": "most -s"}, is_tty=True) == ["most", "-s"]
    assert screen.pager_argv({"SYSTEMD_PAGER": "lv", "PAGER": "most"}, is_tty=True) == ["lv"]
    assert screen.pager_argv({"SYSTEMD_PAGER": "", "PAGER": "most"}, is_tty=True) is None
    assert screen.pager_argv({"PAGER": "cat"}, is_tty=True) is None


def test_the_pager_gets_less_frsxmk_as_systemd_sets_it() -> None:
    """The pager's ``LESS`` is ``FRSXMK`` unless ``$SYSTEMD_LESS`` says otherwise, as
    systemd sets it (the user's ``$LESS`` does not count, as for systemctl)."""
    assert screen.pager_environment({"LESS": "-N"})["LESS"] == "FRSXMK"
    assert screen.pager_environment({"SYSTEMD_LESS": "FRX"})["LESS"] == "FRX"


@pytest.mark.usefixtures("executor")
def test_no_pager_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-pager`` is accepted as systemctl accepts it; piped, the listing is the same
    with or without it."""
    assert listed(capsys, "--no-pager") == listed(capsys)


def test_the_table_is_cut_only_where_it_must_be() -> None:
    """Short plans are not padded past their goal; a goal is cut only when the line
    would pass 100 columns."""
    short = plans.table(
        [
            {
                "plan_id": "20261201-100000-00000001",
                "state": "PROPOSED",
                "submitted_at": "2026-12-01T10:00:00Z",
                "units": ["app.service"],
                "goal": "restart app",
            }
        ],
        legend=False,
    )
    at = screen.when("2026-12-01T10:00:00Z")
    assert short == [f"20261201-100000-00000001 PROPOSED {at} app.service restart app"]
