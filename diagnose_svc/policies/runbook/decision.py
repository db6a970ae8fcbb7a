"""The decision: where the fault is (the roots), whether each was read enough, and per
root whether systemd lets anyone act on it; then down.py or running.py tells its failure
mode. Several causes for a human give one note (the first); fixes make one plan."""

from __future__ import annotations

from typing import Any

from diagnose_svc.actions import Action, SubmitPlan
from diagnose_svc.policies.findings import Findings
from diagnose_svc.policies.runbook.constants import RUNNING
from diagnose_svc.policies.runbook.down import decide_down
from diagnose_svc.policies.runbook.mounts import failed_mount
from diagnose_svc.policies.runbook.notes import also_failing, healthy, human_note, note, which_waits
from diagnose_svc.policies.runbook.outcomes import Fix, Human, plan, step
from diagnose_svc.policies.runbook.reads import evidence
from diagnose_svc.policies.runbook.running import decide_running
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import cut, ended
from diagnose_svc.tools import UnitStatus
from shared_schema import DiagnoseSettings, denied_reason


def decide(settings: DiagnoseSettings, available: set[str], unit: str, found: Findings) -> Action:
    """The conclusion from the evidence at hand: a plan, or a note for a human.
    ``available`` is the read tools this run offered: a read among them never made
    leaves a root unchecked."""
    view = View(settings, found, unit)
    status = view.status(unit)
    if status is None:
        error = found.error("read_unit_status", unit) or "read_unit_status was not run"
        return note(
            f"Could not read the state of {unit}: {error}. Nothing can be proposed "
            f"without it; check the unit name (systemctl status {unit}).",
            kind="unit_file_error" if "not found" in error else "unknown",
            unit=unit,
        )
    roots = view.roots()
    if not roots:
        left = view.taken_down(unit)
        if left:
            return _start_left_down(view, unit, status, left)
        return healthy(view, unit, status)
    silent = [r for r in roots if view.running(r) and not view.hard_fault(r)]
    if len(silent) > 1 and not any(unchecked(view, available, r) for r in silent):
        return human_note(view, unit, which_waits(view, silent), roots)
    humans: list[Human] = []
    fixes: list[Fix] = []
    for root in roots:
        missing = unchecked(view, available, root)
        if missing:
            humans.append(
                Human(
                    "unknown",
                    root,
                    f"{root} is failing ({view.failing(root)}), but "
                    f"{', '.join(missing)} could not be checked within the steps available",
                    f"Look at systemctl status {root} and journalctl -u {root}; diagnose "
                    "again with more steps ([diagnose] max_steps).",
                )
            )
            continue
        result = _classify(view, root, roots)
        if isinstance(result, Human):
            humans.append(result)
        else:
            fixes.append(result)
    if humans:
        return human_note(view, unit, humans[0], roots)
    steps = _with_changes(view, _merged([fix.steps for fix in fixes], roots), roots)
    goal = "; ".join(fix.goal for fix in fixes)
    strangers = view.strangers()
    if strangers:
        # The plan is for the entry's chain only; the operator still learns of the rest.
        also = also_failing(view)
        steps[0] = {**steps[0], "reason": cut(steps[0]["reason"], 500 - len(also)) + also}
    return plan(goal, steps)


def _merged(fixes: list[list[dict[str, Any]]], roots: list[str]) -> list[dict[str, Any]]:
    """One plan of several roots' fixes: every root's own steps first, then what stopped
    with them, each unit acted on once (a unit that needs two failed roots is started
    after both, not once after each)."""
    own = [s for steps in fixes for s in steps if s["args"]["unit"] in roots]
    then = [s for steps in fixes for s in steps if s["args"]["unit"] not in roots]
    seen: set[tuple[str, str]] = set()
    merged = []
    for s in [*own, *then]:
        key = (s["tool"], s["args"]["unit"])
        if key not in seen:
            seen.add(key)
            merged.append(s)
    return merged


def _with_changes(
    view: View, steps: list[dict[str, Any]], roots: list[str]
) -> list[dict[str, Any]]:
    """Each root's first step says what changed for it since the host was healthy."""
    out, told = [], set()
    for s in steps:
        unit = s["args"]["unit"]
        changed = view.changed(unit) if unit in roots and unit not in told else ""
        told.add(unit)
        if changed:
            s = {**s, "reason": cut(f"{s['reason']} {changed}", 500)}
        out.append(s)
    return out


def unchecked(view: View, available: set[str], root: str) -> list[str]:
    """The reads that would tell how ``root`` fails and that were never made."""
    return sorted(
        {
            read.tool
            for read in evidence(view, root)
            if read.key not in view.found.asked and read.tool in available
        }
    )


def _start_left_down(view: View, unit: str, status: UnitStatus, left: list[str]) -> SubmitPlan:
    """``unit`` runs again (systemd restarted it), but what stopped with it did not
    start again: start those, dependencies first."""
    ordered = view.start_order(left)
    steps = [
        step(
            "start_unit",
            dep,
            {"active_state": ["inactive", "failed"]},
            f"{dep} depends on {unit} and went down with it; {unit} is "
            f"{status.active_state} again (NRestarts={status.n_restarts}) but {dep} was "
            "not started again.",
        )
        for dep in ordered
    ]
    return plan(f"Start {', '.join(ordered)}, which stopped with {unit}", steps)


def _classify(view: View, root: str, roots: list[str]) -> Human | Fix:
    """How one root fails: a reason no one may act on it now, or its failure mode as a
    unit that runs (running.py) or one that is down (down.py)."""
    status = view.status(root)
    if status is None:
        return Human(
            "unknown",
            root,
            f"{root} is failing, but its state could not be read",
            f"Look at systemctl status {root}.",
        )
    held_back = _held_back(view, root, status)
    if held_back is not None:
        return held_back
    if status.active_state in RUNNING:
        return decide_running(view, root, status)
    if root.endswith(".mount"):
        return failed_mount(view, root, status)
    return decide_down(view, root, status, roots)


def _held_back(view: View, root: str, status: UnitStatus) -> Human | None:
    """Why no plan may touch ``root`` now, whatever its failure mode: it is masked, its
    unit file is broken or changed since systemd loaded it, opsbot never acts on it, or
    systemd is starting or stopping it right now."""
    if status.load_state == "masked":
        return Human(
            "masked",
            root,
            f"{root} is masked (LoadState=masked, UnitFileState={status.unit_file_state})",
            f"systemd refuses to start it; if it should run, a human must unmask it "
            f"(systemctl unmask {root}) and start it.",
        )
    if status.load_state != "loaded" or status.need_daemon_reload:
        why = (
            f"LoadState={status.load_state}"
            + (f": {status.load_error}" if status.load_error else "")
            if status.load_state != "loaded"
            else "NeedDaemonReload=yes: its unit file changed on disk since systemd loaded it"
        )
        return Human(
            "unit_file_error",
            root,
            why,
            f"A human must fix or review its unit file ({status.fragment_path or 'none'}) "
            "and run systemctl daemon-reload first.",
        )
    denied = denied_reason(root)
    if denied is not None:
        return Human(
            "denylisted",
            root,
            f"{root} is failing ({view.failing(root)})",
            f"opsbot never acts on it (built-in denylist {denied!r}): a human must look.",
        )
    if status.active_state in ("activating", "deactivating") and not status.crash_looping:
        return Human(
            "in_transition",
            root,
            f"{root} is {status.active_state}/{status.sub_state} "
            f"(NRestarts={status.n_restarts}, {ended(status)})",
            "systemd is starting or stopping it for the first time since it was asked "
            "to; diagnose again once it settles.",
        )
    return None
