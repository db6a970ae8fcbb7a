"""``opsbot apply [--dry-run]``: run approved plans now, as opsbot-apply.timer and .path do.

Root starts opsbot-apply.service and follows its journal until the run ends: the steps run
as the executor's user, in its unit's sandbox, held by the polkit rule; never in this
process, never as root (``sudo opsbot apply`` has no way around polkit). Where no stored
plan is APPROVED (nor left APPLYING), no approval waits for a plan an apply could run
(plans.apply_queue): it says ``nothing approved``, lists the plans that wait for approval and
exits with their status, without starting the unit (the timer's next run still expires
what is old). The journal is followed as it grows, and the wait ends the moment the start
returns. What the run did
to each plan is printed from its ``apply.outcomes`` entry, believed only from that unit
and its user: a line per step as it ends (``changed`` / ``failed``, with its argv), a line
per plan, then, for each plan whose steps all ran, opsbot-verify's VERIFIED or UNRESOLVED
(waited for here, up to ``settle_seconds`` and two minutes), and a summary line.

With ``--dry-run``: what the next apply would do, judged here, read-only, running nothing,
with every check the apply makes (approval, policy, restart budget, each step's
precondition against the live state, said in words).

Exit status (shared_io/exit_codes.py), the worst over the plans: 0 every plan applied and
verified (or nothing to do); 3 a plan waits for approval; 5 one was refused (STALE,
EXPIRED, an approval that failed a check); 6 a step FAILED or a plan is UNRESOLVED (or
not yet verified when the wait ended). The dry run exits with what the apply would: 0
would run, 3, 5. When the run itself failed: its own status (78 for a bad config).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import (
    command,
    cut,
    fit,
    json_out,
    one_line,
    operator_name,
    out,
    printable,
    require_root,
)
from plans import APPLY_UNIT, Waiting, executor_uids, outcome_json, waiting
from shared_io.exit_codes import ERROR, FAILED, OK, REFUSED, WAITING, at_timeout, for_state, worst
from shared_io.paths import Paths
from shared_io.run import RunResult, run

#: The unit's TimeoutStartSec=30min, and a minute for systemd to say it gave up.
START_TIMEOUT = 31 * 60.0
#: Beyond settle_seconds, how long the console waits for opsbot-verify to judge a plan.
VERIFY_MARGIN = 120.0
#: A step's outcome in the journal, as the per-step line says it (like ansible-playbook).
STEP_WORD = {"ok": "changed", "failed": "failed", "timeout": "failed"}
LOOK = f"journalctl -u {APPLY_UNIT} -n 30"

Entry = dict[str, Any]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "apply", "run approved plans now (opsbot-apply.timer and .path do this)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="every check the apply makes, each step's precondition against the live "
        "state; runs nothing",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="lines whole, not cut to fit")
    p.add_argument("--json", action="store_true", help="the outcomes as a list")
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace, paths: Paths) -> int:
    if args.dry_run:
        from shared_io.log import get_logger

        get_logger(__name__, "opsbot")  # the preview's reads log: to the journal, not here
        from plans import preview_plans

        outcomes = [outcome_json(o) for o in preview_plans(paths)]
        if args.json:
            json_out(outcomes)
        else:
            _print_dry_run(outcomes, args.verbose)
        return worst(*(_dry_status(o) for o in outcomes))
    require_root("apply")
    verbose = args.verbose
    try:
        waits = waiting(paths.state_dir)
    except OSError:
        waits = None  # the store could not be listed: the apply says why
    if waits is not None and waits.nothing_approved:
        return _nothing_approved(waits, paths, args.json, verbose)
    from shared_io.log import get_logger  # loaded for a start only, and configured

    log = get_logger("opsbot.console.apply", "opsbot")
    log.info("apply.requested", by=operator_name(), unit=APPLY_UNIT)
    report = follow_apply_unit(on_step=None if args.json else lambda e: _print_step(e, verbose))
    return report.exit_status(lambda outcomes: _finish(outcomes, paths, args.json, verbose))


def _nothing_approved(waits: Waiting, paths: Paths, as_json: bool, verbose: bool) -> int:
    """No plan an apply could run: said, with the plans that wait for approval, and the
    status they make (3 where one waits, else 0); opsbot-apply.service is not started."""
    if not as_json:
        said = (
            f"nothing approved: {APPLY_UNIT} not started (no plan in {paths.state_dir} is APPROVED)"
        )
        for line in fit(printable(said), lines=2, verbose=verbose):
            out(line)
    return _finish([outcome_json(o) for o in waits.outcomes()], paths, as_json, verbose)


#: What the next apply would do with a plan (Outcome.would), as the dry run's status.
DRY_STATUS = {
    "run": OK,
    "running": OK,  # an apply holds it now: nothing for this one to do
    "wait": WAITING,
    "interrupt": FAILED,
    "expire": REFUSED,
    "stale": REFUSED,
    "refuse": REFUSED,
}


def _dry_status(outcome: dict[str, Any]) -> int:
    if outcome.get("error"):
        return ERROR
    return DRY_STATUS.get(str(outcome.get("would", "")), ERROR)


def _plan_status(outcome: dict[str, Any]) -> int:
    """What one plan's outcome means for apply's exit status (after verification)."""
    if outcome.get("error"):
        return ERROR  # it could not be read or judged
    state = str(outcome["state"])
    if outcome.get("follow_up"):
        return WAITING  # the incident's next plan waits for a human
    ended = for_state(state)
    if ended is not None:
        return ended
    if state == "APPROVED":
        # Not run: it waits for its apply window (3), or its approval was refused (5).
        return WAITING if outcome.get("would") == "wait" else REFUSED
    return at_timeout(state)  # PROPOSED waits; APPLIED not verified when the wait ended


def _finish(outcomes: list[dict[str, Any]], paths: Paths, as_json: bool, verbose: bool) -> int:
    """The run's outcomes, each applied plan's verification waited for, the summary, and
    the exit status they make."""
    if not as_json:
        _print_outcomes(outcomes, verbose)
    applied = [o for o in outcomes if o["state"] == "APPLIED"]
    if applied:
        _await_verification(applied, paths, quiet=as_json)
    if as_json:
        json_out(outcomes)
    else:
        out(_summary(outcomes))
    return worst(*(_plan_status(o) for o in outcomes))


def _await_verification(applied: list[dict[str, Any]], paths: Paths, *, quiet: bool) -> None:
    """Wait for opsbot-verify's verdict on each plan whose steps all ran; update its
    outcome with the state it reached."""
    from opsbot_cli.follow import follow, next_plan, say_change
    from plans import PlanStore
    from shared_io.config import load_config
    from shared_schema.executor_socket import SETTLE_WINDOWS_AT_MOST

    settle = load_config(paths.config).executor.settle_seconds
    store = PlanStore(paths.state_dir)
    # One deadline for all: opsbot-verify checks the plans of a run side by side.
    deadline = time.monotonic() + SETTLE_WINDOWS_AT_MOST * settle + VERIFY_MARGIN
    for outcome in applied:
        if not quiet:
            out(f"{outcome['plan_id']}  waiting for opsbot-verify (health must hold {settle} s)")
        followed = follow(
            store,
            str(outcome["plan_id"]),
            timeout=max(deadline - time.monotonic(), 0.0),
            on_change=(lambda _s: None) if quiet else say_change,
        )
        outcome["state"] = str(followed.status.state)
        if followed.status.verification is not None:
            outcome["verification"] = followed.status.verification.model_dump(mode="json")
        if outcome["state"] == "UNRESOLVED":
            left = max(deadline - time.monotonic(), 0.0)
            after = next_plan(store, str(outcome["plan_id"]), timeout=left)
            if after:
                outcome["follow_up"] = after
                if not quiet:
                    out(
                        f"{outcome['plan_id']}  did not cure the symptom; the follow-up plan "
                        f"{after} waits for approval: `sudo opsbot approve {after}`"
                    )


def _summary(outcomes: list[dict[str, Any]]) -> str:
    """One line, like terraform's: plans and steps, and how they ended."""
    ran = [o for o in outcomes if o["ran"]]
    steps = sum(len(o["argv"]) for o in ran)
    failed = sum(1 for o in ran if o["state"] == "FAILED")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[str(o["state"])] = counts.get(str(o["state"]), 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    plans = f"{len(outcomes)} plan{'s' if len(outcomes) != 1 else ''}"
    return (
        f"Apply complete: {plans} ({states or 'nothing to do'}), {len(ran)} ran "
        f"{steps} step{'s' if steps != 1 else ''}, {failed} failed"
    )


# -- what the run wrote ------------------------------------------------------------------


@dataclass
class ApplyReport:
    """What one run of opsbot-apply.service told the journal, from trusted entries only:
    written by a process of that unit (``_SYSTEMD_UNIT``, set by journald) running as the
    executor's user or as root (``_UID``, from the kernel), never by its ``SYSLOG_*``."""

    trusted_uids: frozenset[int]
    on_step: Callable[[Entry], None] | None = None
    outcomes: list[dict[str, Any]] | None = None
    error: str | None = None
    hint: str | None = None
    error_status: int = 1
    started: RunResult | None = field(default=None, repr=False)

    def take(self, entry: Entry) -> None:
        if entry.get("_SYSTEMD_UNIT") != APPLY_UNIT or entry.get("_UID") not in self.trusted_uids:
            return
        event = entry.get("EVENT")
        if self.outcomes is not None:
            return  # the run this apply waited for has ended; a later one is not ours
        if event == "step.finished" and self.on_step is not None:
            self.on_step(entry)
        elif event == "apply.outcomes":
            self.outcomes = _outcomes(entry)
        elif event == "apply.failed":
            self.error = str(entry.get("ERROR", "")) or "opsbot-apply failed"
            self.hint = str(entry["HINT"]) if entry.get("HINT") else None
            status = str(entry.get("EXIT_STATUS", ""))
            self.error_status = int(status) if status.isdigit() and status != "0" else 1

    def exit_status(self, show: Callable[[list[dict[str, Any]]], int]) -> int:
        """Show the outcomes and return the exit status ``show`` says they make, or raise
        what went wrong."""
        started_ok = self.started is None or self.started.ok
        if self.outcomes is not None:
            failed = any(o["state"] == "FAILED" and o["ran"] for o in self.outcomes)
            status = show(self.outcomes)
            if not started_ok and not failed:  # the unit failed, and not for a step
                raise ConsoleError(_failure(self.started), hint=LOOK)
            return status
        if self.error is not None:
            error = ConsoleError(f"{APPLY_UNIT}: {self.error}", hint=self.hint or LOOK)
            error.exit_status = self.error_status
            raise error
        if not started_ok:
            raise ConsoleError(_failure(self.started), hint=LOOK)
        raise ConsoleError(
            f"{APPLY_UNIT} ran, but its journal holds no outcomes of the run", hint=LOOK
        )


def _outcomes(entry: Entry) -> list[dict[str, Any]]:
    try:
        value = json.loads(str(entry.get("OUTCOMES", "")))
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        raise ConsoleError(f"{APPLY_UNIT} logged outcomes that cannot be read", hint=LOOK)
    return value


def _failure(result: RunResult | None) -> str:
    said = result.failure() if result is not None else ""
    return said or f"{APPLY_UNIT} failed"


# -- starting and following the unit ----------------------------------------------------


def follow_apply_unit(on_step: Callable[[Entry], None] | None = None) -> ApplyReport:
    """``systemctl start opsbot-apply.service`` (a oneshot: it returns when the run ends;
    if a run is already going on, it waits for that one), reading the unit's journal from
    now on meanwhile: woken by each new entry and by the start returning, never by a
    clock. Only when the run's last word (``apply.outcomes`` or ``apply.failed``) is not
    there once the start returned is journald asked to write out what it was sent
    (``journalctl --sync``), and the journal read once more."""
    from systemd import journal

    report = ApplyReport(frozenset(executor_uids()), on_step=on_step)
    reader = journal.Reader()
    woken, wake = os.pipe()
    result: list[RunResult] = []

    def start() -> None:
        try:
            argv = ["systemctl", "start", "--no-ask-password", APPLY_UNIT]
            result.append(run(argv, timeout=START_TIMEOUT))
        finally:
            os.write(wake, b"\0")  # the follower wakes now, not at its next look

    # A daemon thread: on Ctrl-C the console leaves, and the run goes on in systemd.
    starter = threading.Thread(target=start, name="systemctl-start", daemon=True)
    try:
        poller = select.poll()  # the journal's fd first: its watches are set up then
        poller.register(reader.fileno(), reader.get_events())
        poller.register(woken, select.POLLIN)
        # No add_match: the report picks the unit's entries itself (sd-journal 252 may
        # skip entries that arrive after a match was positioned at the tail).
        reader.seek_tail()
        reader.get_previous()  # positioned on the last entry so far: the next are new
        starter.start()
        try:
            while starter.is_alive():
                poller.poll(reader.get_timeout_ms())  # -1: until either fd is ready
                reader.process()
                for entry in reader:
                    report.take(entry)
        except KeyboardInterrupt:
            print(f"opsbot: {APPLY_UNIT} goes on: journalctl -fu {APPLY_UNIT}", file=sys.stderr)
            raise
        report.started = result[0]
        reader.process()
        for entry in reader:
            report.take(entry)
        if report.outcomes is None and report.error is None:
            run(["journalctl", "--sync"], timeout=30)
            reader.process()
            for entry in reader:
                report.take(entry)
    finally:
        reader.close()
        if not starter.is_alive():  # else it still writes to them: the process ends anyway
            os.close(woken)
            os.close(wake)
    return report


# -- printing ----------------------------------------------------------------------------


def _print_step(entry: Entry, verbose: bool = False) -> None:
    """A step of the run, as it ends: ``PLAN_ID  step N changed: ARGV``."""
    plan_id, step, outcome, argv = (
        printable(str(entry.get(key, "?"))) for key in ("PLAN_ID", "STEP", "OUTCOME", "ARGV")
    )
    word = STEP_WORD.get(outcome, outcome)
    out(cut(f"{plan_id}  step {step} {word}: {argv}", verbose))


def _print_outcomes(outcomes: list[dict[str, Any]], verbose: bool) -> None:
    if not outcomes:
        out("no open plans")
    for o in outcomes:
        state, message = printable(str(o["state"])), one_line(str(o["message"]))
        head = f"{printable(str(o['plan_id']))}  {state:<11} "
        lines = fit(message, " " * len(head), lines=2, verbose=verbose)
        out(head + lines[0].lstrip())
        for line in lines[1:]:
            out(line)


def _print_dry_run(outcomes: list[dict[str, Any]], verbose: bool) -> None:
    """Per plan its verdict, per step the argv, each precondition and what it does."""
    _print_outcomes(outcomes, verbose)
    for o in outcomes:
        if not o.get("steps"):
            continue
        out(f"{printable(str(o['plan_id']))}:")
        for index, step in enumerate(o["steps"], 1):
            argv = printable(shlex.join(step["argv"]))
            for line in fit(argv, f"  {index}. ", lines=1, verbose=verbose):
                out(line)
            for check in step["checks"]:
                verdict = "as expected" if check["holds"] else "not as expected"
                said = f"{one_line(check['text'])}: {verdict}"
                for line in fit(said, "     ", lines=2, verbose=verbose):
                    out(line)
            for line in fit(f"-> {printable(step['does'])}", "     ", lines=1, verbose=verbose):
                out(line)
