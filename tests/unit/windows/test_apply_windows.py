"""Apply windows as the operator writes them (``[[executor.apply_window]]``: a systemd
calendar start and a duration), evaluated by the real ``systemd-analyze calendar`` with
the clock injected as its ``--base-time``: whether a window is open, when the next one
opens, how long an approval made for it holds. The host's clock is never touched.

2026-12-01 is a Tuesday."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from plans import CalendarError, NoApplyWindow
from plans.windows import (
    MAX_STARTS,
    WindowState,
    approval_expiry,
    lifetime_ceiling,
    parse_elapses,
    runs_when,
    systemd_analyze,
    window_state,
)
from shared_schema.config import ApplyWindow
from shared_schema.limits import APPROVAL_CEILING_SECONDS

TTL = 3600
WEEKDAYS = [ApplyWindow(start="Mon..Fri 02:00", duration="2h")]


def at(day: int, hour: int, minute: int = 0, second: int = 0, month: int = 12) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def windows(*pairs: tuple[str, str]) -> list[ApplyWindow]:
    return [ApplyWindow(start=start, duration=duration) for start, duration in pairs]


@pytest.fixture(autouse=True)
def _host_zone_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd-analyze evaluates in the zone it is given (TZ, passed on by shared_io.run):
    UTC here unless a test says otherwise, whatever the machine running the tests uses."""
    monkeypatch.setenv("TZ", "UTC")


# -- open or not ----------------------------------------------------------------------------


def test_inside_a_window_it_is_open_until_its_end() -> None:
    """Tuesday 03:00 is inside "Mon..Fri 02:00" for 2h: open, closing at 04:00."""
    assert window_state(WEEKDAYS, at(1, 3)) == WindowState(True, at(1, 2), at(1, 4))


def test_a_window_is_its_start_up_to_but_not_including_its_end() -> None:
    """02:00:00 is inside; 01:59:59 and 04:00:00 are not, and then the next window is
    said: today's at 02:00, tomorrow's after 04:00."""
    assert window_state(WEEKDAYS, at(1, 2)).open
    assert window_state(WEEKDAYS, at(1, 1, 59, 59)) == WindowState(False, at(1, 2), at(1, 4))
    assert window_state(WEEKDAYS, at(1, 4)) == WindowState(False, at(2, 2), at(2, 4))


def test_outside_a_window_it_says_when_the_next_opens() -> None:
    """Tuesday 18:36: closed; the next window is Wednesday 02:00 to 04:00."""
    assert window_state(WEEKDAYS, at(1, 18, 36)) == WindowState(False, at(2, 2), at(2, 4))


def test_weekday_windows_skip_the_weekend() -> None:
    """After Friday's window, and all Saturday, the next one is Monday's."""
    monday = WindowState(False, at(7, 2), at(7, 4))
    assert window_state(WEEKDAYS, at(4, 5)) == monday
    assert window_state(WEEKDAYS, at(5, 12)) == monday


def test_a_window_across_midnight_is_open_after_midnight() -> None:
    """ "Fri 23:00" for 4h: open on Saturday at 02:00 (it began on Friday), until 03:00;
    closed at 03:00, the next one a week later."""
    friday_night = windows(("Fri 23:00", "4h"))
    assert window_state(friday_night, at(5, 2)) == WindowState(True, at(4, 23), at(5, 3))
    assert window_state(friday_night, at(5, 3)) == WindowState(False, at(11, 23), at(12, 3))


def test_a_duration_longer_than_the_gap_between_starts_is_one_window() -> None:
    """Starts at 02:00 and 03:00, each for 90min: one window from 02:00 to 04:30. At 03:45
    the 02:00 one is over, the 03:00 one is not: open, until 04:30."""
    overlapping = windows(("*-*-* 02,03:00", "90min"))
    assert window_state(overlapping, at(1, 3, 15)) == WindowState(True, at(1, 2), at(1, 4, 30))
    assert window_state(overlapping, at(1, 3, 45)).closes_at == at(1, 4, 30)
    assert not window_state(overlapping, at(1, 4, 30)).open


