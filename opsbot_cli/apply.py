"""``opsbot apply [--dry-run]``: run approved plans now, as opsbot-apply.timer and .path do.

Root starts opsbot-apply.service and follows its journal until the run ends: the steps run
as the executor's user, in its unit's sandbox, held by the polkit rule; never in this
process, never as root (``sudo opsbot apply`` has no way around polkit). What the run did
to each plan is printed from its ``apply.outcomes`` entry, believed only from that unit
and its user. With ``--dry-run``: what the next apply would do, judged here, read-only,
running nothing.

Exit status: 0, or 1 when a step failed; when the run itself failed, its own status (78
for a bad config) with the line it logged.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from executor_svc.apply_service import APPLY_UNIT, apply_plans, outcome_json
from opsbot_cli.errors import ConsoleError
from opsbot_cli.journal_witness import executor_uids
from opsbot_cli.output import command, json_out, operator_name, out, printable, require_root
from shared_io.paths import Paths
from shared_io.run import RunResult, run

#: How often the journal is looked at while the run goes on.
FOLLOW_INTERVAL = 0.5
#: The unit's TimeoutStartSec=30min, and a minute for systemd to say it gave up.
START_TIMEOUT = 31 * 60.0
EXECUTOR_USER = "opsbot-executor"
LOOK = f"journalctl -u {APPLY_UNIT} -n 30"

log = structlog.get_logger("opsbot.console.apply")

Entry = dict[str, Any]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "apply", "run approved plans now (opsbot-apply.timer and .path do this)")
    p.add_argument("--dry-run", action="store_true", help="print what would run and run nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace, paths: Paths) -> int:
    if args.dry_run:
        outcomes = [
            outcome_json(o) for o in apply_plans(paths, actor=operator_name(), dry_run=True)
        ]
        _print_outcomes(outcomes, as_json=args.json, dry_run=True)
        return 0
    require_root("apply")
    log.info("apply.requested", by=operator_name(), unit=APPLY_UNIT)
    report = follow_apply_unit(on_step=None if args.json else _print_step)
    return report.exit_status(lambda outcomes: _print_outcomes(outcomes, as_json=args.json))


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

    def exit_status(self, show: Callable[[list[dict[str, Any]]], None]) -> int:
        """Show the outcomes and return the exit status, or raise what went wrong."""
        started_ok = self.started is None or self.started.ok
        if self.outcomes is not None:
            show(self.outcomes)
            if any(o["state"] == "FAILED" and o["ran"] for o in self.outcomes):
                return 1
            if not started_ok:
                raise ConsoleError(_failure(self.started), hint=LOOK)
            return 0
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
    if a run is already going on, it waits for that one), reading the unit's journal
    from now on meanwhile, and once more after journald has caught up."""
    from systemd import journal

    report = ApplyReport(frozenset(executor_uids()), on_step=on_step)
    reader = journal.Reader()
    try:
        # No add_match: the report picks the unit's entries itself (sd-journal 252 may
        # skip entries that arrive after a match was positioned at the tail).
        reader.seek_tail()
        reader.get_previous()  # positioned on the last entry so far: the next are new
        done = threading.Event()
        result: list[RunResult] = []

        def start() -> None:
            try:
                argv = ["systemctl", "start", "--no-ask-password", APPLY_UNIT]
                result.append(run(argv, timeout=START_TIMEOUT))
            finally:
                done.set()

        # A daemon thread: on Ctrl-C the console leaves, and the run goes on in systemd.
        threading.Thread(target=start, name="systemctl-start", daemon=True).start()
        try:
            while not done.is_set():
                reader.wait(FOLLOW_INTERVAL)
                for entry in reader:
                    report.take(entry)
        except KeyboardInterrupt:
            print(f"opsbot: {APPLY_UNIT} goes on: journalctl -fu {APPLY_UNIT}", file=sys.stderr)
            raise
        report.started = result[0]
        run(["journalctl", "--sync"], timeout=30)
        reader.process()
        for entry in reader:
            report.take(entry)
    finally:
        reader.close()
    return report


# -- printing ----------------------------------------------------------------------------


def _print_step(entry: Entry) -> None:
    """A step of the run, as it ends: ``PLAN_ID  step N OUTCOME: ARGV``."""
    plan_id, step, outcome, argv = (
        printable(str(entry.get(key, "?"))) for key in ("PLAN_ID", "STEP", "OUTCOME", "ARGV")
    )
    out(f"{plan_id}  step {step} {outcome}: {argv}")


def _print_outcomes(
    outcomes: list[dict[str, Any]], *, as_json: bool, dry_run: bool = False
) -> None:
    if as_json:
        json_out(outcomes)
        return
    if not outcomes:
        out("no open plans")
    for o in outcomes:
        state, message = printable(str(o["state"])), printable(str(o["message"]))
        out(f"{printable(str(o['plan_id']))}  {state:<11} {message}")
        if dry_run:
            for argv in o["argv"]:
                out(f"    {printable(shlex.join(argv))}")
