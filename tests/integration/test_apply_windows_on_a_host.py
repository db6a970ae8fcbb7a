"""Apply windows on a booted systemd, with windows computed around the present (the clock
is never changed): a plan approved outside its window waits in APPROVED, `opsbot show`
and `opsbot plans` say when it runs, `opsbot apply` leaves it (exit 3), and
`opsbot approve --now` runs it at once, recorded in the journal; a plan approved inside
its window applies at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, approve, opsbot, pause_applies, resume_applies, wait_state
from testbed.phone import propose


def _window(start: datetime, duration: str) -> str:
    # The expression names its zone, so the host's zone does not matter.
    expression = start.strftime("%Y-%m-%d %H:%M:00 UTC")
    return (
        TEST_CONFIG
        + f'\n[[executor.apply_window]]\nstart = "{expression}"\n'
        + (f'duration = "{duration}"\n')
    )


@pytest.fixture
def windowed(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The session's container, its config back to the tests' own afterwards."""
    yield opsbot
    opsbot.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)


def test_a_plan_approved_outside_its_window_waits_until_now_overrides(
    windowed: BootedSystemd,
) -> None:
    """A window two hours from now: approve says the plan applies in it, and its approval
    holds until the window ends; the apply leaves it APPROVED (exit 3); show and plans say
    when it runs. `approve --now` then runs it at once, to VERIFIED, and the journal
    records the override."""
    ct = windowed
    opens = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=2)
    ct.write_file("/etc/opsbot/opsbot.toml", _window(opens, "30min"))
    plan = propose(ct, "restart demo-web in tonight's window")
    plan_id = plan["plan_id"]
    said = approve(ct, plan_id).stdout
    assert "apply window" in said and opens.strftime("%H:%M") in said, said
    pause_applies(ct)
    try:
        applied = opsbot(ct, "apply", check=False)
        assert applied.returncode == 3, applied.stdout + applied.stderr
        assert wait_state(ct, plan_id, {"APPROVED"}) == "APPROVED"
        shown = opsbot(ct, "show", plan_id).stdout
        runs = next(line for line in shown.splitlines() if line.startswith("runs"))
        assert opens.astimezone().strftime("%H:%M") in runs or opens.strftime("%H:%M") in runs
        listed = opsbot(ct, "plans").stdout
        assert "RUNS" in listed.splitlines()[0], listed
        approval = json.loads(
            ct.run(["cat", f"/var/lib/opsbot-approvals/{plan_id}.approval"]).stdout
        )
        held = datetime.fromisoformat(approval["expires_at"])
        assert held >= opens + timedelta(minutes=30) - timedelta(seconds=1), approval
    finally:
        resume_applies(ct)
    now = approve(ct, plan_id, "--now", "--wait", "--timeout", "90s", check=False)
    assert now.returncode == 0, now.stdout + now.stderr
    assert "VERIFIED" in now.stdout
    journal = ct.journal("-t", "opsbot", "-o", "cat", "--since", "-5min")
    assert plan_id in journal and "OVERRIDE_WINDOW" in ct.journal(
        "-t", "opsbot", "-o", "verbose", "--since", "-5min"
    )


def test_a_plan_approved_inside_its_window_applies_at_once(windowed: BootedSystemd) -> None:
    """A window that opened a minute ago: the approval applies at once, to VERIFIED."""
    ct = windowed
    opened = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    ct.write_file("/etc/opsbot/opsbot.toml", _window(opened, "30min"))
    plan = propose(ct, "restart demo-web inside its window")
    done = approve(ct, plan["plan_id"], "--wait", "--timeout", "90s", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert wait_state(ct, plan["plan_id"], {"VERIFIED"}) == "VERIFIED"
