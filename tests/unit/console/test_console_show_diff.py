"""``opsbot show`` reads like a plan diff: each step as ``unit: state -> verb`` with the
argv it runs, and each precondition said as the unit is now (``as expected`` or ``not as
expected``), as the apply will judge it; for a final plan, that they are not checked any
more (and no systemctl runs); if the live state cannot be read, that line says so. Lines
fit 100 columns unless ``--full`` (``--argv`` and ``--json`` are exact)."""

from __future__ import annotations

from itertools import takewhile
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli import show, wire
from opsbot_cli.errors import ConsoleError
from opsbot_cli.main import main
from shared_io.unit_show import UnitState
from shared_schema import Plan, PlanState, encode_message
from testbed.canned_executor import PLAN_ID, canned_executor, detail_of

INVOCATION = "0123456789abcdef0123456789abcdef"
FAILED_APP = Plan.model_validate(
    {
        "goal": "bring app back",
        "steps": [
            {
                "tool": "restart_unit",
                "args": {"unit": "app.service"},
                "expect": {"active_state": ["failed"], "invocation_id": INVOCATION},
                "reason": "exited 1 after a config change",
            },
            {"tool": "reload_unit", "args": {"unit": "nginx.service"}},
        ],
    }
)
LONG_UNIT = "a-unit-with-a-very-long-name-" + "x" * 90 + ".service"
LONG = Plan.model_validate(
    {
        "goal": "a goal that goes on " * 9,
        "steps": [
            {
                "tool": "start_unit",
                "args": {"unit": LONG_UNIT},
                "expect": {"active_state": ["failed", "inactive"]},
                "reason": "because " * 40,
            }
        ],
    }
)


def shaped(plan: Plan, state: PlanState = PlanState.PROPOSED, **extra: Any) -> dict[str, Any]:
    detail = wire.plan_detail(wire.decode_reply(encode_message(detail_of(plan, state, **extra))))
    assert isinstance(detail, dict)
    return detail


class Live:
    """Live state as systemctl would report it, and which units were asked for."""

    def __init__(self, **states: UnitState | str) -> None:
        self.states = states
        self.asked: list[str] = []

    def __call__(self, unit: str) -> UnitState | str:
        self.asked.append(unit)
        return self.states[unit.split(".")[0]]


def unit(name: str, active: str, sub: str = "dead", invocation: str = INVOCATION) -> UnitState:
    return UnitState(name, "loaded", active, sub, invocation)


def test_each_step_reads_as_a_diff_with_its_precondition_beside_the_live_state() -> None:
    """app.service failed as at diagnosis: ``app.service: failed -> restart``, its argv,
    ``precondition: app.service is failed now: as expected`` and the same for its
    invocation; a step without precondition says none, with the unit's state now."""
    live = Live(app=unit("app.service", "failed", "failed"), nginx=unit("nginx.service", "active"))
    lines = show.render(shaped(FAILED_APP), live)
    at = lines.index("  1. app.service: failed -> restart")
    assert lines[at + 1 : at + 7] == [
        "     run: systemctl restart --no-ask-password -- app.service",
        "     precondition: app.service is failed now: as expected",
        "     precondition: app.service has not been started again since diagnosis: as expected",
        "     why: exited 1 after a config change",
        "  2. nginx.service: reload",
        "     run: systemctl reload --no-ask-password -- nginx.service",
    ]
    assert lines[at + 7] == "     precondition: none (nginx.service is active now)"
    assert live.asked == ["app.service", "nginx.service"]


def test_a_unit_that_recovered_is_not_as_expected_where_the_apply_would_refuse() -> None:
    """app.service came back by itself: each precondition line says what the unit is now
    and that the plan expected otherwise, before anyone approves a plan that would only
    be STALE."""
    live = Live(app=unit("app.service", "active", "running", "f" * 32), nginx="unused")
    lines = show.render(shaped(FAILED_APP), live)
    assert (
        "     precondition: app.service is active now: not as expected (the plan expects failed)"
    ) in lines
    said = " ".join(line.strip() for line in lines)
    assert (
        "precondition: app.service was started again since diagnosis: not as expected "
        "(invocation ffffffffffff now, 0123456789ab at diagnosis)"
    ) in said


