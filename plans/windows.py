"""Apply windows: when approved plans may run (``[executor.apply_window]``).

Each window is a start, a systemd calendar expression in the host's own time zone (as a
timer's ``OnCalendar=``), and a duration: ``start = "Mon..Fri 02:00"``, ``duration =
"2h"`` is 02:00 to 04:00 on weekdays. opsbot never parses a calendar expression itself:
:func:`systemd_analyze` asks ``systemd-analyze calendar --base-time=`` for the next
elapses after a given instant (so a test injects its clock as that instant, and the real
systemd computes), and reads the UTC times it prints.

The window open at ``t`` is found from below: the first elapse after ``t - duration``
starts a window that ends after ``t``; if it began at or before ``t``, ``t`` is inside it.
Windows that overlap or touch (two of them, or one whose duration is longer than the
gap between its starts) are one window, from the first start to the last end. Nothing
further than 7 days (APPROVAL_CEILING_SECONDS) is looked at: an approval never holds
longer, so a window that far away is no window for it.

What follows from a window, in one place:

- :func:`window_state`: open now (until when), or when the next one opens;
- :func:`approval_expiry`: an approval made outside its window holds until that window's
  end (at least ``approval_ttl_seconds``, at most 7 days); inside it, or with ``opsbot
  approve --now``, for ``approval_ttl_seconds``;
- :func:`lifetime_ceiling`: the longest the apply lets an approval made at ``approved_at``
  hold (the same rule, so a forged long approval is refused);
- :func:`runs_when`: when an approved plan will run, in words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from plans.errors import CalendarError, NoApplyWindow
from shared_io.run import run
from shared_schema.limits import APPROVAL_CEILING_SECONDS

if TYPE_CHECKING:  # the console says when a window opens without building the config
    from shared_schema.config import ApplyWindow

__all__ = [
    "Analyzer",
    "HORIZON",
    "WindowState",
    "approval_expiry",
    "at_text",
    "check_calendar",
    "intervals",
    "lifetime_ceiling",
    "runs_when",
    "span_text",
    "state_text",
    "systemd_analyze",
    "wait_text",
    "window_state",
]

#: How far ahead windows are looked for: the longest an approval may hold.
HORIZON = timedelta(seconds=APPROVAL_CEILING_SECONDS)
#: The elapses asked of systemd-analyze at first, and at most in all per window (a window
#: that opens more often than this within 7 days is cut at its last start seen: it is
#: then taken to end earlier than it does, never later).
FIRST_BATCH = 16
MAX_STARTS = 1024
#: Seconds systemd-analyze may take.
ANALYZE_TIMEOUT = 10.0
#: Where to fix a calendar expression.
WHERE = "[executor.apply_window] in opsbot.toml"

#: ``(expression, base, iterations)`` -> the next elapses of ``expression`` strictly after
#: ``base``, at most ``iterations`` of them, ascending, aware (UTC).
Analyzer = Callable[[str, datetime, int], Sequence[datetime]]


@dataclass(frozen=True)
class WindowState:
    """Whether an apply window is open at some instant.

    ``open``: one is (always so when no window is configured); ``closes_at`` is its end
    and ``opens_at`` its start. Closed: ``opens_at``/``closes_at`` are the next window's,
    both None when none opens within 7 days.
    """

    open: bool
    opens_at: datetime | None
    closes_at: datetime | None


# -- systemd-analyze ------------------------------------------------------------------------


def _elapse(value: str, expression: str) -> datetime:
    """``Wed 2026-12-02 02:00:00 UTC`` (the zone word is dropped: see the caller)."""
    text = value.rsplit(" ", 1)[0]
    try:
        return datetime.strptime(text, "%a %Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError as exc:
        raise CalendarError(
            f"systemd-analyze calendar {expression!r} printed {value[:60]!r}, not a time"
        ) from exc


def parse_elapses(output: str, expression: str) -> list[datetime]:
    """The elapses in what ``systemd-analyze calendar --iterations=N`` printed.

    Each is a ``Next elapse:`` or ``Iter. #N:`` line in the local zone, followed by an
    ``(in UTC):`` line unless the local zone is UTC (or another zone at offset 0 with no
    daylight saving time, where systemd prints none): that line wins; without it, the
    local time is the UTC time. ``never`` ends the list.
    """
    elapses: list[datetime] = []
    for line in output.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "Next elapse" or key.startswith("Iter. #"):
            if value.strip() == "never":
                break
            elapses.append(_elapse(value.strip(), expression))
        elif key == "(in UTC)" and elapses:
            elapses[-1] = _elapse(value.strip(), expression)
    return elapses


def systemd_analyze(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """The next ``iterations`` elapses of ``expression`` after ``base``, as systemd sees
    them in this host's zone (and the TZ of this process, passed on by shared_io.run)."""
    argv = [
        "systemd-analyze",
        "calendar",
        f"--iterations={iterations}",
        f"--base-time=@{base.timestamp():.6f}",
        "--",
        expression,
    ]
    result = run(argv, timeout=ANALYZE_TIMEOUT, output_limit=200 * iterations + 1000)
    if not result.ok:
        said = (result.stderr.strip() or result.stdout.strip() or result.error).splitlines()
        why = said[-1][:200] if said else "no output"
        raise CalendarError(
            f"apply window start {expression!r}: systemd-analyze calendar refused it: {why}",
            hint=f"fix {WHERE} (systemd.time(7), as OnCalendar= takes it)",
        )
    if result.truncated:
        raise CalendarError(f"systemd-analyze calendar {expression!r} printed too much")
    return parse_elapses(result.stdout, expression)


