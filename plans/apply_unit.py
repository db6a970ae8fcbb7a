"""Starting the apply after an approval, and saying what will apply a plan.

``opsbot approve`` and root's opsbot-approver both end an approval here:
:func:`start_apply` asks systemd for an apply now where opsbot-apply.path is active (a
path unit does not watch while the service it started runs, so an approval written then
would wait for the timer), and says in words what will apply the plan, from what systemd
says now: opsbot-apply.path, else opsbot-apply.timer (its next run), else nothing.
:func:`window_apply` says it of a plan that waits for its apply window. Where systemd
cannot say a unit's state, the words say "live state unknown" and why: never a state.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from plans.names import APPLY_PATH, APPLY_TIMER, APPLY_UNIT
from plans.windows import WindowState, state_text
from shared_io.errors import UnitStateError
from shared_io.paths import DEFAULTS, Paths
from shared_io.run import run
from shared_io.unit_show import UnitProperties, parse_timestamp, show

__all__ = ["apply_running", "start_apply", "watched", "window_apply"]

#: Seconds systemctl may take for each of these looks.
SYSTEMCTL_TIMEOUT = 10.0


def watched(paths: Paths) -> bool:
    """Whether opsbot-apply's units read the approvals directory of ``paths``."""
    return paths.approvals_dir == Path(DEFAULTS["OPSBOT_APPROVALS_DIR"])


def _state(unit: str, *properties: str) -> UnitProperties | str:
    """What systemd says of ``unit``, or why it could not say (one line)."""
    try:
        [values] = show([unit], properties, timeout=SYSTEMCTL_TIMEOUT)
    except UnitStateError as exc:
        return " ".join(exc.message.split())
    return values


def apply_running() -> bool:
    """Whether opsbot-apply.service is running now (a oneshot: activating). Where systemd
    cannot say, False: the start asked for then joins a run that goes on, at worst."""
    state = _state(APPLY_UNIT, "ActiveState")
    return not isinstance(state, str) and state.get("ActiveState") in ("activating", "active")


def _active(unit: str) -> bool:
    return run(["systemctl", "is-active", "--quiet", unit], timeout=SYSTEMCTL_TIMEOUT).ok


def _not_watched(paths: Paths, what: str) -> tuple[str, bool]:
    return (
        f"nothing applies it{what}: opsbot-apply's units read "
        f"{DEFAULTS['OPSBOT_APPROVALS_DIR']}, not {paths.approvals_dir}",
        False,
    )


def _next_run(timer: UnitProperties) -> str:
    at = parse_timestamp(timer.get("NextElapseUSecRealtime", ""))
    return f"at {at:%Y-%m-%d %H:%M:%S} UTC" if at else "a minute after its last run"


def start_apply(paths: Paths, busy: bool = False) -> tuple[str, bool]:
    """Ask systemd for an apply now where opsbot-apply.path is active; say what will apply
    the plan, from what systemd says now, and whether anything will.

    Only for the approvals directory the units read; where a run was going on before the
    approval (``busy``), a start now would merge into it: the timer's next run (a minute
    after that one ends) takes the plan, and the words say so.
    """
    if not watched(paths):
        return _not_watched(paths, " on its own")
    timer = _state(APPLY_TIMER, "ActiveState", "NextElapseUSecRealtime")
    timer_on = not isinstance(timer, str) and timer.get("ActiveState") == "active"
    if _active(APPLY_PATH):
        if busy:
            after = f"; {APPLY_TIMER} takes it a minute after that run" if timer_on else ""
            return f"an apply is running now{after}", timer_on
        started = run(["systemctl", "start", "--no-block", APPLY_UNIT], timeout=SYSTEMCTL_TIMEOUT)
        if started.ok:
            return f"{APPLY_UNIT} starts now ({APPLY_PATH} is active)", True
    if isinstance(timer, str):
        return (
            f"nothing is known to apply it: {APPLY_PATH} is not active and the live state of "
            f"{APPLY_TIMER} is unknown: {timer}; run `opsbot apply` (root)",
            False,
        )
    if timer_on:
        return f"{APPLY_TIMER} applies it {_next_run(timer)} ({APPLY_PATH} is not active)", True
    return (
        f"nothing applies it on its own: {APPLY_PATH} and {APPLY_TIMER} are inactive; run "
        f"`opsbot apply` (root), or `systemctl enable --now {APPLY_PATH} {APPLY_TIMER}`",
        False,
    )


def window_apply(paths: Paths, window: WindowState, now: datetime) -> tuple[str, bool]:
    """What applies a plan that waits for its apply window, from what systemd says now:
    opsbot-apply.timer (it runs every minute, so in the window too), else nothing."""
    now_text = state_text(window, now)
    if not watched(paths):
        return _not_watched(paths, f" {now_text}")
    timer = _state(APPLY_TIMER, "ActiveState")
    if isinstance(timer, str):
        return (
            f"nothing is known to apply it {now_text}: the live state of {APPLY_TIMER} is "
            f"unknown: {timer}; run `opsbot apply` (root) in the window",
            False,
        )
    if timer.get("ActiveState") == "active":
        return (
            f"applies {now_text}: {APPLY_TIMER} runs it then, checking its preconditions",
            True,
        )
    return (
        f"nothing applies it {now_text}: {APPLY_TIMER} is inactive; `systemctl enable --now "
        f"{APPLY_TIMER}`, or run `opsbot apply` (root) in the window",
        False,
    )
