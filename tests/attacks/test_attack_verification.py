"""Attack: a subverted diagnose process says VERIFIED where it cannot be true.

With the diagnose user's uid (the only one that may report a verification), an
attacker who wants a broken fix recorded as good reports VERIFIED the moment the plan
is applied, while the unit it restarted is dead. The executor reads the plan's units
itself (systemctl show) and refuses: before the settle window ended, and after it while
the unit is failed; the plan stays APPLIED and the real opsbot-verify's verdict still
lands. (On the code before this check, both reports were accepted: VERIFIED.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd
from testbed.host import request
from tests.attacks.inside import apply_now, approved, detail, state_and_reason

UNIT = "demo-db.service"
#: [executor] settle_seconds of the tests' config.
SETTLE = 3.0


@pytest.fixture
def verify_paused(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """opsbot-verify's path and timer stopped: the attacker's report comes first."""
    opsbot.systemctl("stop", "opsbot-verify.path", "opsbot-verify.timer", "opsbot-apply.path")
    yield opsbot
    opsbot.systemctl("start", UNIT)
    opsbot.systemctl("start", "opsbot-verify.path", "opsbot-verify.timer", "opsbot-apply.path")


def forged(plan_id: str, sha256: str) -> dict[str, object]:
    return {
        "v": 1,
        "op": "verify",
        "plan_id": plan_id,
        "sha256": sha256,
        "result": "verified",
        "evidence": [f"{UNIT} is active/running (forged)"],
        "seconds": 10.0,
    }


def test_a_verified_report_while_the_unit_is_dead_is_refused(verify_paused: BootedSystemd) -> None:
    """The diagnose uid reports VERIFIED at once after the apply, then after the window,
    while the restarted unit lies dead: both refused, saying why; the plan is still
    APPLIED, and opsbot-verify's own look ends it UNRESOLVED."""
    ct = verify_paused
    plan_id = approved(ct, UNIT, "verify while dead")
    apply_now(ct)
    assert state_and_reason(ct, plan_id)[0] == "APPLIED"
    sha = detail(ct, plan_id)["summary"]["sha256"]
    ct.systemctl("kill", "--signal=SIGKILL", "--", UNIT)
    ct.wait_for(
        lambda: ct.systemctl("show", "-P", "ActiveState", UNIT).stdout.strip() == "failed",
        timeout=10,
        what=f"{UNIT} failed",
    )

    at_once = request(ct, forged(plan_id, sha))
    assert at_once["verdict"] == "REJECT", at_once
    assert "before its 3 s window ended" in at_once["reason"]

    ct.wait_for(
        lambda: request(ct, forged(plan_id, sha))["reason"].endswith(f"{UNIT} is failed"),
        timeout=SETTLE + 10,
        interval=0.5,
        what="the refusal naming the dead unit, once the window is over",
    )
    assert state_and_reason(ct, plan_id)[0] == "APPLIED"

    ct.systemctl("start", "opsbot-verify.service")  # the real verdict still lands
    assert state_and_reason(ct, plan_id)[0] == "UNRESOLVED"