def test_two_windows_the_nearest_counts_and_touching_ones_join() -> None:
    """Weekdays 02:00-04:00 and weekends 10:00-11:00: on Friday at 05:00 the next is
    Saturday's; 02:00 for 1h and 03:00 for 1h are one window, 02:00 to 04:00."""
    both = windows(("Mon..Fri 02:00", "2h"), ("Sat,Sun 10:00", "1h"))
    assert window_state(both, at(4, 5)) == WindowState(False, at(5, 10), at(5, 11))
    assert window_state(both, at(1, 3)).open
    touching = windows(("*-*-* 03:00", "1h"), ("*-*-* 02:00", "1h"))
    assert window_state(touching, at(1, 2, 30)) == WindowState(True, at(1, 2), at(1, 4))


def test_no_window_configured_is_always_open() -> None:
    """Without [executor.apply_window] plans run at once, as before."""
    assert window_state([], at(1, 18)) == WindowState(True, None, None)
    assert runs_when([], at(1, 18)) == "at once"


def test_calendar_expressions_are_in_the_hosts_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a host in Europe/Berlin (CET in December), "Mon..Fri 02:00" is 01:00 UTC; a
    start that names UTC stays 02:00 UTC. The times come back in UTC either way."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert window_state(WEEKDAYS, at(1, 0, 30)) == WindowState(False, at(1, 1), at(1, 3))
    assert window_state(WEEKDAYS, at(1, 2, 30)) == WindowState(True, at(1, 1), at(1, 3))
    in_utc = windows(("Mon..Fri 02:00 UTC", "2h"))
    assert window_state(in_utc, at(1, 0, 30)) == WindowState(False, at(1, 2), at(1, 4))


def test_a_window_further_than_seven_days_is_no_window() -> None:
    """A one-off start in June 2027, seen from December 2026: none within 7 days."""
    far = windows(("2027-06-01 02:00", "2h"))
    assert window_state(far, at(1, 18)) == WindowState(False, None, None)


def test_a_window_that_opens_very_often_is_cut_not_trusted_further() -> None:
    """A start every minute for 2 minutes (always open): systemd-analyze is asked a
    bounded number of times and the window is taken to end no later than it does."""
    calls: list[int] = []

    def counted(expression: str, base: datetime, iterations: int) -> Sequence[datetime]:
        calls.append(iterations)
        return systemd_analyze(expression, base, iterations)

    now = at(1, 12, 0, 30)
    state = window_state(windows(("*:*", "2min")), now, analyze=counted)
    assert state.open and state.closes_at is not None
    assert now < state.closes_at <= now + timedelta(minutes=MAX_STARTS + 2)
    assert sum(calls) <= MAX_STARTS and len(calls) <= 5


# -- how long an approval holds -------------------------------------------------------------


def test_an_approval_outside_its_window_holds_until_the_windows_end() -> None:
    """Approved Tuesday 18:36 for "Mon..Fri 02:00" 2h: it holds until Wednesday 04:00; the
    apply's ceiling for it is the same lifetime."""
    now = at(1, 18, 36, 12)
    assert approval_expiry(WEEKDAYS, now, TTL) == at(2, 4)
    assert lifetime_ceiling(WEEKDAYS, now, TTL) == (at(2, 4) - now).total_seconds()


def test_an_approval_inside_its_window_or_without_windows_holds_for_the_ttl() -> None:
    """Inside a window, with none configured, or with --now: approval_ttl_seconds."""
    inside = at(1, 3)
    assert approval_expiry(WEEKDAYS, inside, TTL) == inside + timedelta(seconds=TTL)
    assert approval_expiry([], at(1, 18), TTL) == at(1, 19)
    assert approval_expiry(WEEKDAYS, at(1, 18), TTL, override=True) == at(1, 19)
    assert lifetime_ceiling(WEEKDAYS, at(1, 18), TTL, override=True) == TTL


