"""``opsbot approve`` and ``opsbot archive-approvals`` as the operator meets them: on a
terminal approve shows the plan as root reads it (argv, sha256) and asks; without one it
takes ``--sha256 PREFIX`` or refuses in one line; in both it believes only the
executor's own plan.accepted journal entry. The journal is scripted at its one door
(plans.witness.system_journal); everything behind it runs for real."""

import io
from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import PlanStore, approval_path, used_dir, utcnow, write_approval
from tests.unit.console.scripted_journal import EXECUTOR_UID, ScriptedJournal, install
from tests.unit.plans.helpers import edit_record, plan_of, step, submitted

MALLORY = 1000


class Terminal(io.StringIO):
    """stdin on a terminal, where the operator types ``answer``."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def env(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    config = tmp_path / "opsbot.toml"
    config.write_text('[executor.allow]\nrestart_unit = ["nginx.service", "app.service"]\n')
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(store.root))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(approvals_dir))
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.delenv("SUDO_USER", raising=False)
    return config


@pytest.fixture
def journal(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    return install(monkeypatch)


def errors(err: str) -> list[str]:
    """The error lines, each whole (a long one is folded to 100 columns)."""
    return [line for line in unfold(err) if line.startswith("opsbot: error: ")]


def on_terminal(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))


def test_on_a_terminal_approve_shows_the_plan_and_asks(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`sudo opsbot approve ID` on a terminal prints the plan as root reads it now (its
    sha256's first 16 digits, each step as its argv and why) and asks; "y" approves it.
    (The whole review: test_console_approve_review.py.)"""
    record = submitted(store, plan_of(step("restart_unit", "nginx.service", reason="hung")))
    journal.accepted(record)
    on_terminal(monkeypatch, "y\n")
    assert main(["approve", record.plan_id]) == 0
    out = capsys.readouterr().out
    assert f"sha256    {record.sha256[:16]}… (whole in `opsbot show {record.plan_id}`" in out
    assert "\n     run: systemctl restart --no-ask-password -- nginx.service\n" in out
    assert "\n     why: hung\n" in out
    assert "\napproval  holds 3600 s from your yes\nApprove? [y/N] " in out
    assert f"approved plan {record.plan_id}" in out
    assert approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize("answer", ["\n", "n\n", "no\n", "", "yes please\n"])
def test_on_a_terminal_anything_but_yes_approves_nothing(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
) -> None:
    """Enter, "n", end of input or any other answer: exit 1, "was not approved", no
    approval file."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    on_terminal(monkeypatch, answer)
    assert main(["approve", record.plan_id]) == 1
    assert errors(capsys.readouterr().err) == [
        f"opsbot: error: plan {record.plan_id} was not approved: the answer was not yes"
    ]
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_on_a_terminal_a_rewritten_plan_is_refused_before_anything_is_asked(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The executor's uid rewrote the plan (sha256 recomputed) after it was accepted: the
    terminal never shows the rewritten plan for a "y"; approve refuses first."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    other = plan_of(step("restart_unit", "app.service"))
    edit_record(store, record.plan_id, plan=other.canonical().decode(), sha256=other.fingerprint())
    on_terminal(monkeypatch, "y\n")
    assert main(["approve", record.plan_id]) == 5
    out, err = capsys.readouterr()
    assert "Approve?" not in out
    assert "the stored plan was rewritten after it was accepted" in " ".join(unfold(err))
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_without_a_terminal_and_without_sha256_approve_refuses_in_one_line(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A script running `opsbot approve ID` (stdin not a terminal): exit 2 and one line
    saying to pass --sha256; nothing is written."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["approve", record.plan_id]) == 2
    err = capsys.readouterr().err
    assert unfold(err) == [
        "opsbot: error: no terminal to confirm on: pass --sha256 PREFIX",
        "opsbot: hint: at least 12 hex digits of the sha256 you reviewed "
        f"(`opsbot show {record.plan_id}`)",
    ]
    assert not approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize("given", ["abc123", "0123456789a", "xyz" * 4, "a" * 65])
def test_a_sha256_prefix_too_short_or_not_hex_is_a_usage_error(
    env: Path, store: PlanStore, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """--sha256 takes 12 to 64 hex digits; anything else exits 2 saying so."""
    record = submitted(store, plan_of())
    assert main(["approve", record.plan_id, "--sha256", given]) == 2
    assert errors(capsys.readouterr().err) == [
        f"opsbot: error: --sha256 takes at least 12 hex digits of the plan's sha256, not {given!r}"
    ]


def test_sha256_in_upper_case_or_in_full_is_accepted(
    env: Path, store: PlanStore, approvals_dir: Path, journal: ScriptedJournal
) -> None:
    """Copied in upper case, or the whole 64 digits: the same review."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:20].upper()]) == 0
    assert main(["approve", record.plan_id, "--sha256", record.sha256]) == 0