def test_a_unit_stopped_since_diagnosis_is_said_stopped() -> None:
    """app.service was stopped since diagnosis (inactive, no invocation any more): the
    invocation precondition says it was stopped, not started again."""
    live = Live(app=unit("app.service", "inactive", "dead", ""), nginx="unused")
    said = " ".join(line.strip() for line in show.render(shaped(FAILED_APP), live))
    assert (
        "app.service was stopped since diagnosis: not as expected (invocation none now, "
        "0123456789ab at diagnosis)"
    ) in said


def test_a_final_plan_checks_nothing_and_says_so() -> None:
    """For a plan no step of which will run any more (STALE, VERIFIED, ...), show says
    the preconditions are not checked any more; it reads no live state."""
    lines = show.render(shaped(FAILED_APP, PlanState.STALE), None)
    assert (
        "     precondition: app.service is failed (not checked any more: the plan is STALE)"
        in lines
    )
    assert "     precondition: none" in lines


@pytest.mark.parametrize("state", [s for s in PlanState if s.is_final])
def test_show_of_a_final_plan_runs_no_systemctl(
    state: PlanState,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """End to end through ``opsbot show``: for a final plan the live reader is never
    called, so no systemctl runs (the reader here fails the test)."""
    monkeypatch.setattr("opsbot_cli.live.read", lambda u: pytest.fail(f"systemctl for {u}"))
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, detail_of(FAILED_APP, state)):
        assert main(["show", PLAN_ID]) == 0
    assert f"(not checked any more: the plan is {state.value})" in capsys.readouterr().out


def test_live_state_that_cannot_be_read_is_said_in_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no systemd to ask (this machine, as a unit test runs), ``opsbot show`` of a
    PROPOSED plan exits 0 and each precondition line says the live state is unknown and
    why, in one line, never a traceback."""
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("PATH", str(tmp_path))  # no systemctl at all
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, detail_of(FAILED_APP)):
        assert main(["show", PLAN_ID, "--full"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "     precondition: app.service is failed: unknown" in lines
    [unreadable, _] = [line for line in lines if line.startswith("     live state unknown: ")]
    assert unreadable.startswith("     live state unknown: cannot read the state of app.service")
    assert "Traceback" not in captured.err + captured.out


def test_show_fits_100_columns_and_full_shows_it_whole() -> None:
    """A long goal, unit and reason: every line of ``show`` fits 100 columns (prose and
    the argv folded, the argv never cut: its lines hold it whole); with ``--full``
    nothing is folded and the argv line is whole."""
    live = Live(**{LONG_UNIT.split(".")[0]: unit(LONG_UNIT, "failed")})
    lines = show.render(shaped(LONG), live)
    assert max(len(line) for line in lines) <= 100
    at = next(i for i, line in enumerate(lines) if line.startswith("     run: "))
    argv = [lines[at], *takewhile(lambda line: line.startswith(" " * 10), lines[at + 1 :])]
    assert len(argv) == 2 and "…" not in "".join(argv)
    unbroken = "".join("".join(line.split()) for line in argv)  # broken where the line ends
    assert unbroken == f"run:systemctlstart--no-ask-password--{LONG_UNIT}"
    whole = show.render(shaped(LONG), live, full=True)
    assert f"     run: systemctl start --no-ask-password -- {LONG_UNIT}" in whole
    assert f"goal      {LONG.goal.strip()}" in [line.rstrip() for line in whole]


def test_argv_and_json_are_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--argv`` prints each argv whole, one a line, however long; ``--json`` the answer
    whole."""
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, detail_of(LONG, PlanState.REJECTED)):
        assert main(["show", PLAN_ID, "--argv"]) == 0
        assert capsys.readouterr().out == (f"systemctl start --no-ask-password -- {LONG_UNIT}\n")
        assert main(["show", PLAN_ID, "--json"]) == 0
    assert f'"goal": "{LONG.goal}"' in capsys.readouterr().out


def test_a_plan_beside_another_plans_sha256_is_refused_as_plain_json() -> None:
    """The check that the plan shown hashes to the sha256 shown, and that the argv shown
    is what its steps run, holds on the plain JSON show reads."""
    detail = shaped(FAILED_APP)
    show.check_detail(detail)
    forged = {**detail, "summary": {**detail["summary"], "sha256": "0" * 64}}
    with pytest.raises(ConsoleError, match="hashes to"):
        show.check_detail(forged)
    argv = [["systemctl", "stop", "--no-ask-password", "--", "app.service"], detail["argv"][1]]
    with pytest.raises(ConsoleError, match="argv it reports"):
        show.check_detail({**detail, "argv": argv})
