"""Inside the container: SIGKILL one generated unit per run and time, from the kill, each
stage of its fix by a standing rule; print them as JSON.

    standing_runs.py [--timeout S] [--restart-unit UNIT] UNIT...

The units are ``sleep infinity`` services with ``OnFailure=opsbot-onfailure@%N.service``,
covered by an enforce ``[[approve.rule]]``. The first is the warm-up run (reported
apart); each run kills a different unit, so no run meets an earlier run's plan history.

Before each kill every opsbot oneshot (the OnFailure= diagnosis, rules, notify, apply,
verify, archive) has finished, so runs do not overlap. The kill is ``kill(MainPID,
SIGKILL)`` from here, its wall time taken just before; the stages are read afterwards from
where they are written, not from when this script noticed them:

- ``onfailure_start``: systemd's "Starting opsbot-onfailure@..." entry (the job began);
- ``diagnose_started``: that unit's ``diagnose.started`` entry (opsbot-diagnose is up);
- ``plan_accepted``: opsbot-executor's ``plan.accepted`` entry for the plan (stored);
- ``plan_approved``: opsbot-approver's ``plan.approved`` entry (the approval file is
  written, ``approved_by_rule``); ``approval_rule``: its ``approval.rule`` entry (after
  it started the apply);
- ``running_again``: systemd's "Started UNIT" entry after the kill (the apply's restart
  job is done: the service runs again);
- ``applying``, ``applied``, ``verdict``: the plan's status history (APPLYING, APPLIED,
  then VERIFIED or UNRESOLVED), as the executor and opsbot-verify wrote it.

The floor, ``--restart-unit``: a ``sleep infinity`` service with ``Restart=on-failure``
(and no ``OnFailure=``), killed the same way just before each run; from the kill to its
"Started" entry is the time systemd's own ``Restart=`` takes on this host now.

This script polls only to know that a run ended (its plan settled), every 0.1 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _util import run

STATE = Path("/var/lib/opsbot")
#: systemd's "Starting UNIT..." (a start job began), sd-messages.h SD_MESSAGE_UNIT_STARTING.
UNIT_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"
#: systemd's "Started UNIT" (a start job is done), SD_MESSAGE_UNIT_STARTED.
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
#: A plan state after which nothing happens to it by itself.
SETTLED = {"VERIFIED", "UNRESOLVED", "FAILED", "STALE", "EXPIRED", "REJECTED", "INTERRUPTED"}
#: Where the history's stages are: state -> key.
HISTORY = {"APPROVED": "approved", "APPLYING": "applying", "APPLIED": "applied"}


def busy_oneshots() -> list[str]:
    """opsbot's services that are starting or stopping now (the oneshots at work)."""
    out = run(
        [
            "systemctl",
            "list-units",
            "--type=service",
            "--state=activating,deactivating,reloading",
            "--plain",
            "--no-legend",
            "--no-pager",
            "opsbot-*",
        ]
    ).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def wait_idle(timeout: float) -> list[str]:
    """Until no opsbot oneshot runs; what still ran at the timeout (empty: idle)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = busy_oneshots()
        if not busy or time.monotonic() > deadline:
            return busy
        time.sleep(0.1)


def plan_ids() -> set[str]:
    return {p.stem for p in (STATE / "plans").glob("*.json")}


def plan_units(plan_id: str) -> list[str]:
    record = json.loads((STATE / "plans" / f"{plan_id}.json").read_text())
    plan = json.loads(record["plan"])
    return [str(step["args"]["unit"]) for step in plan["steps"]]


def status(plan_id: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads((STATE / "status" / f"{plan_id}.json").read_text())
    except (OSError, ValueError):  # not there yet, or being replaced
        return None
    return doc


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def journal_since(since: float) -> list[dict[str, Any]]:
    """Every journal entry from the second before ``since`` on, parsed."""
    out = run(
        ["journalctl", "--no-pager", "-o", "json", "--since", f"@{math.floor(since) - 1}"],
        timeout=60,
    ).stdout
    entries = []
    for line in out.splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def stamp(entry: dict[str, Any]) -> float:
    return int(entry["__REALTIME_TIMESTAMP"]) / 1e6


def started_again(entries: list[dict[str, Any]], unit: str, fault: float) -> float | None:
    """When systemd first said it started ``unit`` after ``fault`` (wall-clock seconds)."""
    for entry in entries:
        if (
            entry.get("UNIT") == unit
            and entry.get("MESSAGE_ID") == UNIT_STARTED
            and entry.get("_PID") == "1"
            and stamp(entry) > fault
        ):
            return stamp(entry)
    return None


#: Where the diagnosis runs: in opsbot-onfailure@ itself, or in opsbot-diagnose, asked by it.
DIAGNOSE_DAEMON = "opsbot-diagnose.service"


def journal_stages(
    entries: list[dict[str, Any]], unit: str, onfailure: str, plan_id: str, fault: float
) -> tuple[dict[str, float], str]:
    """The first entry of each stage the journal holds (wall-clock seconds), and the unit
    the diagnosis ran in."""
    found: dict[str, float] = {}
    again = started_again(entries, unit, fault)
    if again is not None:
        found["running_again"] = again
    diagnosis = {onfailure, DIAGNOSE_DAEMON}
    diagnosed_in: dict[str, str] = {}

    def first(key: str, entry: dict[str, Any]) -> None:
        if key not in found:
            found[key] = stamp(entry)

    for entry in entries:
        source = entry.get("_SYSTEMD_UNIT", "")
        event = entry.get("EVENT", "")
        if entry.get("UNIT") == unit and entry.get("EXIT_CODE") == "killed":
            first("exit_seen", entry)  # systemd saw the main process die
        elif entry.get("UNIT") == onfailure and entry.get("MESSAGE_ID") == UNIT_STARTING:
            first("onfailure_start", entry)
        elif source in diagnosis and event == "diagnose.started" and entry.get("UNIT") == unit:
            first("diagnose_started", entry)
            diagnosed_in.setdefault("unit", source)
        elif source in diagnosis and event == "diagnose.finished" and stamp(entry) > fault:
            first("diagnose_finished", entry)
        elif entry.get("PLAN_ID") != plan_id:
            continue
        elif source == "opsbot-executor.service" and event == "plan.accepted":
            first("plan_accepted", entry)
        elif source == "opsbot-approver.service" and event == "plan.approved":
            first("plan_approved", entry)
        elif source == "opsbot-approver.service" and event == "approval.rule":
            first("approval_rule", entry)
        elif source == "opsbot-apply.service" and event == "plan.applied":
            first("plan_applied", entry)
        elif source == "opsbot-executor.service" and event == "plan.verified":
            first("plan_verified", entry)
    return found, diagnosed_in.get("unit", "")


NEEDED = (
    "onfailure_start",
    "diagnose_started",
    "plan_accepted",
    "plan_approved",
    "running_again",
)


def restart_floor(unit: str, timeout: float = 30.0) -> float | None:
    """Kill ``unit`` (``Restart=on-failure``) and time systemd's own restart of it: from the
    kill to its "Started" entry (seconds), or None if it did not start again in time."""
    pid = int(run(["systemctl", "show", "-P", "MainPID", unit]).stdout.strip() or 0)
    if not pid:
        return None
    fault = time.time()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.2)
        new = int(run(["systemctl", "show", "-P", "MainPID", unit]).stdout.strip() or 0)
        if new and new != pid:
            break
    journal_deadline = time.monotonic() + 10
    while time.monotonic() < journal_deadline:
        again = started_again(journal_since(fault), unit, fault)
        if again is not None:
            return again - fault
        time.sleep(0.2)
    return None


def one_run(unit: str, timeout: float) -> dict[str, Any]:
    """Kill ``unit``'s main process; wait for its plan to settle; its stages."""
    result: dict[str, Any] = {"unit": unit, "problems": []}
    busy = wait_idle(120)
    if busy:
        result["problems"].append(f"still running before the kill: {', '.join(busy)}")
    onfailure = run(["systemctl", "show", "-P", "OnFailure", unit]).stdout.strip()
    pid = int(run(["systemctl", "show", "-P", "MainPID", unit]).stdout.strip() or 0)
    if not pid:
        result["problems"].append(f"{unit} has no main process to kill")
        return result
    before = plan_ids()
    fault = time.time()
    os.kill(pid, signal.SIGKILL)
    result["fault"] = fault
    deadline = time.monotonic() + timeout
    plan_id = ""
    doc: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        if not plan_id:
            for new in sorted(plan_ids() - before):
                try:
                    if unit in plan_units(new):
                        plan_id = new
                        break
                except (OSError, ValueError, KeyError):
                    continue  # being written
        if plan_id:
            doc = status(plan_id)
            if doc is not None and doc["state"] in SETTLED:
                break
        time.sleep(0.1)
    result["plan_id"] = plan_id
    result["state"] = doc["state"] if doc else "no plan"
    if doc is None or doc["state"] not in SETTLED:
        active = run(["systemctl", "show", "-P", "ActiveState", unit]).stdout.strip()
        said = doc["history"][-1] if doc and doc["history"] else {}
        result["problems"].append(
            f"{unit}: no settled plan within {timeout:g}s (plan {plan_id or 'none'}, "
            f"{result['state']} {said.get('reason', '')!r}; the unit is {active})"
        )
        return result
    stages: dict[str, float] = {}
    for step in doc["history"]:
        key = HISTORY.get(step["state"])
        if key and key not in stages:
            stages[key] = epoch(step["at"])
        if step["state"] in SETTLED:
            stages["verdict"] = epoch(step["at"])
    result["approved_by_rule"] = doc.get("approved_by_rule", "")
    result["verdict_reason"] = doc["history"][-1].get("reason", "")
    # journald may write an entry a moment after the state it tells of: read until the
    # stages the status cannot tell are there (or 10 s).
    journal_deadline = time.monotonic() + 10
    while True:
        found, result["diagnosed_in"] = journal_stages(
            journal_since(fault), unit, onfailure, plan_id, fault
        )
        if all(key in found for key in NEEDED) or time.monotonic() > journal_deadline:
            break
        time.sleep(0.2)
    missing = [key for key in NEEDED if key not in found]
    if missing:
        result["problems"].append(f"{unit}: no journal entry for {', '.join(missing)}")
    stages.update(found)
    result["stamps"] = stages
    result["seconds"] = {key: at - fault for key, at in stages.items()}
    return result


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, default=120.0, help="per run, kill to verdict")
    p.add_argument(
        "--restart-unit", default="", help="a Restart=on-failure unit: the floor, before each run"
    )
    p.add_argument("units", nargs="+")
    args = p.parse_args()
    runs = []
    for unit in args.units:
        floor = restart_floor(args.restart_unit) if args.restart_unit else None
        runs.append(one_run(unit, args.timeout))
        if floor is not None:
            runs[-1]["restart_floor"] = floor
        print(
            f"{unit}: {runs[-1].get('state')} "
            f"{runs[-1].get('seconds', {}).get('verdict', math.nan):.2f}s",
            file=sys.stderr,
        )
    print(json.dumps({"runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
