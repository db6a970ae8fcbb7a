"""On a host without polkit: the documented drop-ins run the executor and the apply as
root with an empty capability set, `opsbot check-config` says so, and an approved plan
still restarts its unit. Uses a container of its own, with polkit masked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd, can_boot
from testbed.host import (
    DEMO_UNIT,
    REPO,
    SETTLED,
    STEPS_RAN,
    TEST_CONFIG,
    approve,
    invocation,
    restart_plan,
    submit,
    wait_state,
)
from testbed.skips import skip_unless


@pytest.fixture(scope="module")
def rootmode() -> Iterator[BootedSystemd]:
    ok, reason = can_boot()
    skip_unless(ok, reason)
    with BootedSystemd() as ct:
        ct.systemctl("mask", "--now", "polkit.service")
        ct.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)
        ct.write_file("/etc/systemd/system/demo-web.service", DEMO_UNIT.format(name="demo-web"))
        ct.run(
            ["bash", f"{REPO}/packaging/install.sh", "--offline", "--enable", "--without-polkit"],
            timeout=300,
        )
        ct.systemctl("start", "demo-web.service")
        yield ct


def test_check_config_reports_root_without_capabilities(rootmode: BootedSystemd) -> None:
    """check-config names the mode, and the units really run as root with no capabilities."""
    info = json.loads(rootmode.run(["opsbot", "check-config", "--json"]).stdout)
    assert info["privilege_mode"] == "root-without-capabilities"
    for unit in ("opsbot-executor.service", "opsbot-apply.service"):
        shown = rootmode.systemctl(
            "show", "-p", "User", "-p", "CapabilityBoundingSet", unit
        ).stdout.split()
        assert "User=root" in shown
        assert "CapabilityBoundingSet=" in shown


def test_approved_plan_restarts_the_unit_without_polkit(rootmode: BootedSystemd) -> None:
    """Submit, approve, and the path unit's apply (root, no capabilities) restarts it."""
    before = invocation(rootmode, "demo-web.service")
    reply = submit(rootmode, restart_plan("demo-web.service", active_state=["active"]))
    assert reply["verdict"] == "ACCEPT", reply
    approve(rootmode, reply["plan_id"])
    assert wait_state(rootmode, reply["plan_id"], SETTLED) in STEPS_RAN
    assert invocation(rootmode, "demo-web.service") != before
    story = rootmode.journal(
        "-o", "json", f"PLAN_ID={reply['plan_id']}", "-u", "opsbot-apply.service"
    )
    finished = [
        json.loads(line)
        for line in story.splitlines()
        if json.loads(line).get("EVENT") == "step.finished"
    ]
    assert finished and finished[0]["_UID"] == "0"
