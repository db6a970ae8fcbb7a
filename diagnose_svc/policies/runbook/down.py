"""A root that is down: what still stops it from starting, checked in the order an
operator checks (room on its filesystems, the files it names, its port, a setting its
last words call invalid, a start check that fails the same way, a program that dies
starting with nothing changed); each cause is a note for a human. When none remains, it
is started again (its start limit cleared first if systemd gave up), and what stopped
with it after it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnose_svc.policies import leads
from diagnose_svc.policies.runbook import certificates
from diagnose_svc.policies.runbook.constants import LAST_WORDS
from diagnose_svc.policies.runbook.last_run import (
    changed_after,
    died_starting,
    failed_starting,
    since,
)
from diagnose_svc.policies.runbook.outcomes import Fix, Human, step
from diagnose_svc.policies.runbook.port_held import port_held
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import (
    cut,
    ended,
    full_words,
    loop_words,
    read_only_words,
)
from diagnose_svc.tools import JournalLine, UnitStatus
from diagnose_svc.tools.disk_usage import FULL_FREE_BYTES

#: One check of a down unit: the cause it found (a Human), what it ruled out (a fact
#: for the plan's reason), or None when it had nothing to check.
Check = Callable[[View, str, UnitStatus], Human | str | None]


def decide_down(view: View, root: str, status: UnitStatus, roots: list[str]) -> Human | Fix:
    """The first cause that stops ``root`` from starting, or the plan to start it."""
    checked: list[str] = []
    for check in _CHECKS:
        outcome = check(view, root, status)
        if isinstance(outcome, Human):
            return outcome
        if outcome is not None:
            checked.append(outcome)
    if status.crash_looping:
        return _loop_unexplained(view, root, status, checked)
    return _start_again(view, root, status, roots, checked)


def _loop_unexplained(view: View, root: str, status: UnitStatus, checked: list[str]) -> Human:
    """systemd keeps restarting it, what it depends on is healthy, and nothing checked
    stops it: a start would be one more turn of the loop. Its last words say why it
    exits (a lead for the human, never a decision)."""
    episode = _episode(view, root, status)
    last = episode[-1].message if episode else ""
    said = f'; its last words: "{cut(last, 160)}"' if last else ""
    facts = "; ".join(checked) or "nothing it needs was found missing"
    return Human(
        "crash_loop",
        root,
        f"{root} is {loop_words(status)}, while what it depends on is healthy ({facts}){said}",
        f"systemd restarts it by itself, so a start changes nothing: a human must find why "
        f"it exits (journalctl -u {root}) and fix that.",
    )


def _room_on_disk(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """A full filesystem it writes to stops it from starting."""
    disk = view.found.disk.get(root)
    if disk is None:
        return None
    if disk.read_only:
        return Human(
            "read_only",
            root,
            read_only_words(disk.read_only[0]),
            f"A human must find why it is read-only (dmesg: the kernel remounts a "
            f"filesystem read-only after I/O errors) and remount it read-write, then start "
            f"{root}.",
        )
    full = disk.full
    if full:
        d = full[0]
        inodes = d.free_inodes == 0 and d.free_bytes >= FULL_FREE_BYTES
        return Human(
            "disk_full",
            root,
            full_words(d),
            f"A human must {'remove files' if inodes else 'free space'} there (or grow it), "
            f"then start {root}.",
        )
    return "its filesystems have room"


def _files_in_place(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """Every file its unit names must exist (unless optional), then be readable by (or,
    for a program, runnable by) its user."""
    unit_file = view.found.unit_file.get(root)
    if unit_file is None:
        return None
    for path in unit_file.paths:
        if path.exists is False and not path.optional:
            return Human(
                "missing_file",
                root,
                f"{path.path}, which its {path.role} names, does not exist",
                f"A human must restore it or fix the unit, then start {root}.",
            )
    for path in unit_file.paths:
        if path.exists and path.readable_by_unit is False:
            return Human(
                "permission_denied",
                root,
                f"{path.path} ({path.role}) is {path.kind} {path.mode} "
                f"{path.owner}:{path.group}, which its user {unit_file.user} cannot "
                f"{'run' if path.role.endswith('program') else 'read'}",
                f"A human must fix the permissions (or User=/Group=), then start {root}.",
            )
    return "every file it names exists and is readable by its user"


def _port_free(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """Another process holding its port stops it from binding."""
    held = port_held(view, root)
    if held is not None:
        return held
    return "its port is free" if view.found.listeners else None


def _setting_it_rejects(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """A setting its last words before it failed starting call invalid, which its unit
    file really sets. Only those words can name it: a line it logged while serving (a
    request line is enough) cannot."""
    unit_file = view.found.unit_file.get(root)
    if unit_file is None or not failed_starting(status):
        return None
    environment = set(unit_file.environment)
    for key, value, line in leads.settings_named(_episode(view, root, status)[-LAST_WORDS:]):
        if f"{key}={value}" in environment:
            files = ", ".join(unit_file.files) or "its unit file"
            return Human(
                "config_error",
                root,
                f"its environment sets {key}={value} (systemctl cat {root}: {files}), "
                f'and every attempt to start it ended saying "{cut(line.message, 160)}"',
                f"A human must fix that setting, then run systemctl reset-failed {root} "
                "and start it.",
            )
    return None


def _start_check_unchanged(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """Its ExecStartPre= check failed, and nothing it checks changed since: a start
    would fail the same way."""
    failed = status.failed_command
    unit_file = view.found.unit_file.get(root)
    if failed is None or failed.phase != "ExecStartPre" or unit_file is None:
        return None
    changed = changed_after(unit_file.paths, status.inactive_enter_timestamp, failed.argv)
    if not changed and status.result == "timeout":
        return Human(
            "timeout",
            root,
            f"its start timed out: ExecStartPre={cut(failed.argv, 140)} was still running "
            f"when its start timeout (TimeoutStartSec=) ran out, and systemd killed it "
            f"(signal {failed.status}); what it waits for did not answer in time",
            f"A start would wait the same way until what the check waits for answers "
            f"(journalctl -u {root} shows its words); a human must find it, then start "
            f"{root}.",
        )
    if not changed:
        return Human(
            "config_error",
            root,
            f"its start check failed: ExecStartPre={cut(failed.argv, 140)} "
            f"{failed.code} with status {failed.status}, and nothing it checks "
            "changed since",
            f"The check will fail the same way until a human fixes what it checks "
            f"(journalctl -u {root} shows its words), then starts {root}.",
        )
    return f"{', '.join(changed)} changed after its start check failed"


def _program_dies_starting(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """Its program exited with an error before it was serving, and nothing it was
    started with changed since: a start would fail the same way."""
    failed = status.failed_command
    unit_file = view.found.unit_file.get(root)
    if failed is None or not died_starting(status, failed) or unit_file is None:
        return None
    changed = changed_after(unit_file.paths, status.inactive_enter_timestamp, failed.argv)
    if not changed:
        episode = _episode(view, root, status)
        gone = _cause_gone(view, root, episode[-LAST_WORDS:])
        if gone is not None:
            return gone
        last = episode[-1].message if episode else ""
        said = f'; its last words: "{cut(last, 160)}"' if last else ""
        return Human(
            "config_error",
            root,
            f"its program exited with status {failed.status} "
            f"{failed.ran_seconds:.1f} s after it started, before it was serving, and "
            f"nothing it was started with changed after it failed{said}",
            f"It fails while starting: a start would fail the same way until a human "
            f"fixes what it reads (journalctl -u {root} tells what), then starts it.",
        )
    return f"{', '.join(changed)} changed after it failed starting"


def _cause_gone(view: View, root: str, last: list[JournalLine]) -> str | None:
    """What its last words before it failed blamed, which the present shows gone: the
    port they said was in use is free now, the filesystem they said was full has room,
    the file they said was missing is there. Then its last words are history, and a
    start is what an operator would try. Each is checked by a read tool, never taken
    from the words alone."""
    ports = named_ports = leads.ports_named(last)
    if not ports and leads.says(last, leads.ADDRESS_IN_USE):
        # "Address already in use" naming no port (Python's OSError, Go's bind error):
        # its own address, from its health target or the host when it was healthy.
        ports = view.own_ports(root)
    free = [
        p
        for p in ports
        if (seen := view.found.listeners.get(str(p))) is not None and not seen.listeners
    ]
    if ports and free == ports:
        said = ", ".join(str(p) for p in ports)
        if named_ports:
            return f"port {said}, which its last words said was in use, is free now"
        return f"its port {said} is free now (its last words said its address was in use)"
    disk = view.found.disk.get(root)
    if leads.says(last, leads.NO_SPACE) and disk is not None and disk.directories and not disk.full:
        return "the filesystem its last words said was full has room now"
    unit_file = view.found.unit_file.get(root)
    named = leads.paths_named(last)
    if named and unit_file is not None:
        there = {p.path for p in unit_file.paths if p.exists}
        if all(path in there for path in named):
            return f"{', '.join(named)}, which its last words said was missing, is there now"
    return None


def _certificate_valid(view: View, root: str, status: UnitStatus) -> Human | str | None:
    """A certificate its own output says was refused, which a read shows expired (its
    own, or that of a unit it reaches): a start would be refused the same way."""
    return certificates.expired(view, root)


_CHECKS: tuple[Check, ...] = (
    _certificate_valid,
    _room_on_disk,
    _files_in_place,
    _port_free,
    _setting_it_rejects,
    _start_check_unchanged,
    _program_dies_starting,
)


def _episode(view: View, root: str, status: UnitStatus) -> list[JournalLine]:
    """Its own journal lines of its current trouble (none when its journal was not read)."""
    tail = view.found.journal.get(root)
    return leads.own_lines(tail, since(tail, status)) if tail is not None else []


def _start_after(view: View, unit: str, root: str) -> dict[str, Any]:
    """The step that starts ``unit`` again after ``root``, which it depends on: pinned to
    the state it is in now (one that failed while ``root`` was down stays failed until
    someone acts; one still stopping may be either when the step runs)."""
    status = view.status(unit)
    if status is not None and status.active_state == "failed":
        return step(
            "start_unit",
            unit,
            {"active_state": ["failed"]},
            f"{unit} depends on {root} and failed while it was down ({ended(status)}); "
            "start it again after it.",
        )
    return step(
        "start_unit",
        unit,
        {"active_state": ["inactive", "failed"]},
        f"{unit} depends on {root} and stopped with it; start it again after it.",
    )


def _start_again(
    view: View, root: str, status: UnitStatus, roots: list[str], checked: list[str]
) -> Fix:
    """Nothing that remains stops it: start it again, its start limit cleared first if
    systemd gave up, then the units that stopped with it."""
    facts = "; ".join(checked) or "nothing shows a cause that remains"
    down = view.dependents_down(root, roots)
    then = [_start_after(view, unit, root) for unit in down]
    after = f", then {', '.join(down)}, which stopped with it" if down else ""
    then_healthy = view.since_healthy(root)
    if _start_limit_hit(view, root, status):
        return _clear_limit_and_start(root, status, facts, then, after)
    return Fix(
        [
            step(
                "start_unit",
                root,
                {"active_state": [status.active_state]},
                " ".join(
                    part
                    for part in (
                        f"{root} is {status.active_state} ({ended(status)}); checked: "
                        f"{facts}; so starting it again should bring it back.",
                        view.why_needed(root, baseline=not then_healthy),
                        then_healthy,
                    )
                    if part
                ),
            ),
            *then,
        ],
        f"Start {status.active_state} {root}{after}",
    )


def _start_limit_hit(view: View, root: str, status: UnitStatus) -> bool:
    """systemd gave up restarting it: its journal says so, or Result=start-limit-hit."""
    tail = view.found.journal.get(root)
    limit = leads.start_limit_hit(tail, since(tail, status)) if tail is not None else None
    return limit is not None or status.result == "start-limit-hit"


def _clear_limit_and_start(
    root: str, status: UnitStatus, facts: str, then: list[dict[str, Any]], after: str
) -> Fix:
    seen = "systemd gave up restarting it (start limit)"
    return Fix(
        [
            step(
                "reset_failed_unit",
                root,
                {"active_state": [status.active_state]},
                f"{root} is {status.active_state} ({ended(status)}, "
                f"NRestarts={status.n_restarts}): {seen}. Checked: {facts}. Clearing "
                "the failed state resets the limit.",
            ),
            step(
                "start_unit",
                root,
                {"active_state": ["inactive", "failed"]},
                f"Start {root} again once its start limit is reset.",
            ),
            *then,
        ],
        f"Clear the start limit of {root} and start it{after}",
    )
