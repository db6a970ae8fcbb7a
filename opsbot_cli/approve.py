"""``opsbot approve ID`` (root): bind an approval to exactly the plan the operator reviewed.

The stored plan belongs to the executor's user, which could rewrite it, and its sha256
with it, between ``opsbot show`` and ``opsbot approve``. So approve binds:

- on a terminal (without ``--sha256``): the plan as root reads it now, shown for review
  (:func:`review_lines`: its id, the host, its sha256, each step as ``opsbot show`` prints
  it, with its argv and its precondition against the unit's live state, when it would
  run) and confirmed with ``y``;
- with ``--sha256 PREFIX`` (at least 12 hex digits of the sha256 ``opsbot show`` printed
  or the submit reply carried): only a plan whose sha256 starts with it;
- without a terminal and without ``--sha256``: nothing (one line saying to pass it);

and in every case only if opsbot-executor.service's own ``plan.accepted`` journal entry
for the id names the same sha256. What follows the review is the road every approval
takes (plans.road: the witness, the checks, the approval, the apply's start), which
says why it refused: a ``--sha256`` that matches neither the plan nor what
the executor logged is a mistyped one, not a plan that changed; a plan that ran was
applied once, and its story is in ``opsbot audit ID``.

Then it says what will apply the plan, as systemd has it now: opsbot-apply.path (active:
an apply starts at once), else opsbot-apply.timer (its next run), else nothing. Where
``[executor.apply_window]`` is set and no window is open, the approval holds until the
next window's end (at most 7 days) and the plan waits in APPROVED for opsbot-apply.timer
to run it in that window; ``--now`` overrides the windows for this plan (recorded in the
approval and the journal) and it applies at once. With
``--wait`` it follows the plan to its end (applied, then VERIFIED or UNRESOLVED) and exits
with that end's status: 0 VERIFIED, 6 FAILED or UNRESOLVED, 5 STALE, EXPIRED, REJECTED or
an approval the apply refused, 3 still waiting when ``--timeout`` runs out.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from opsbot_cli import screen, steps
from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.follow import follow, next_plan, say_change
from opsbot_cli.output import (
    command,
    fit,
    json_out,
    operator_name,
    out,
    plan_id_arg,
    printable,
    require_root,
    when,
)
from opsbot_cli.polkit_rule import ensure_rule
from plans import (
    Person,
    PlanStore,
    Request,
    Reviewed,
    Road,
    StatusRecord,
    WindowState,
    approval_expiry,
    is_sha256_prefix,
    state_text,
    step_argv,
    utcnow,
    window_state,
    witness,
)
from shared_io.config import load_config
from shared_io.exit_codes import OK, REFUSED, WAITING, at_timeout, for_state
from shared_io.paths import Paths
from shared_schema.timespan import parse_timespan

if TYPE_CHECKING:
    from shared_io.unit_show import UnitState

#: ``--wait`` gives up after this long unless ``--timeout`` says otherwise.
WAIT_DEFAULT = "15min"
#: The review's first column: ``approval `` and every label after it.
LABEL = 10


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "approve", "(root) approve a plan: binds an approval to its sha256, with expiry"
    )
    p.add_argument("plan_id", metavar="ID")
    p.add_argument(
        "--sha256",
        metavar="PREFIX",
        help="the sha256 you reviewed (at least 12 hex digits, from `opsbot show ID`); "
        "needed without a terminal, where approve cannot ask",
    )
    p.add_argument(
        "--ttl",
        metavar="DURATION",
        help="how long the approval holds, as systemd writes it: 90 (seconds), 30s, 30m, "
        "2h, '1h 30min'; at least 1 s, at most the config's approval_ttl_seconds "
        "(its default); outside the apply windows it holds until the next one's end "
        "(at most 7 days)",
    )
    p.add_argument(
        "--now",
        action="store_true",
        help="run it at once, outside its apply window ([executor.apply_window]); recorded "
        "in the approval and the journal",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="follow the plan until it is applied and verified; exit with its status "
        "(0 VERIFIED, 6 FAILED/UNRESOLVED, 5 STALE/EXPIRED/REJECTED, 3 timed out)",
    )
    p.add_argument(
        "--timeout",
        metavar="DURATION",
        default=WAIT_DEFAULT,
        help=f"how long --wait waits (a systemd duration; default {WAIT_DEFAULT})",
    )
    p.add_argument("--json", action="store_true", help="the approval (and with --wait, the end)")
    p.set_defaults(func=run)


def sha256_arg(value: str) -> str:
    prefix = value.strip().lower()
    if not is_sha256_prefix(prefix):
        raise UsageError(
            f"--sha256 takes at least 12 hex digits of the plan's sha256, not "
            f"{printable(value[:80])!r}"
        )
    return prefix


def ttl_arg(value: str, ceiling: int, config: Path) -> int:
    """``--ttl`` in whole seconds: a systemd timespan from 1 s up to ``ceiling``."""
    seconds = parse_timespan(value)
    shown = printable(value[:80])
    if seconds is None:
        raise UsageError(
            f"--ttl takes a systemd duration (90, 30s, 30m, 2h, '1h 30min'), not {shown!r}"
        )
    if seconds < 1 or seconds != int(seconds):
        raise UsageError(f"--ttl {shown!r}: an approval holds a whole number of seconds, >= 1")
    if seconds > ceiling:
        raise UsageError(
            f"--ttl {shown!r} ({int(seconds)} s) exceeds approval_ttl_seconds={ceiling} in {config}"
        )
    return int(seconds)


def run(args: argparse.Namespace, paths: Paths) -> int:
    require_root("approve")
    plan_id = plan_id_arg(args.plan_id)
    prefix = sha256_arg(args.sha256) if args.sha256 is not None else None
    if prefix is None and not sys.stdin.isatty():
        raise UsageError(
            "no terminal to confirm on: pass --sha256 PREFIX",
            hint=f"at least 12 hex digits of the sha256 you reviewed (`opsbot show {plan_id}`)",
        )
    config = load_config(paths.config)
    ceiling = config.executor.approval_ttl_seconds
    ttl = ceiling if args.ttl is None else ttl_arg(args.ttl, ceiling, paths.config)
    timeout = wait_timeout(args.timeout) if args.wait else 0.0
    deadline = time.monotonic() + timeout
    windows = config.executor.apply_window
    # Before anything is asked: a window further than an approval holds refuses here.
    expires = approval_expiry(windows, utcnow(), ttl, override=args.now)
    if os.geteuid() == 0:
        try:  # the apply is held by the rule polkit has: today's config's
            ensure_rule(config.executor)
        except OSError as exc:
            raise ConsoleError(
                f"the polkit rule does not match the config and could not be written again: "
                f"{exc.strerror or exc}",
                hint="run `opsbot polkit-rule --write` and approve again",
            ) from exc
    window = window_state(windows, utcnow()) if windows and not args.now else None
    road = Road.on_host(PlanStore(paths.state_dir), paths, config.executor)
    witnessed = witness.accepted(plan_id)
    if prefix is None:
        reviewed = road.review(plan_id, witnessed)
        stream = sys.stderr if args.json else sys.stdout
        runs = runs_words(bool(windows), args.now, window, utcnow())
        waits = window is not None and not window.open
        if not confirmed(reviewed, ttl, stream, runs=runs, until=expires if waits else None):
            raise ConsoleError(f"plan {plan_id} was not approved: the answer was not yes")
        prefix = reviewed.record.sha256
    granted = road.approve(
        Request(
            plan_id=plan_id,
            sha256=prefix,
            by=Person(operator_name(), via="terminal"),
            ttl_seconds=ttl,
            now=utcnow(),
            renew=True,
            override_window=args.now,
        ),
        witnessed=witnessed,
    )
    done, next_apply, applies = granted.approved, granted.applies, granted.starts
    store = road.store
    said = {
        "plan_id": plan_id,
        "sha256": done.record.sha256,
        "approval": done.approval.model_dump(mode="json"),
        "next_apply": next_apply,
        "applies": applies,
        "runs": state_text(done.window, done.approval.approved_at),
        "override_window": done.approval.override_window,
        "window": None
        if done.window.open
        else {
            "opens_at": _iso(done.window.opens_at),
            "closes_at": _iso(done.window.closes_at),
        },
    }
    if args.json and not args.wait:
        json_out(said)
        return OK
    if not args.json:
        out(
            f"approved plan {plan_id} (sha256 {done.record.sha256[:16]}...) until "
            f"{when(done.approval.expires_at)}:"
        )
        for argv in step_argv(done.plan):
            for line in fit(printable(shlex.join(argv)), "  ", lines=1):
                out(line)
        for line in fit(next_apply, "", lines=3):
            out(line)
    if not args.wait:
        if not args.json:
            out(f"`opsbot show {plan_id}` and `opsbot audit {plan_id}` follow it")
        return OK
    if not applies and not args.json:
        out(f"waiting up to {args.timeout} for someone to run `opsbot apply`")
    followed = follow(
        store, plan_id, timeout=timeout, on_change=_quiet if args.json else say_change
    )
    status = followed.status
    after = None
    if not followed.ended:
        code = at_timeout(status.state)
    else:  # a final state, or a refusal (the plan still APPROVED, not run)
        ended = for_state(status.state)
        code = REFUSED if ended is None else ended
        if status.state == "UNRESOLVED":
            after = next_plan(store, plan_id, timeout=max(deadline - time.monotonic(), 0.0))
            code = WAITING if after else code
    if args.json:
        json_out(
            {
                **said,
                "state": str(status.state),
                "reason": status.reason,
                "refusal": status.refusal,
                "ended": followed.ended,
                "follow_up": after,
                "exit_status": code,
            }
        )
    elif not followed.ended:
        out(f"plan {plan_id} is still {status.state} after {args.timeout}")
    elif after:
        out(
            f"plan {plan_id} did not cure the symptom; the follow-up plan {after} of its "
            f"incident waits for approval: `opsbot show {after}`, then "
            f"`sudo opsbot approve {after}`"
        )
    return code


def _quiet(_status: StatusRecord) -> None:
    pass


def wait_timeout(value: str) -> float:
    seconds = parse_timespan(value)
    if seconds is None or seconds <= 0:
        raise UsageError(
            f"--timeout takes a systemd duration (30s, 5min, 1h), not {printable(value[:80])!r}"
        )
    return seconds


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def runs_words(windows: bool, override: bool, window: WindowState | None, now: datetime) -> str:
    """When the plan would run, approved ``now``: at once (no apply window is set, one is
    open, or ``--now`` overrides them), or in its apply window."""
    if not windows:
        return "at once (no apply window is set)"
    if override:
        return "at once: --now overrides its apply window"
    if window is None or window.open:
        return "at once: its apply window is open now"
    return state_text(window, now)


def review_lines(
    reviewed: Reviewed,
    read: steps.ReadState,
    *,
    runs: str,
    holds: str,
    width: int,
    host: str = "",
) -> list[str]:
    """The plan as root reads it now, for review, in lines of at most ``width``
    columns: its id, the host, its sha256 (short: ``--json`` and ``opsbot show`` have it
    whole), goal, who submitted it and when, each step as ``opsbot show`` prints it (its
    argv, its preconditions against the live state ``read`` reads), when it ``runs``,
    how long the approval ``holds``."""
    record, plan = reviewed.record, reviewed.plan
    lines: list[str] = []

    def say(label: str, text: str) -> None:
        lines.extend(
            textwrap.wrap(
                text,
                width,
                initial_indent=f"{label:<{LABEL}}",
                subsequent_indent=" " * LABEL,
                break_on_hyphens=False,
            )
        )

    say("plan", f"{record.plan_id} ({reviewed.status.state})")
    say("host", printable(host or socket.gethostname()))
    say("sha256", f"{record.sha256[:16]}… (whole in `opsbot show {record.plan_id}` and in --json)")
    say("goal", printable(plan.goal))
    say("submitted", f"{when(record.submitted_at)} by {printable(record.submitted_by.user)}")
    lines.append("steps (each runs as this argv, no shell):")
    states: dict[str, UnitState | str] = {}
    stale = False
    for index, (step, argv) in enumerate(
        zip(plan.model_dump(mode="json")["steps"], step_argv(plan), strict=True), 1
    ):
        unit = step["args"]["unit"]
        state = states[unit] if unit in states else states.setdefault(unit, read(unit))
        lines += steps.lines(index, step, argv, state=state, width=width)
        stale = stale or not steps.holds(step.get("expect"), state)
    if stale:
        say("note", "a precondition is not as expected now: the apply would find the plan STALE")
    say("runs", runs)
    say("approval", holds)
    return lines


def confirmed(
    reviewed: Reviewed,
    ttl: int,
    stream: TextIO,
    *,
    runs: str = "at once",
    until: datetime | None = None,
    read: steps.ReadState | None = None,
) -> bool:
    """Show the plan for review (:func:`review_lines`, folded to ``$COLUMNS``, at most
    100) and ask; True only for "y" or "yes". ``runs``: when it would run; ``until``:
    where it waits for an apply window, the end of the approval's life."""
    if read is None:
        from opsbot_cli import live  # systemctl show, as opsbot show reads it

        read = live.read
    holds = f"holds {ttl} s from your yes"
    if until is not None:
        holds = f"holds until the end of that window, {when(until)}"
    width = screen.columns()
    for line in review_lines(reviewed, read, runs=runs, holds=holds, width=width):
        print(line, file=stream)
    print("Approve? [y/N] ", end="", file=stream, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