def check_calendar(expression: str, analyze: Analyzer = systemd_analyze) -> datetime | None:
    """CalendarError unless systemd takes ``expression``; its next elapse (None: never)."""
    elapses = analyze(expression, datetime.now(UTC), 1)
    return elapses[0] if elapses else None


# -- windows --------------------------------------------------------------------------------


def _starts(
    window: ApplyWindow, after: datetime, until: datetime, analyze: Analyzer
) -> tuple[list[datetime], bool]:
    """The starts of ``window`` after ``after`` up to ``until``; and whether the list was
    cut at MAX_STARTS before it reached ``until``."""
    starts: list[datetime] = []
    base, batch = after, FIRST_BATCH
    while len(starts) < MAX_STARTS:
        batch = min(batch, MAX_STARTS - len(starts))
        elapses = analyze(window.start, base, batch)
        for at in elapses:
            if at > until:
                return starts, False
            if at > base:  # never one twice, whatever the analyzer says
                starts.append(at)
                base = at
        if len(elapses) < batch:
            return starts, False
        batch *= 4
    return starts, True


def _span(
    windows: Sequence[ApplyWindow], at: datetime, analyze: Analyzer
) -> tuple[datetime, datetime] | None:
    """The window open at ``at`` or, if none is, the next one opening within 7 days:
    ``(start, end)`` of it, overlapping and touching windows joined; None if none."""
    joined = _joined(windows, at, HORIZON, analyze)
    return joined[0] if joined else None


def _joined(
    windows: Sequence[ApplyWindow], at: datetime, horizon: timedelta, analyze: Analyzer
) -> list[tuple[datetime, datetime]]:
    """Every window open at ``at`` or opening within ``horizon``, as UTC ``(start, end)``,
    sorted, overlapping and touching ones joined."""
    limit = at + horizon
    found: list[tuple[datetime, datetime]] = []
    for window in windows:
        length = timedelta(seconds=window.seconds)
        # Every start after at - length ends after at: each is open at `at` or later.
        starts, cut = _starts(window, at - length, limit, analyze)
        found.extend((start, start + length) for start in starts)
        if cut:
            # Unknown after its last start seen: nothing later counts.
            limit = min(limit, starts[-1])
    joined: list[tuple[datetime, datetime]] = []
    for start, end in sorted(i for i in found if i[0] <= limit):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def intervals(
    windows: Sequence[ApplyWindow],
    now: datetime,
    days: int,
    *,
    analyze: Analyzer = systemd_analyze,
) -> list[tuple[datetime, datetime]]:
    """Every window open at ``now`` or opening within ``days`` days (the polkit rule's
    copy of the windows: plans/polkit.py)."""
    return _joined(windows, now, timedelta(days=days), analyze)


def window_state(
    windows: Sequence[ApplyWindow], now: datetime, *, analyze: Analyzer = systemd_analyze
) -> WindowState:
    """Whether an apply window is open ``now`` (see :class:`WindowState`)."""
    if not windows:
        return WindowState(True, None, None)
    span = _span(windows, now, analyze)
    if span is None:
        return WindowState(False, None, None)
    start, end = span
    return WindowState(start <= now, start, end)