def test_with_sha256_a_plan_rewritten_since_the_review_is_refused(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The operator reviewed sha256 S and passes it; the stored plan is now S': exit 5 (refused),
    saying it changed since the review; nothing is approved."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    other = plan_of(step("restart_unit", "app.service"))
    edit_record(store, record.plan_id, plan=other.canonical().decode(), sha256=other.fingerprint())
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    assert "it changed since; nothing was approved" in capsys.readouterr().err
    assert not approval_path(approvals_dir, record.plan_id).exists()


@pytest.mark.parametrize(
    ("uid", "unit"),
    [
        (MALLORY, "opsbot-executor.service"),  # someone else's uid, whatever unit it claims
        (EXECUTOR_UID, "opsbot-apply.service"),  # the executor's uid from another unit
        (EXECUTOR_UID, "session-4.scope"),  # ... or from a shell
        (0, "opsbot-verify.service"),  # root, but not the executor's unit
    ],
)
def test_only_the_executors_unit_vouches_for_a_sha256(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
    uid: int,
    unit: str,
) -> None:
    """A plan file that never went through opsbot-executor.service (written into the
    store by the executor's uid, say), with a plan.accepted entry naming its sha256
    logged by anything but that unit as its user or root: the entry does not count, and
    approve refuses as if there were none."""
    record = submitted(store, plan_of())
    journal.accepted(record, uid=uid, unit=unit)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    assert "the executor never logged storing it" in capsys.readouterr().err
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_a_forged_entry_does_not_outvote_the_executors_own(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The executor's uid rewrites the plan and logs plan.accepted naming the new sha256
    from a shell: the executor's own entry still names the original, so approving the
    new sha256 is refused as a rewrite."""
    record = submitted(store, plan_of())
    journal.accepted(record)
    other = plan_of(step("restart_unit", "app.service"))
    edit_record(store, record.plan_id, plan=other.canonical().decode(), sha256=other.fingerprint())
    journal.accepted(record, other.fingerprint(), unit="session-4.scope")
    assert main(["approve", record.plan_id, "--sha256", other.fingerprint()[:12]]) == 5
    assert (
        f"opsbot-executor.service logged accepting {record.sha256[:16]}...: the stored plan "
        "was rewritten"
    ) in capsys.readouterr().err
    assert not approval_path(approvals_dir, record.plan_id).exists()


def test_an_entry_journald_had_not_written_yet_is_found_after_a_sync(
    env: Path, store: PlanStore, approvals_dir: Path, journal: ScriptedJournal
) -> None:
    """The plan was accepted a moment ago and journald has not written the entry yet:
    approve asks it to (journalctl --sync) and finds it."""
    record = submitted(store, plan_of())
    journal.pending.append(
        {
            "EVENT": "plan.accepted",
            "PLAN_ID": record.plan_id,
            "PLAN_SHA256": record.sha256,
            "_UID": EXECUTOR_UID,
            "_SYSTEMD_UNIT": "opsbot-executor.service",
        }
    )
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 0
    assert journal.syncs == 1


def test_without_any_entry_approve_refuses_and_hints_to_diagnose_again(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The journal holds nothing for the plan (rotated, or a plan that never went through
    the executor): exit 5 (refused), the reason in one line, a hint to diagnose again."""
    record = submitted(store, plan_of())
    journal.begins = record.submitted_at.replace(year=record.submitted_at.year - 1)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:12]]) == 5
    err = capsys.readouterr().err
    assert errors(err) == [
        f"opsbot: error: no plan.accepted entry of opsbot-executor.service for plan "
        f"{record.plan_id} in the journal: the executor never logged storing it"
    ]
    assert "opsbot: hint: diagnose again for a new plan" in err
    assert not approval_path(approvals_dir, record.plan_id).exists()


# -- opsbot archive-approvals ---------------------------------------------------------------


def test_archive_moves_approvals_with_a_marker_or_a_trusted_consumed_entry(
    env: Path,
    store: PlanStore,
    approvals_dir: Path,
    journal: ScriptedJournal,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three approvals: one whose consumed marker exists; one whose marker the executor's
    uid deleted but whose apply logged approval.consumed; one unused, with a forged
    approval.consumed from mallory. The first two move to used/, the third stays."""
    marked, unmarked, unused = (
        submitted(store, plan_of(step("restart_unit", unit)))
        for unit in ("nginx.service", "app.service", "worker@1.service")
    )
    for r in (marked, unmarked, unused):
        write_approval(approvals_dir, r, "alice", utcnow(), 600)
    assert store.consume(marked.plan_id, "0" * 64, "opsbot-executor", utcnow())
    journal.log(
        "approval.consumed", unmarked.plan_id, uid=EXECUTOR_UID, unit="opsbot-apply.service"
    )
    journal.log("approval.consumed", unused.plan_id, uid=MALLORY, unit="session-4.scope")
    assert main(["archive-approvals"]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in used_dir(approvals_dir).iterdir()) == sorted(
        [f"{marked.plan_id}.approval", f"{unmarked.plan_id}.approval"]
    )
    assert approval_path(approvals_dir, unused.plan_id).exists()
    assert f"{marked.plan_id}  approval used: moved to {used_dir(approvals_dir)}" in out
