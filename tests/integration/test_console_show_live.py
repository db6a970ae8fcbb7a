"""``opsbot show`` on a real systemd, as an operator (olivia, group opsbot-operators,
not root): each precondition said as the unit is now, read with ``systemctl show`` as
any user may; ``as expected`` while the plan still fits the unit, ``not as expected``
once the unit moved on, as the apply would find it; for a plan that is final, no check."""

from __future__ import annotations

from testbed.container import BootedSystemd
from testbed.host import invocation, opsbot as console, restart_plan, submit

UNIT = "demo-db.service"


def shown(ct: BootedSystemd, plan_id: str) -> list[str]:
    done = console(ct, "show", plan_id, user="olivia")
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    return lines


def unfolded(lines: list[str]) -> str:
    """The lines as one text, a folded line joined to the one it continues."""
    return " ".join(line.strip() for line in lines)


def test_show_says_each_precondition_against_the_live_state(opsbot: BootedSystemd) -> None:
    """A plan made for demo-db as it runs now: every precondition as expected. After
    someone restarts demo-db by hand, the invocation line says it was started again, not
    as expected (the apply would find the plan STALE); a plan that wants it failed says it
    is active now, not as expected. Once the plan is rejected, show checks nothing any
    more."""
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
    assert f"     precondition: {UNIT} is active now: as expected" in lines
    assert (
        f"precondition: {UNIT} has not been started again since diagnosis: as expected"
        in unfolded(lines)
    ), lines

    ct.systemctl("restart", UNIT)
    after = invocation(ct, UNIT)
    assert after != before
    lines = shown(ct, plan_id)
    assert f"     precondition: {UNIT} is active now: as expected" in lines
    assert (
        f"precondition: {UNIT} was started again since diagnosis: not as expected "
        f"(invocation {after[:12]} now, {before[:12]} at diagnosis)"
    ) in unfolded(lines), lines

    wanting_failed = submit(ct, restart_plan(UNIT, goal="show me failed", active_state=["failed"]))
    assert wanting_failed["verdict"] == "ACCEPT", wanting_failed
    lines = shown(ct, wanting_failed["plan_id"])
    assert f"  1. {UNIT}: failed -> restart" in lines
    assert (
        f"precondition: {UNIT} is active now: not as expected (the plan expects failed)"
        in unfolded(lines)
    ), lines

    console(ct, "reject", plan_id)
    lines = shown(ct, plan_id)
    assert (
        f"     precondition: {UNIT} is active (not checked any more: the plan is REJECTED)" in lines
    )
    console(ct, "reject", wanting_failed["plan_id"])
