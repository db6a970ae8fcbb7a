"""``sudo opsbot approve ID`` on a terminal, as root reviews a plan before typing "y": a
compact review in the spirit of ``terraform plan``: the plan's id, the host, its sha256
(short; whole in ``--json``), each step as ``opsbot show`` prints it (the argv it runs, its
precondition said against the unit's live state, why, folded to ``$COLUMNS`` and never
wider than 100), when it would run, then ``Approve? [y/N]``.

Everything behind ``main`` runs for real but two doors: the system journal (scripted at
plans.witness, as in test_console_approve.py) and systemctl's answer to ``systemctl
show`` (scripted at the one runner shared_io.unit_show calls)."""

from __future__ import annotations

import io
import json
import socket
from itertools import takewhile
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli import approve, show, wire
from opsbot_cli.main import main
from plans import Accepted, PlanStore, approval_path, review
from shared_io.run import RunResult
from shared_io.unit_show import UnitState
from shared_schema import PlanState, encode_message
from testbed.canned_executor import detail_of
from testbed.readme import OPERATING, block
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import NOW, plan_of, step, submitted

INVOCATION = "0123456789abcdef0123456789abcdef"
#: What diagnosis wrote as the step's reason: one line of about 230 columns.
WHY = (
    "app.service exited 1 after its config changed at 22:31; nginx answers 502 to every "
    "request while it is down, and the unit is failed with Result=exit-code, so a restart "
    "brings it back as it was at its last start"
)
RESTART_FAILED_APP = plan_of(
    step(
        "restart_unit",
        "app.service",
        expect={"active_state": ["failed"], "invocation_id": INVOCATION},
        reason=WHY,
    ),
    goal="Bring app.service back behind nginx",
)


class Terminal(io.StringIO):
    """stdin on a terminal, where the operator types the answer."""

    def isatty(self) -> bool:
        return True


class Systemctl:
    """What ``systemctl show`` answers for each unit (by the name before the dot); the
    units it was asked about."""

    def __init__(self, **states: tuple[str, str, str]) -> None:
        self.states = states
        self.asked: list[str] = []

    def __call__(self, argv: list[str], **_: Any) -> RunResult:
        unit = argv[-1]
        self.asked.append(unit)
        active, sub, invocation = self.states[unit.split(".")[0]]
        said = (
            f"LoadState=loaded\nActiveState={active}\nSubState={sub}\nInvocationID={invocation}\n"
        )
        return RunResult(tuple(argv), 0, said, "", 0.01)


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    config = tmp_path / "opsbot.toml"
    config.write_text('[executor.allow]\nrestart_unit = ["app.service"]\n')
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return config


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


def systemctl_says(monkeypatch: pytest.MonkeyPatch, **states: tuple[str, str, str]) -> Systemctl:
    said = Systemctl(**states)
    monkeypatch.setattr("shared_io.unit_show.run", said)
    return said


def reviewed_on_a_terminal(
    record_id: str, answer: str, monkeypatch: pytest.MonkeyPatch, capsys: Any, *argv: str
) -> tuple[int, list[str]]:
    """``opsbot approve ID ARGV`` answered with ``answer``: its status, and the lines
    printed up to and with the question."""
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    status = main(["approve", record_id, *argv])
    out = capsys.readouterr().out
    asked, _, _ = out.partition("Approve? [y/N] ")
    return status, [*asked.splitlines(), "Approve? [y/N] "]


