"""A root that runs but fails: a reload that failed (a note: it runs the previous
configuration), a process that is stopped or does not answer (restarted, pinned to its
invocation), connections refused (its port held by another process, or a note), answers
of errors after a file it was started with changed (reloaded), answers of errors while
a dependency it reaches was started again after it was (restarted: it may hold a
session to the instance that went away), a certificate it or its peer serves that
expired (a note), or else its own fault (a note)."""

from __future__ import annotations

from datetime import datetime

from diagnose_svc.policies import leads
from diagnose_svc.policies.runbook import certificates, queues
from diagnose_svc.policies.runbook.outcomes import Fix, Human, pinned, step
from diagnose_svc.policies.runbook.port_held import port_held
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import health_words
from diagnose_svc.tools import HealthResult, UnitStatus


def decide_running(view: View, root: str, status: UnitStatus) -> Human | Fix:
    """What to do about ``root``, which systemd says runs but which fails."""
    failed_reload = view.reload_failed(root)
    if failed_reload:
        return Human(
            "config_error",
            root,
            f"{root} runs, but its last reload failed ({failed_reload}): it runs the "
            "previous configuration",
            "A human must fix the configuration and reload again; a restart would load "
            "the broken one and take it down.",
        )
    stuck = view.process_stuck(root)
    bad = view.health_failing(root)
    if stuck or any(h.outcome == "timeout" for h in bad):
        return _restart_unanswering(root, status, stuck, bad)
    refused = [h for h in bad if h.outcome in ("connection_refused", "connection_error")]
    if refused:
        return _refused(view, root, refused)
    expired = certificates.expired(view, root)
    if expired is not None:
        return expired
    ran_out = view.ran_out(root)
    if ran_out is not None:
        return _ran_out(root, status, *ran_out)
    stale = queues.stale_drain(view.found, view.links(), root)
    if stale is not None:
        return Fix(
            [step("restart_unit", root, pinned(status), f"{root} runs, but {stale}.")],
            f"Restart {root}, which drains a queue that backs up",
        )
    reloaded = _load_changed(view, root, status, bad)
    if reloaded is not None:
        return reloaded
    came_back = _dependency_came_back(view, root, status, bad)
    if came_back is not None:
        return came_back
    first = bad[0] if bad else None
    what = f"health target {first.target} {health_words(first)}" if first else "it fails"
    return Human(
        "app_error",
        root,
        f"{root} is active and its dependencies are healthy, but {what}",
        f"Its own logs (journalctl -u {root}) tell why; nothing it was started with changed, "
        "so no restart or reload is proposed.",
    )


#: What a restart does about each resource a unit can run out of: the unit's own
#: descriptors, tasks and memory go with its processes; a full filesystem stays full.
_FREED_BY_RESTART = {
    "descriptors": "raise LimitNOFILE= or find what leaks them",
    "tasks": "raise TasksMax= or find what leaks them",
    "memory": "raise MemoryMax= or find what grows",
}


def _ran_out(root: str, status: UnitStatus, resource: str, facts: str) -> Human | Fix:
    """It runs, and ran out of ``resource``: a full filesystem is a human's to free (a
    restart frees nothing there); its own descriptors, tasks or memory go with its
    processes, so a restart brings it back, and the cause stays named in the plan."""
    if resource == "disk":
        return Human(
            "disk_full",
            root,
            facts,
            f"A human must free room there (or grow it); {root} keeps failing to write "
            "until then, and a restart frees nothing on a filesystem.",
        )
    if resource == "read_only":
        return Human(
            "read_only",
            root,
            facts,
            "A human must find why it is read-only (the kernel remounts a filesystem "
            "read-only after I/O errors: dmesg) and remount it read-write; a restart "
            "writes to the same filesystem.",
        )
    return Fix(
        [
            step(
                "restart_unit",
                root,
                pinned(status),
                f"{root} ran out of {resource}: {facts}. A restart gives it back what its "
                f"processes held; the cause remains: {_FREED_BY_RESTART[resource]}.",
            )
        ],
        f"Restart {root}, which ran out of {resource}",
    )


