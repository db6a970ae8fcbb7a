"""``sudo opsbot apply`` starts opsbot-apply.service and reports what that run did, from
the unit's journal: only entries journald attributes to that unit, from the executor's
user or root, count; the first ``apply.outcomes`` ends the report; a failed run's own
line and exit status reach the operator. (Starting the unit for real and the steps
running as the executor's user: tests/attacks/test_attack_polkit.py.)"""

import json
from typing import Any

import pytest

from opsbot_cli.apply import ApplyReport, _plan_status, _summary
from opsbot_cli.errors import ConsoleError
from plans import APPLY_UNIT
from shared_io.run import RunResult

EXECUTOR_UID = 998
TRUSTED = frozenset({0, EXECUTOR_UID})
PLAN = "20261129-213500-1a2b3c4d"


def outcome(state: str = "APPLIED", ran: bool = True, message: str = "1 step(s) ran") -> Any:
    return {"plan_id": PLAN, "state": state, "message": message, "argv": [], "ran": ran}


def entry(event: str, unit: str = APPLY_UNIT, uid: int = EXECUTOR_UID, **fields: Any) -> Any:
    return {"_SYSTEMD_UNIT": unit, "_UID": uid, "EVENT": event, **fields}


def outcomes_entry(*outcomes: Any, **kw: Any) -> Any:
    return entry("apply.outcomes", OUTCOMES=json.dumps(list(outcomes)), **kw)


def started(status: int) -> RunResult:
    stderr = "" if status == 0 else "Job for opsbot-apply.service failed.\n"
    return RunResult(("systemctl", "start", APPLY_UNIT), status, "", stderr, 0.1)


def shown(report: ApplyReport) -> tuple[int, list[Any]]:
    """The exit status and the outcomes shown (verification already in their states)."""
    seen: list[Any] = []

    def show(outcomes: list[Any]) -> int:
        seen.extend(outcomes)
        return max((_plan_status(o) for o in outcomes), default=0)

    return report.exit_status(show), seen


def test_the_runs_outcomes_are_shown_and_a_failed_step_exits_6() -> None:
    """The run's apply.outcomes is what the operator sees; a plan whose step failed makes
    the exit status 6 (the unit itself exited 1 for it: not an error of the run); a
    verified plan beside one waiting for approval makes it 3."""
    report = ApplyReport(TRUSTED, started=started(1))
    report.take(outcomes_entry(outcome("FAILED")))
    assert shown(report) == (6, [outcome("FAILED")])

    ok = ApplyReport(TRUSTED, started=started(0))
    ok.take(outcomes_entry(outcome("VERIFIED"), outcome("PROPOSED", ran=False)))
    assert shown(ok) == (3, [outcome("VERIFIED"), outcome("PROPOSED", ran=False)])


@pytest.mark.parametrize(
    ("state", "ran", "status"),
    [
        ("VERIFIED", True, 0),
        ("UNRESOLVED", True, 6),
        ("APPLIED", True, 6),  # not verified when the wait ended: not known to be fixed
        ("FAILED", True, 6),
        ("STALE", False, 5),
        ("EXPIRED", False, 5),
        ("APPROVED", False, 5),  # its approval was refused
        ("PROPOSED", False, 3),
        ("INTERRUPTED", False, 6),
    ],
)
def test_each_end_of_a_plan_has_its_exit_status(state: str, ran: bool, status: int) -> None:
    """What a script reads off ``opsbot apply`` for each way a plan can end the run."""
    assert _plan_status(outcome(state, ran=ran)) == status


def test_the_summary_counts_plans_steps_and_failures() -> None:
    """One closing line like terraform's, counting what ran and how it ended."""
    two = {**outcome("VERIFIED"), "argv": [["systemctl", "restart", "a"], ["x"]]}
    failed = {**outcome("FAILED"), "argv": [["systemctl", "start", "b"]]}
    waiting = outcome("PROPOSED", ran=False)
    assert _summary([two, failed, waiting]) == (
        "Apply complete: 3 plans (1 FAILED, 1 PROPOSED, 1 VERIFIED), 2 ran 3 steps, 1 failed"
    )
    assert _summary([]) == "Apply complete: 0 plans (nothing to do), 0 ran 0 steps, 0 failed"


def test_entries_from_another_unit_or_user_are_not_believed() -> None:
    """Anyone can log EVENT=apply.outcomes; journald's _SYSTEMD_UNIT and the kernel's
    _UID cannot be forged: a forgery from the executor's daemon, a user's session, or
    another uid in a unit of that name is ignored."""
    report = ApplyReport(TRUSTED, started=started(0))
    report.take(outcomes_entry(outcome("APPLIED"), unit="opsbot-executor.service"))
    report.take(outcomes_entry(outcome("APPLIED"), unit="session-3.scope", uid=1000))
    report.take(outcomes_entry(outcome("APPLIED"), uid=1000))
    assert report.outcomes is None
    report.take(outcomes_entry(outcome("PROPOSED", ran=False), uid=0))
    assert shown(report) == (3, [outcome("PROPOSED", ran=False)])


def test_the_first_outcomes_end_the_report() -> None:
    """The run apply waited for ends with its apply.outcomes; what a later run (the timer,
    the path unit) logs after it is not part of this report."""
    steps: list[Any] = []
    report = ApplyReport(TRUSTED, on_step=steps.append, started=started(0))
    report.take(entry("step.finished", PLAN_ID=PLAN, STEP="1", OUTCOME="ok"))
    report.take(outcomes_entry(outcome("VERIFIED")))
    report.take(entry("step.finished", PLAN_ID=PLAN, STEP="1", OUTCOME="failed"))
    report.take(outcomes_entry(outcome("FAILED")))
    assert [s["OUTCOME"] for s in steps] == ["ok"]
    assert shown(report) == (0, [outcome("VERIFIED")])


def test_a_run_that_failed_says_why_with_its_own_exit_status() -> None:
    """A bad config stops the run before any plan: its apply.failed line is the error,
    with its hint, and the exit status is the run's (78, EX_CONFIG)."""
    report = ApplyReport(TRUSTED, started=started(1))
    report.take(
        entry(
            "apply.failed",
            ERROR="/etc/opsbot/opsbot.toml: executor.allow: bad",
            HINT="see README.md",
            EXIT_STATUS="78",
        )
    )
    with pytest.raises(ConsoleError) as caught:
        shown(report)
    assert caught.value.message == f"{APPLY_UNIT}: /etc/opsbot/opsbot.toml: executor.allow: bad"
    assert (caught.value.hint, caught.value.exit_status) == ("see README.md", 78)


def test_a_run_that_left_no_outcomes_is_an_error() -> None:
    """systemctl failed and the unit logged nothing of ours: systemctl's line, and where
    to look; a run that succeeded without outcomes is an error too, never a silent 0."""
    failed = ApplyReport(TRUSTED, started=started(1))
    with pytest.raises(ConsoleError) as caught:
        shown(failed)
    assert "Job for opsbot-apply.service failed." in caught.value.message
    assert caught.value.hint == f"journalctl -u {APPLY_UNIT} -n 30"
    with pytest.raises(ConsoleError, match="holds no outcomes"):
        shown(ApplyReport(TRUSTED, started=started(0)))


def test_unreadable_outcomes_are_an_error() -> None:
    """An apply.outcomes whose OUTCOMES is not a list of objects is refused, not shown."""
    report = ApplyReport(TRUSTED)
    with pytest.raises(ConsoleError, match="cannot be read"):
        report.take(entry("apply.outcomes", OUTCOMES="[1, 2"))
