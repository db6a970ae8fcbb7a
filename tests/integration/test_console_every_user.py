"""Every ``opsbot`` verb on a real host, run by mallory (no opsbot group), olivia (group
opsbot-operators) and root, as install.sh leaves the files: each ends in its work or in
one ``opsbot: error:`` line with a non-zero status, never a traceback (issue 13, item 3).

The plan id is well formed but unknown, the units are out of scope: nothing here changes
what the other stories see (root's watch is undone by its unwatch)."""

from __future__ import annotations

import pytest

from testbed.container import BootedSystemd
from testbed.host import opsbot as cli

PLAN_ID = "20261129-213500-1a2b3c4d"
UNIT = "opsbot-no-such-unit.service"
#: One invocation of every verb, in an order that undoes what root's watch did.
EVERY_VERB = [
    ["plans"],
    ["show", PLAN_ID],
    ["approve", PLAN_ID, "--sha256", "0123456789ab", "--ttl", "5m"],
    ["approve", PLAN_ID, "--sha256", "0123456789ab", "--ttl", "-5"],
    ["reject", PLAN_ID, "--reason", "not now"],
    ["archive-approvals"],
    ["apply", "--dry-run"],
    ["apply"],
    ["audit", PLAN_ID],
    ["diagnose", UNIT],
    ["watch", UNIT],
    ["unwatch", UNIT],
    ["check-config"],
    ["polkit-rule"],
    ["polkit-rule", "--write"],
]


@pytest.mark.parametrize("user", ["mallory", "olivia", None], ids=["mallory", "olivia", "root"])
def test_every_verb_ends_without_a_traceback_for_every_user(
    opsbot: BootedSystemd, user: str | None
) -> None:
    """A plain user, an operator and root each get their work done or one line saying
    what to do (the group, or root), with a non-zero status: no traceback anywhere."""
    failures = []
    for argv in EVERY_VERB:
        done = cli(opsbot, *argv, user=user, check=False, timeout=180)
        errors = [line for line in done.stderr.splitlines() if line.startswith("opsbot: error:")]
        said = f"{user or 'root'}$ opsbot {' '.join(argv)} -> {done.returncode}\n{done.stderr}"
        if "Traceback" in done.stderr:
            failures.append(said)
        elif done.returncode != 0 and len(errors) != 1 and argv != ["check-config"]:
            failures.append(said)
    assert not failures, "\n".join(failures)
