"""The exit statuses scripts branch on (issue 13, item 5): one table
(shared_io/exit_codes.py) that --help prints and docs/operating.md shows, and what each verdict
of a diagnosis makes ``opsbot diagnose`` exit with. (End to end, in a booted systemd:
tests/integration/test_exit_codes.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opsbot_cli.diagnose import verdict_status
from opsbot_cli.main import build_parser
from shared_io.exit_codes import FAILED, OK, REFUSED, TABLE, WAITING, for_state, worst
from shared_schema.verdict import Cause, NoteVerdict

OPERATING = Path(__file__).resolve().parents[3] / "docs" / "operating.md"


def note(ended_by: str, kind: str | None = None) -> NoteVerdict:
    cause = Cause(kind=kind, unit="app.service") if kind else None  # type: ignore[arg-type]
    return NoteVerdict(
        run_id="r1",
        unit="app.service",
        steps_used=2,
        tokens=0,
        evidence=[],
        ended_by=ended_by,
        text="...",
        cause=cause,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("ended_by", "kind", "status"),
    [
        ("final_note", "healthy", 0),  # no change warranted
        ("final_note", "missing_file", 4),  # a human must act
        ("final_note", "not_allowed", 4),
        ("step_limit", "unknown", 4),  # stopped before a cause: a human looks
        ("cycle", None, 4),
        ("plan_rejected", None, 5),  # the executor refused what it proposed
        ("executor_error", None, 1),  # the diagnosis could not be carried to the executor
        ("policy_error", None, 1),  # the model endpoint was down
    ],
)
def test_each_way_a_diagnosis_ends_has_its_status(
    ended_by: str, kind: str | None, status: int
) -> None:
    """Every way a diagnosis can end makes `opsbot diagnose` exit with its status from the
    table: 0 when no change is warranted, 4 when a human must look, 5 when the executor
    refused the plan, 1 when the diagnosis could not reach the executor or the model."""
    assert verdict_status(note(ended_by, kind)) == status


def test_help_prints_the_table_and_the_manual_shows_the_same_codes() -> None:
    """`opsbot --help` ends with every status and its meaning; docs/operating.md's table
    lists exactly the same statuses."""
    text = build_parser().format_help()
    for code, what in TABLE:
        assert f"  {code:<3} {what}" in text
    table = OPERATING.read_text().split("<!-- exit-codes -->", 1)[1].split("\n\n", 1)[0]
    in_manual = [int(m) for m in re.findall(r"^\| `(\d+)` \|", table, re.M)]
    assert in_manual == [code for code, _ in TABLE]


def test_the_worst_outcome_wins_and_states_map_to_their_status() -> None:
    """Over several plans the status that says most: a failure over a refusal over a
    plan waiting; a plan not at its end yet has no status of its own."""
    assert worst() == OK
    assert worst(OK, WAITING, REFUSED, OK) == REFUSED
    assert worst(WAITING, FAILED, REFUSED) == FAILED
    assert [for_state(s) for s in ("VERIFIED", "UNRESOLVED", "STALE", "APPLIED")] == [
        OK,
        FAILED,
        REFUSED,
        None,
    ]


def test_a_status_outside_the_table_reaches_a_script_as_1() -> None:
    """A daemon's own sysexits value (74: a store that cannot be written) is an error to
    a script reading the table, not a status of its own."""
    from opsbot_cli.main import documented

    assert [documented(s) for s in (0, 3, 5, 6, 78, 74, 69, 70)] == [0, 3, 5, 6, 78, 1, 1, 1]


def test_a_plan_that_could_not_be_read_is_an_error_not_a_wait() -> None:
    """An outcome the apply could not judge (its files unreadable) makes apply and its dry
    run exit 1, not 3 as if it waited for approval; at a timeout, a plan whose steps ran
    but is not verified is 6, one not yet approved 3."""
    from opsbot_cli.apply import _dry_status, _plan_status
    from shared_io.exit_codes import at_timeout

    broken = {
        "plan_id": "x",
        "state": "PROPOSED",
        "message": "cannot read",
        "argv": [],
        "ran": False,
        "error": True,
    }
    assert (_plan_status(broken), _dry_status(broken)) == (1, 1)
    assert [at_timeout(s) for s in ("PROPOSED", "APPROVED", "APPLYING", "APPLIED")] == [3, 3, 6, 6]
