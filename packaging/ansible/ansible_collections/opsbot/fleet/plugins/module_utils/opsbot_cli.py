"""What the opsbot.fleet modules share: running the host's ``opsbot`` CLI (an argv list
through ``module.run_command``, never a shell), reading its ``--json`` answer, and saying
what its exit status means (shared_io/exit_codes.py on the host).

Runs on the managed host with its own Python (standard library and Ansible's module_utils
only): the modules talk to the CLI, never to opsbot's sockets or files.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: ``opsbot --help``'s exit status table: what a script may rely on.
EXIT_MEANINGS = {
    0: "done, nothing waits",
    1: "error: a daemon cannot be reached, permission denied, internal error",
    2: "usage: bad arguments or id, a root-only command run by another user",
    3: "a plan waits for approval",
    4: "a human must act: diagnose ended with a note naming a cause",
    5: "refused: STALE, REJECTED, EXPIRED, out of scope; audit --verify: trail broken",
    6: "a step FAILED, or the plan is UNRESOLVED: the service did not come back",
    78: "invalid configuration (opsbot check-config says where)",
}
#: Every plan state (shared_schema/states.py).
PLAN_STATES = (
    "PROPOSED",
    "APPROVED",
    "APPLYING",
    "APPLIED",
    "VERIFIED",
    "UNRESOLVED",
    "FAILED",
    "STALE",
    "EXPIRED",
    "REJECTED",
    "INTERRUPTED",
)
#: A plan id as opsbot makes them (shared_schema/units.py PLAN_ID_PATTERN).
PLAN_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}\Z", re.ASCII)
#: A whole sha256: an approval through Ansible is bound to all 64 hex digits, never a prefix.
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z", re.ASCII)
#: A unit's name as opsbot prints it (shared_schema/units.py: letters, digits, ``:_.\-@``).
UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]{1,256}\Z", re.ASCII)
#: A write tool's name (restart_unit, ...).
TOOL_RE = re.compile(r"^[a-z_]{1,32}\Z", re.ASCII)
#: How many evidence lines a plan's summary carries.
EVIDENCE_MAX = 8


class CliError(Exception):
    """The CLI failed or answered what is not JSON; ``message`` is the operator's line."""

    def __init__(self, message: str, rc: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.rc = rc
        self.stderr = stderr


def meaning(rc: int) -> str:
    """What exit status ``rc`` of an opsbot command means."""
    return EXIT_MEANINGS.get(rc, f"exit status {rc}")


def error_line(stderr: str) -> str:
    """The CLI's own error (``opsbot: error: ...``) and its hint (wrapped over lines),
    on one line; else stderr's last lines."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith("opsbot: error:")]
    said = lines[starts[0] :] if starts else lines[-3:]
    return " ".join(line.removeprefix("opsbot: ") for line in said)


def run_json(module: Any, argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[int, Any]:
    """Run ``argv`` (an opsbot command with ``--json``); its exit status and parsed stdout.
    An exit status outside ``ok``, or stdout that is not JSON, raises CliError."""
    rc, stdout, stderr = module.run_command(argv, check_rc=False)
    shown = " ".join(argv)
    failed = CliError(
        f"`{shown}` exited {rc} ({meaning(rc)}): {error_line(stderr) or 'no message'}",
        rc,
        stderr,
    )
    if rc not in ok:
        raise failed
    try:
        return rc, json.loads(stdout)
    except ValueError:
        if rc != 0:
            raise failed from None
        raise CliError(f"`{shown}` did not answer JSON: {stdout[:200]!r}", rc, stderr) from None


def show(module: Any, cli: str, plan_id: str) -> dict[str, Any]:
    """``opsbot show ID --json``: the executor's whole answer for one plan."""
    _rc, detail = run_json(module, [cli, "show", plan_id, "--json"])
    if not isinstance(detail, dict) or not isinstance(detail.get("summary"), dict):
        raise CliError(f"`{cli} show {plan_id} --json` answered no plan summary")
    return detail


def evidence(detail: dict[str, Any]) -> list[str]:
    """A plan's evidence in a few lines: why each step, its end's reason, what
    opsbot-verify saw."""
    summary = detail["summary"]
    lines = [
        f"{step['args']['unit']}: {step['reason']}"
        for step in detail["plan"]["steps"]
        if step.get("reason")
    ]
    if summary.get("reason"):
        lines.append(f"{summary['state']}: {summary['reason']}")
    verification = summary.get("verification") or {}
    if verification:
        lines.append(f"verify: {verification.get('result')}")
        lines.extend(str(line) for line in verification.get("evidence", []))
    return [" ".join(line.split())[:200] for line in lines[:EVIDENCE_MAX]]


def plan_record(detail: dict[str, Any]) -> dict[str, Any]:
    """One plan as opsbot_plans returns it, from ``opsbot show ID --json``."""
    summary = detail["summary"]
    steps = [
        {
            "tool": step["tool"],
            "unit": step["args"]["unit"],
            "argv": list(argv),
            "precondition": step.get("expect"),
            "reason": step.get("reason"),
        }
        for step, argv in zip(detail["plan"]["steps"], detail["argv"], strict=True)
    ]
    return {
        "plan_id": summary["plan_id"],
        "state": summary["state"],
        "goal": summary["goal"],
        "sha256": summary["sha256"],
        "units": summary.get("units", []),
        "steps": steps,
        "evidence": evidence(detail),
        "reason": summary.get("reason", ""),
        "submitted_at": summary["submitted_at"],
        "submitted_by": summary.get("submitted_by", ""),
        "verification": summary.get("verification"),
        "waits_for_window": summary.get("waits_for_window"),
    }