def _restart_unanswering(
    root: str, status: UnitStatus, stuck: str | None, bad: list[HealthResult]
) -> Fix:
    """Its process is stopped, or its health target times out: alive but not serving."""
    why = stuck or "; ".join(f"health target {h.target} {health_words(h)}" for h in bad)
    return Fix(
        [
            step(
                "restart_unit",
                root,
                pinned(status),
                f"{root} is active (invocation {status.invocation_id[:12]}) but {why}: "
                "it is alive but not serving. Its dependencies are healthy.",
            )
        ],
        f"Restart {root}, which runs but does not answer",
    )


def _refused(view: View, root: str, refused: list[HealthResult]) -> Human:
    """It runs but refuses connections: another process holds its port, or it does not
    listen where its health target expects."""
    held = port_held(view, root)
    if held is not None:
        return held
    return Human(
        "app_error",
        root,
        f"{root} is active but health target {refused[0].target} {health_words(refused[0])}",
        f"Check that {root} listens where the target expects (and that nothing else "
        "does); no restart is proposed.",
    )


def _load_changed(view: View, root: str, status: UnitStatus, bad: list[HealthResult]) -> Fix | None:
    """It answers errors and a file it was started with (not its program) changed after
    it last loaded them: reload it (or restart it, when it cannot reload)."""
    unit_file = view.found.unit_file.get(root)
    loaded = _last_loaded(view, root, status)
    if unit_file is None or loaded is None:
        return None
    changed = [
        p.path
        for p in unit_file.paths
        if p.modified is not None and p.modified > loaded and not p.role.endswith("program")
    ]
    if not changed:
        return None
    tool = "reload_unit" if status.can_reload else "restart_unit"
    return Fix(
        [
            step(
                tool,
                root,
                pinned(status),
                f"{root} answers {bad[0].status if bad else 'errors'} while its "
                f"dependencies are healthy, and {', '.join(changed)} changed after it "
                f"last loaded it ({loaded:%H:%M:%S} UTC): it serves the old one.",
            )
        ],
        f"{'Reload' if status.can_reload else 'Restart'} {root} to load its changed configuration",
    )


def _dependency_came_back(
    view: View, root: str, status: UnitStatus, bad: list[HealthResult]
) -> Fix | None:
    """It answers errors while every dependency is up, and one of them was started
    again after it was: it went away and came back under it, and a client that holds a
    connection or a session to it (a pool, a login, a prepared statement) keeps the
    dead one until it is restarted. Facts only: the two start times, both read now."""
    began = status.exec_main_start_timestamp
    if began is None or not bad:
        return None
    for dep in view.deps(root):
        dep_status = view.status(dep)
        if dep_status is None or dep_status.active_state != "active":
            continue
        again = dep_status.exec_main_start_timestamp
        if again is None or again <= began:
            continue
        return Fix(
            [
                step(
                    "restart_unit",
                    root,
                    pinned(status),
                    f"{root} answers {bad[0].status or bad[0].outcome} while its dependencies "
                    f"are up, and {dep} was started again at {again:%H:%M:%S} UTC, after "
                    f"{root} started ({began:%H:%M:%S} UTC): {root} may still hold its "
                    f"connections to the {dep} that went away.",
                )
            ],
            f"Restart {root}, whose dependency {dep} came back under it",
        )
    return None


def _last_loaded(view: View, root: str, status: UnitStatus) -> datetime | None:
    """When it last read its configuration: its main process's start, or its last
    reload its journal shows, whichever is later."""
    tail = view.found.journal.get(root)
    return max(
        [
            t
            for t in (
                status.exec_main_start_timestamp,
                leads.last_reload(tail) if tail else None,
            )
            if t
        ],
        default=None,
    )
