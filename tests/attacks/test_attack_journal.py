"""Attack: the diagnose user floods the journal until the executor's ``plan.accepted``
entries rotate out of it.

Every approval believes a stored plan only when opsbot-executor.service's own
``plan.accepted`` entry names its sha256 (plans/witness.py): the store is the executor's
uid's to write, the entry journald's. A subverted diagnosis runs in opsbot-diagnose.service
(its cgroup, its uid) and may log as much as it likes. The journal is made small here
(16 MiB, restored after) so that rotation comes within seconds.

1. A flood of large entries, which no count limits (as any local user can send): the
   entry rotates out, and approve fails closed, saying why and what to do.
2. A flood of lines: journald's rate limit on the diagnose user's units
   (``LogRateLimitBurst=``) drops all but a few thousand; the journal does not rotate,
   and root approves the plan that waited.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd
from testbed.host import approve
from tests.attacks.inside import as_diagnose_in_its_unit, propose, reject_quietly

DROP_IN = "/etc/systemd/journald.conf.d/90-attack-small.conf"
SMALL = "[Journal]\nSystemMaxUse=16M\nSystemMaxFileSize=2M\n"
#: units/opsbot-diagnose.service's LogRateLimitBurst=500 per 30 s, as journald scales it
#: for a journal of 16 MiB (at most twice), for each of its five priority pools.
BURST, POOLS = 1000, 5

#: As the diagnose user: log argv[2] entries of argv[3] random bytes each (hex), every
#: priority in turn, each marked FLOOD=argv[1].
FLOOD = """
import os, sys, time
from systemd import journal
mark, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(count):
    journal.send(os.urandom(size // 2).hex(), PRIORITY=str(n % 8), FLOOD=mark)
time.sleep(1)  # journald reads the sender's cgroup while it lives
"""


@pytest.fixture
def small_journal(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The container's journal capped at 16 MiB (journald restarted), as before after."""
    ct = opsbot
    ct.write_file(DROP_IN, SMALL)
    ct.systemctl("restart", "systemd-journald.service")
    try:
        yield ct
    finally:
        ct.run(["rm", "-f", DROP_IN])
        ct.systemctl("restart", "systemd-journald.service")


def flood(ct: BootedSystemd, count: int, size: int) -> int:
    """``count`` entries of ``size`` bytes from inside opsbot-diagnose.service, as its
    user; how many journald kept."""
    mark = secrets.token_hex(4)
    as_diagnose_in_its_unit(ct, FLOOD, mark, str(count), str(size))
    kept = ct.run(["journalctl", "-o", "json", "--output-fields=FLOOD", f"FLOOD={mark}"])
    return len(kept.stdout.splitlines())


def witnessed(ct: BootedSystemd, plan_id: str) -> bool:
    """Whether the journal still holds the executor's plan.accepted of ``plan_id``."""
    out = ct.journal("-o", "json", f"PLAN_ID={plan_id}", "EVENT=plan.accepted")
    return any(
        json.loads(line).get("_SYSTEMD_UNIT") == "opsbot-executor.service"
        for line in out.splitlines()
    )


def test_a_flood_from_the_diagnose_unit_rotates_no_witness_away_or_approve_refuses(
    small_journal: BootedSystemd,
) -> None:
    """1. 40 entries of 512 KiB (20 MiB) from the diagnose unit, within journald's burst:
    the journal rotates the plan's plan.accepted out; root's approve refuses (exit 5),
    says the journal begins after the plan was submitted, and to diagnose again; nothing
    was approved.
    2. Then 60,000 lines (30 MiB and more): journald keeps at most its burst per
    priority pool (4,374 when measured), the next plan's plan.accepted stays, and root
    approves it."""
    ct = small_journal
    large = propose(ct, "demo-web.service", "flood of large entries")
    assert flood(ct, 40, 512 * 1024) > 0
    assert not witnessed(ct, large)
    refused = approve(ct, large, check=False)
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 5, refused
    assert f"no plan.accepted entry of opsbot-executor.service for plan {large}" in said
    assert "after the plan was submitted" in said and "it was rotated or vacuumed" in said
    assert "hint: diagnose again for a new plan" in said
    assert not (ct.root / f"var/lib/opsbot-approvals/{large}.approval").exists()
    reject_quietly(ct, large)

    lines = propose(ct, "demo-web.service", "flood of lines")
    kept = flood(ct, 60_000, 300)
    # The flood may straddle two of the rate limit's intervals.
    assert kept <= 2 * BURST * POOLS, f"journald kept {kept} of the diagnose unit's lines"
    assert witnessed(ct, lines), "a flood of lines rotated plan.accepted out of the journal"
    approve(ct, lines)
