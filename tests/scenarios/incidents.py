"""Following a plan through its incident, as an operator reads it: its state once it
settles, and the follow-up diagnosis an UNRESOLVED plan started."""

from __future__ import annotations

import json

from testbed.container import BootedSystemd
from testbed.host import opsbot


def state(ct: BootedSystemd, plan_id: str, *done: str) -> str:
    """The plan's state once it is one of ``done`` (waited for, up to 90 s)."""

    def settled() -> str:
        now = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)["summary"]["state"]
        return str(now) if now in done else ""

    return ct.wait_for(settled, timeout=90, interval=0.5, what=f"plan {plan_id} {done}")


def follow_up_of(ct: BootedSystemd, plan_id: str) -> str:
    """The plan the follow-up diagnosis of ``plan_id`` proposed, "none" where it ended
    without one (waited for, up to 60 s)."""

    def started() -> str:
        out = ct.run(
            ["journalctl", "-o", "json", f"FOLLOW_UP_OF={plan_id}", "EVENT=diagnose.finished"],
            check=False,
        ).stdout
        entries = [json.loads(line) for line in out.splitlines() if line.strip()]
        return str(entries[0].get("PLAN_ID") or "none") if entries else ""

    return ct.wait_for(started, timeout=60, interval=0.5, what="the follow-up diagnosis")