def test_an_approval_holds_at_least_the_ttl_and_at_most_seven_days() -> None:
    """Approved at 01:30: with a 2 h TTL (03:30) the window's end, 04:00, is later, so
    04:00; with a 3 h TTL, 04:30. A window that opens in 6 days and lasts 3 days: cut at
    7 days from the approval."""
    assert approval_expiry(WEEKDAYS, at(1, 1, 30), 7200) == at(1, 4)
    assert approval_expiry(WEEKDAYS, at(1, 1, 30), 3 * 3600) == at(1, 4, 30)
    long_one = windows(("2026-12-07 18:00", "3d"))
    now = at(1, 18)
    assert approval_expiry(long_one, now, TTL) == now + timedelta(days=7)
    assert lifetime_ceiling(long_one, now, TTL) == APPROVAL_CEILING_SECONDS


def test_no_window_within_seven_days_refuses_the_approval_saying_what_to_do() -> None:
    """Nothing to approve for: the error names `opsbot approve --now` and the config."""
    far = windows(("2027-06-01 02:00", "2h"))
    with pytest.raises(NoApplyWindow) as caught:
        approval_expiry(far, at(1, 18), TTL)
    assert caught.value.message.startswith("no apply window opens within 7 days (before ")
    assert caught.value.hint is not None
    assert "`opsbot approve --now`" in caught.value.hint
    assert "[executor.apply_window]" in caught.value.hint
    assert approval_expiry(far, at(1, 18), TTL, override=True) == at(1, 19)


# -- in words, and what systemd prints -------------------------------------------------------


def test_runs_when_says_at_once_or_the_window() -> None:
    """The words `opsbot approve` and the dry run use."""
    assert runs_when(WEEKDAYS, at(1, 3)) == "at once"
    assert (
        runs_when(WEEKDAYS, at(1, 18)) == "in its apply window, Wed 2026-12-02 02:00 UTC to 04:00"
    )
    across = windows(("Fri 23:00", "4h"))
    assert runs_when(across, at(1, 18)) == (
        "in its apply window, Fri 2026-12-04 23:00 UTC to Sat 2026-12-05 03:00 UTC"
    )
    assert runs_when(windows(("2027-06-01 02:00", "2h")), at(1, 18)).startswith("not within 7 days")


def test_a_calendar_systemd_refuses_is_a_calendar_error() -> None:
    """A typo in the start: systemd-analyze's own words, and where to fix it."""
    with pytest.raises(CalendarError) as caught:
        window_state(windows(("Mon..Fri 25:00", "2h")), at(1, 18))
    assert caught.value.message.startswith(
        "apply window start 'Mon..Fri 25:00': systemd-analyze calendar refused it: "
    )
    assert caught.value.exit_status == 78


def test_the_utc_line_wins_over_the_local_one() -> None:
    """systemd prints local times and, outside UTC, an "(in UTC)" line after each;
    without it the local zone is UTC. "never" ends the list."""
    berlin = """  Original form: Mon..Fri 02:00
Normalized form: Mon..Fri *-*-* 02:00:00
    Next elapse: Wed 2026-12-02 02:00:00 CET
       (in UTC): Wed 2026-12-02 01:00:00 UTC
       From now: 6h left
       Iter. #2: Thu 2026-12-03 02:00:00 CET
       (in UTC): Thu 2026-12-03 01:00:00 UTC
"""
    assert parse_elapses(berlin, "x") == [at(2, 1), at(3, 1)]
    utc = (
        "    Next elapse: Wed 2026-12-02 02:00:00 UTC\n"
        "       Iter. #2: Thu 2026-12-03 02:00:00 UTC\n"
    )
    assert parse_elapses(utc, "x") == [at(2, 2), at(3, 2)]
    assert parse_elapses("    Next elapse: never\n", "x") == []
