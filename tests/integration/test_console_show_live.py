"""``opsbot show`` on a real systemd, as an operator (olivia, group opsbot-operators,
not root): each precondition in words beside the unit's live state, read with
``systemctl show`` as any user may; ``yes`` while the plan still fits the unit, ``NO``
once the unit moved on, as the apply would find it; for a plan that is final, no check."""

from __future__ import annotations

from testbed.container import BootedSystemd
from testbed.host import invocation, restart_plan, submit
from testbed.host import opsbot as console

UNIT = "demo-db.service"


def shown(ct: BootedSystemd, plan_id: str) -> list[str]:
    done = console(ct, "show", plan_id, user="olivia")
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    return lines


def test_show_says_each_precondition_against_the_live_state(opsbot: BootedSystemd) -> None:
    """A plan made for demo-db as it runs now: every precondition ``yes``. After someone
    restarts demo-db by hand, the invocation line says ``NO`` (the apply would find the
    plan STALE); a plan that wants it failed says ``NO`` with ``live: active``. Once the
    plan is rejected, show checks nothing any more."""
    ct = opsbot
    before = invocation(ct, UNIT)
    reply = submit(
        ct,
        restart_plan(UNIT, goal="show me live", active_state=["active"], invocation_id=before),
    )
    assert reply["verdict"] == "ACCEPT", reply
    plan_id = reply["plan_id"]
    lines = shown(ct, plan_id)
    assert f"  1. {UNIT}: active -> restart" in lines
    assert f"     precondition: {UNIT} is active now (live: active): yes" in lines
    assert any(line.endswith(f"live: {before[:12]}): yes") for line in lines if "live:" in line), (
        lines
    )

    ct.systemctl("restart", UNIT)
    after = invocation(ct, UNIT)
    assert after != before
    lines = shown(ct, plan_id)
    assert f"     precondition: {UNIT} is active now (live: active): yes" in lines
    assert any(line.endswith(f"live: {after[:12]}): NO") for line in lines), lines

    wanting_failed = submit(ct, restart_plan(UNIT, goal="show me failed", active_state=["failed"]))
    assert wanting_failed["verdict"] == "ACCEPT", wanting_failed
    lines = shown(ct, wanting_failed["plan_id"])
    assert f"  1. {UNIT}: failed -> restart" in lines
    assert f"     precondition: {UNIT} is failed now (live: active): NO" in lines

    console(ct, "reject", plan_id)
    lines = shown(ct, plan_id)
    assert (
        f"     precondition: {UNIT} is active (not checked any more: the plan is REJECTED)" in lines
    )
    console(ct, "reject", wanting_failed["plan_id"])