def _too_far(now: datetime) -> NoApplyWindow:
    return NoApplyWindow(
        f"no apply window opens within 7 days (before {at_text(now + HORIZON)}): an "
        "approval holds 7 days at most, so this plan could never run in one",
        hint="approve it with `opsbot approve --now` to run it outside its window, or "
        f"change {WHERE}",
    )


def approval_expiry(
    windows: Sequence[ApplyWindow],
    now: datetime,
    ttl_seconds: int,
    *,
    override: bool = False,
    analyze: Analyzer = systemd_analyze,
) -> datetime:
    """When an approval made ``now`` expires.

    With no window configured, inside an open window, or with ``override`` (``opsbot
    approve --now``): after ``ttl_seconds``. Outside: at the end of the next window (but
    never sooner than after ``ttl_seconds``, and never later than 7 days from now);
    NoApplyWindow if none opens within 7 days.
    """
    at_least = now + timedelta(seconds=ttl_seconds)
    if not windows or override:
        return at_least
    span = _span(windows, now, analyze)
    if span is None:
        raise _too_far(now)
    start, end = span
    if start <= now:
        return at_least
    return min(max(at_least, end), now + HORIZON)


def lifetime_ceiling(
    windows: Sequence[ApplyWindow],
    approved_at: datetime,
    ttl_seconds: int,
    *,
    override: bool = False,
    analyze: Analyzer = systemd_analyze,
) -> float:
    """The longest (in seconds) the apply lets an approval made at ``approved_at`` hold:
    ``ttl_seconds``, or up to the end of the window open at or next after ``approved_at``
    if that is later, at most 7 days. An approval that overrides the window holds for
    ``ttl_seconds`` at most: ``opsbot approve --now`` writes no more."""
    if not windows or override:
        return float(ttl_seconds)
    span = _span(windows, approved_at, analyze)
    if span is None:
        return float(ttl_seconds)
    until = (span[1] - approved_at).total_seconds()
    return min(max(float(ttl_seconds), until), float(APPROVAL_CEILING_SECONDS))


# -- in words -------------------------------------------------------------------------------


def at_text(at: datetime) -> str:
    """``Wed 2026-12-02 02:00 UTC``: a window's start, in this host's zone."""
    return at.astimezone().strftime("%a %Y-%m-%d %H:%M %Z").rstrip()


def span_text(opens_at: datetime, closes_at: datetime) -> str:
    """``Wed 2026-12-02 02:00 UTC to 04:00`` (the end's date too when it is another day)."""
    start, end = opens_at.astimezone(), closes_at.astimezone()
    same_day = start.date() == end.date()
    return f"{at_text(start)} to {end.strftime('%H:%M') if same_day else at_text(end)}"


def state_text(state: WindowState, now: datetime) -> str:
    """When a plan approved ``now`` runs, given ``state``: "at once", or in words."""
    if state.open:
        return "at once"
    if state.opens_at is None or state.closes_at is None:
        return f"not within 7 days: no apply window opens before {at_text(now + HORIZON)}"
    return f"in its apply window, {span_text(state.opens_at, state.closes_at)}"


def wait_text(opens_at: datetime | None, closes_at: datetime | None, *, long: bool = True) -> str:
    """When an APPROVED plan that waits for its apply window runs (what its status
    records): ``in its apply window, Wed 2026-12-02 02:00 UTC to 04:00 (...)``; short
    (``long`` False, a column of ``opsbot plans``): the window's start only."""
    if opens_at is None or closes_at is None:
        if not long:
            return "no window in 7 days"
        return (
            "not in a window: none opens within 7 days, and its approval expires first "
            "(`opsbot approve --now` runs it outside one)"
        )
    if not long:
        return at_text(opens_at)
    return (
        f"in its apply window, {span_text(opens_at, closes_at)} (opsbot-apply.timer runs it "
        "then, checking its preconditions again)"
    )


def runs_when(
    windows: Sequence[ApplyWindow], now: datetime, *, analyze: Analyzer = systemd_analyze
) -> str:
    """When a plan approved ``now`` would run: "at once" (no window, or one open now), or
    "in its apply window, Wed 2026-12-02 02:00 UTC to 04:00"."""
    return state_text(window_state(windows, now, analyze=analyze), now)
