"""The demo's screen: every line it prints fits 100 columns, and --verbose keeps all of it."""

from __future__ import annotations

import pytest

from demo.main_job import WIDTH, Screen, journal_line

SHA = "3f2a9c01b7e4" + "0" * 52
#: A journal message as wide as the ones the demo used to print (616 columns).
WIDE = f"step.precheck plan_id=20261201-010203-0a1b2c3d sha256={SHA} argv='" + "x " * 250 + "'"


def test_a_wide_line_wraps_within_100_columns_and_loses_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 616-column output line is printed as several lines of at most 100 columns that
    hold every word of it."""
    Screen(verbose=False).line(WIDE)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) > 1
    assert max(len(line) for line in printed) <= WIDTH
    assert " ".join(printed).split() == WIDE.split()


def test_a_journal_entry_is_one_cut_line_with_a_short_sha256(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A journal entry becomes one line: UTC time, who, the message with the sha256 cut to
    12 hex digits, cut at 100 columns with "..."."""
    entry = {"__REALTIME_TIMESTAMP": "1764550923000000", "SYSLOG_IDENTIFIER": "opsbot-apply"}
    line = journal_line({**entry, "MESSAGE": WIDE})
    assert line.startswith("01:02:03Z opsbot-apply: step.precheck ")
    assert f"sha256={SHA[:12]}... " in line and SHA not in line
    Screen(verbose=False).cut(line)
    [printed] = capsys.readouterr().out.splitlines()
    assert len(printed) == WIDTH and printed.endswith("...")


def test_verbose_prints_every_line_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """With --verbose nothing is wrapped or cut."""
    screen = Screen(verbose=True)
    screen.line(WIDE)
    screen.cut(WIDE)
    assert capsys.readouterr().out.splitlines() == [WIDE, WIDE]
