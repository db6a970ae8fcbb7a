"""Every ``opsbot`` verb on a real host, run by mallory (no opsbot group), olivia (group
opsbot-operators) and root, as install.sh leaves the files: each ends in its work or in
one ``opsbot: error:`` line with a non-zero status, never a traceback (issue 13, item 3).

The plan id is well formed but unknown, the units are out of scope: nothing here changes
what the other stories see (root's watch is undone by its unwatch)."""

from __future__ import annotations

import pytest

from opsbot_cli.main import COMMANDS
from opsbot_cli.say import unfold
from shared_io.exit_codes import WAITING
from testbed.container import BootedSystemd
from testbed.host import invocation, opsbot as cli, restart_plan, submit

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
    ["firewall"],
    ["firewall", "--write"],
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
        errors = [line for line in unfold(done.stderr) if line.startswith("opsbot: error:")]
        said = f"{user or 'root'}$ opsbot {' '.join(argv)} -> {done.returncode}\n{done.stderr}"
        if "Traceback" in done.stderr:
            failures.append(said)
        elif done.returncode == WAITING and argv[0] == "apply" and not errors:
            continue  # plans left waiting by earlier tests: "nothing approved", not an error
        elif done.returncode != 0 and len(errors) != 1 and argv != ["check-config"]:
            failures.append(said)
    assert not failures, "\n".join(failures)


def test_every_verb_fits_100_columns(opsbot: BootedSystemd) -> None:
    """What a person reads fits a 100-column terminal (issue 13, item 9): every verb and
    every --help, as an operator and as root, on a host with a real plan waiting (shown,
    dry-run, audited, diagnosed). --json and --verbose are where the whole text goes; an
    error and its hint fold to fit (opsbot_cli.say.unfold joins them back)."""
    ct = opsbot
    pinned = invocation(ct, "demo-web.service")
    reply = submit(ct, restart_plan("demo-web.service", invocation_id=pinned))
    plan_id = str(reply["plan_id"])
    with_plan = [
        ["plans"],
        ["show", plan_id],
        ["apply", "--dry-run"],
        ["audit", plan_id],
        ["diagnose", "demo-web.service"],
        ["--help"],
        ["--version"],
        *([name, "--help"] for name in (c.name for c in COMMANDS)),
    ]
    too_wide = []
    try:
        for user in ("olivia", None):
            for argv in [*with_plan, *(a for a in EVERY_VERB if a[0] != "polkit-rule")]:
                done = cli(ct, *argv, user=user, check=False, timeout=180)
                for line in (done.stdout + done.stderr).splitlines():
                    if len(line) > 100:
                        too_wide.append(f"{user or 'root'}$ opsbot {' '.join(argv)}: {line}")
    finally:
        cli(ct, "reject", plan_id, "--reason", "width test")
    assert not too_wide, "\n".join(too_wide)