def test_the_review_reads_like_a_plan_and_fits_100_columns(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """app.service failed as diagnosis saw it: the review names the plan, this host and
    the sha256's first 16 digits (not the whole), says the step as its argv, each
    precondition against the live state ("app.service is failed now: as expected"),
    never as raw JSON, folds the 230-column reason under "why", says it runs at once and
    for how long the approval holds, and asks; every line fits 100 columns."""
    record = submitted(store, RESTART_FAILED_APP)
    journal.accepted(record)
    systemctl_says(monkeypatch, app=("failed", "failed", INVOCATION))
    status, lines = reviewed_on_a_terminal(record.plan_id, "y\n", monkeypatch, capsys)
    assert status == 0
    assert lines[:6] == [
        f"plan      {record.plan_id} (PROPOSED)",
        f"host      {socket.gethostname()}",
        f"sha256    {record.sha256[:16]}… (whole in `opsbot show {record.plan_id}` and in --json)",
        "goal      Bring app.service back behind nginx",
        f"submitted {NOW.astimezone():%Y-%m-%d %H:%M:%S %Z} by opsbot-diagnose",
        "steps (each runs as this argv, no shell):",
    ]
    assert lines[6:10] == [
        "  1. app.service: failed -> restart",
        "     run: systemctl restart --no-ask-password -- app.service",
        "     precondition: app.service is failed now: as expected",
        "     precondition: app.service has not been started again since diagnosis: as expected",
    ]
    why = lines[10:13]  # the 230 columns of reason, folded under "why:"
    assert why[0].startswith("     why: app.service exited 1 after its config changed")
    assert all(line.startswith("       ") and line[7] != " " for line in why[1:])
    assert " ".join(line.strip() for line in why) == f"why: {WHY}"
    assert lines[13:] == [
        "runs      at once (no apply window is set)",
        "approval  holds 3600 s from your yes",
        "Approve? [y/N] ",
    ]
    assert max(len(line) for line in lines) <= 100
    assert record.sha256 not in "\n".join(lines)
    assert approval_path(approvals_dir, record.plan_id).exists()


def test_a_unit_that_recovered_is_said_not_as_expected(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """app.service came back by itself (active, another invocation): each precondition
    says what the unit is now and that this is not what the plan expects, and a note says
    the apply would find the plan STALE, before anyone types "y"."""
    record = submitted(store, RESTART_FAILED_APP)
    journal.accepted(record)
    systemctl_says(monkeypatch, app=("active", "running", "f" * 32))
    status, lines = reviewed_on_a_terminal(record.plan_id, "n\n", monkeypatch, capsys)
    assert status == 1
    said = " ".join(line.strip() for line in lines)
    assert (
        "precondition: app.service is active now: not as expected (the plan expects failed)"
    ) in said
    assert (
        "precondition: app.service was started again since diagnosis: not as expected "
        "(invocation ffffffffffff now, 0123456789ab at diagnosis)"
    ) in said
    assert (
        "note      a precondition is not as expected now: the apply would find the plan STALE"
    ) in lines
    assert max(len(line) for line in lines) <= 100
    assert not approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize(("columns", "widest"), [("60", 60), ("300", 100), ("wide", 100)])
def test_the_review_folds_to_the_terminal_and_never_past_100_columns(
    env: Path,
    store: PlanStore,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    columns: str,
    widest: int,
) -> None:
    """On a terminal 60 columns wide the review folds to 60; one of 300 columns (or a
    COLUMNS that is not a number) still gets at most 100."""
    record = submitted(store, RESTART_FAILED_APP)
    journal.accepted(record)
    systemctl_says(monkeypatch, app=("failed", "failed", INVOCATION))
    monkeypatch.setenv("COLUMNS", columns)
    _, lines = reviewed_on_a_terminal(record.plan_id, "n\n", monkeypatch, capsys)
    assert max(len(line) for line in lines) <= widest
    assert max(len(line) for line in lines) > widest - 10  # folded to it, not far short


def test_approve_and_show_print_a_step_the_same_way(store: PlanStore, approvals_dir: Path) -> None:
    """One place prints a step: for the same plan and the same live state, the lines of
    its step in the approve review are the lines ``opsbot show`` prints for it."""
    record = submitted(store, RESTART_FAILED_APP)
    witnessed = Accepted(frozenset({record.sha256}), NOW)
    reviewed = review(store, approvals_dir, record.plan_id, witnessed)

    def read(unit: str) -> UnitState:
        return UnitState(unit, "loaded", "active", "running", "f" * 32)

    on_approve = approve.review_lines(reviewed, read, runs="at once", holds="-", width=100)
    detail = wire.plan_detail(
        wire.decode_reply(encode_message(detail_of(RESTART_FAILED_APP, PlanState.PROPOSED)))
    )
    assert isinstance(detail, dict)
    on_show = show.render(detail, read)
    first = on_show.index("  1. app.service: failed -> restart")
    step_lines = list(takewhile(lambda line: line.startswith("  "), on_show[first:]))
    assert any(line.startswith("     why: ") for line in step_lines)  # the whole step
    assert on_approve[6 : 6 + len(step_lines)] == step_lines


def test_json_carries_the_whole_sha256_at_its_top(
    env: Path,
    store: PlanStore,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The review shows 16 digits; ``--json`` has the plan's id and its whole sha256 at
    its top level, where ``opsbot plans --json`` and ``opsbot show --json`` have them."""
    record = submitted(store, RESTART_FAILED_APP)
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12], "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["plan_id"], said["sha256"]) == (record.plan_id, record.sha256)


def test_the_manual_shows_the_review_as_approve_prints_it(
    store: PlanStore, approvals_dir: Path
) -> None:
    """docs/operating.md's review (<!-- approve-review -->) is what approve prints for its
    plan, but for the plan's id, sha256 and submission time, which are this test's."""
    shown = block("approve-review", doc=OPERATING).splitlines()
    plan_id, sha = shown[0].split()[1], shown[2].split()[1].removesuffix("…")
    why = "app.service exited 1 after its config changed at 22:31; nginx answers 502 to every "
    plan = plan_of(
        step(
            "restart_unit",
            "app.service",
            expect={"active_state": ["failed"], "invocation_id": INVOCATION},
            reason=why + "request while it is down, and the unit is failed with Result=exit-code",
        ),
        goal="Bring app.service back behind nginx",
    )
    record = submitted(store, plan)
    reviewed = review(
        store, approvals_dir, record.plan_id, Accepted(frozenset({record.sha256}), NOW)
    )

    def read(unit: str) -> UnitState:
        return UnitState(unit, "loaded", "failed", "failed", INVOCATION)

    lines = approve.review_lines(
        reviewed,
        read,
        runs=approve.runs_words(False, False, None, NOW),
        holds="holds 3600 s from your yes",
        width=100,
        host="web1",
    )
    printed = "\n".join([*lines, "Approve? [y/N]"])
    printed = printed.replace(record.plan_id, plan_id).replace(record.sha256[:16], sha)
    printed = printed.replace(f"{NOW.astimezone():%Y-%m-%d %H:%M:%S %Z}", "2026-12-01 22:34:48 UTC")
    assert printed.splitlines() == shown
