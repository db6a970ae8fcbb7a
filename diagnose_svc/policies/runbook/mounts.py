"""A mount a unit needs that is not there: a ``.mount`` unit (one the host's fstab or a
unit file makes, or one a unit's RequiresMountsFor= pulls in) that failed. A start of
the units that need it would fail with "Dependency failed" until what it mounts is back
(the disk attached, the server reachable) or the mount is fixed: a note for a human,
naming the mount point and the mount's own last words; opsbot mounts nothing."""

from __future__ import annotations

import re

from diagnose_svc.policies import leads
from diagnose_svc.policies.runbook.outcomes import Human
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import cut, ended
from diagnose_svc.tools import UnitStatus

_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def mount_point(unit: str) -> str:
    """The path a ``.mount`` unit's name spells (``systemd-escape --unescape --path``)."""
    name = unit.removesuffix(".mount")
    if name == "-":
        return "/"
    path = "/" + name.replace("-", "/")
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), path)


def failed_mount(view: View, root: str, status: UnitStatus) -> Human:
    tail = view.found.journal.get(root)
    words = leads.own_lines(tail, None) if tail is not None else []
    # mount(8)'s line naming the mount point says why; its last line is often a hint.
    where = mount_point(root)
    naming = [w for w in words if where in w.message] or words
    said = f'; the mount said "{cut(naming[-1].message, 200)}"' if naming else ""
    needing = [u for u in view.dependents(root) if u in view.found.status and view.failing(u)]
    then = f" and what needs it ({', '.join(needing[:4])})" if needing else ""
    return Human(
        "mount_failed",
        root,
        f"{where} is not mounted: {root} is {status.active_state} ({ended(status)}){said}",
        f"A human must bring back what it mounts (the disk attached, the server "
        f"reachable) or fix the mount (systemctl status {root}), then start it{then}; "
        'opsbot mounts nothing, and a start of what needs it fails with "Dependency '
        'failed" until then.',
    )
