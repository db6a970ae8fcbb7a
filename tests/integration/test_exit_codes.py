"""Exit statuses a script can trust (issue 13, item 5), each one end to end in a booted
systemd: the operator's commands as they would run them, the status a cron job or an
Ansible task would branch on (shared_io/exit_codes.py; docs/operating.md's table).

    0 done, nothing waits     3 a plan waits for approval   5 refused
    1 error                   4 a human must act            6 FAILED / UNRESOLVED
    2 usage                  78 invalid configuration
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import (
    approve,
    invocation,
    opsbot as cli,
    pause_applies,
    restart_plan,
    resume_applies,
    submit,
    wait_state,
)

FLAKY = "demo-flaky.service"  # allowlisted for start_unit only (testbed/host.py)
#: A start that cannot hold: up a second, then exit 1.
FLAKY_UNIT = (
    "[Unit]\nDescription=fails a second after it starts\n"
    "[Service]\nExecStart=/bin/sh -c 'sleep 1; exit 1'\n"
)
#: A program that is not there: diagnosis names the missing file, a human must act; a
#: start fails (Type=exec: the start job waits for the exec).
MISSING_UNIT = (
    "[Unit]\nDescription=its program is gone\n[Service]\nType=exec\nExecStart=/opt/gone/serve\n"
)


def status_of(ct: BootedSystemd, *args: str, user: str | None = None) -> tuple[int, str, str]:
    proc = cli(ct, *args, check=False, user=user, timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


def apply_started(ct: BootedSystemd) -> str:
    """When opsbot-apply.service last began a run, as systemd has it."""
    said = ct.systemctl("show", "-P", "ExecMainStartTimestampMonotonic", "opsbot-apply.service")
    return said.stdout.strip()


def put_unit(ct: BootedSystemd, text: str) -> None:
    ct.write_file(f"/etc/systemd/system/{FLAKY}", text)
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", FLAKY, check=False)
    ct.systemctl("start", FLAKY, check=False)
    ct.wait_for(lambda: ct.systemctl("is-failed", FLAKY, check=False).returncode == 0, timeout=15)


@pytest.fixture
def flaky(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """demo-flaky.service present and failed; removed afterwards."""
    put_unit(opsbot, FLAKY_UNIT)
    yield opsbot
    opsbot.systemctl("stop", FLAKY, check=False)
    opsbot.run(["rm", "-f", f"/etc/systemd/system/{FLAKY}"])
    opsbot.systemctl("daemon-reload")
    opsbot.systemctl("reset-failed", FLAKY, check=False)


def nothing_else_waits(ct: BootedSystemd) -> None:
    """Reject what earlier stories on this shared host left open: ``apply`` exits with the
    worst of every open plan's outcome, and these tests are about their own."""
    for plan in json.loads(cli(ct, "plans", "--json").stdout):
        if plan["state"] in ("PROPOSED", "APPROVED"):
            cli(ct, "reject", plan["plan_id"], "--reason", "exit-code tests: a clean slate")


def plan_for(ct: BootedSystemd, plan: dict[str, Any]) -> str:
    reply = submit(ct, plan)
    assert reply["verdict"] == "ACCEPT", reply
    return str(reply["plan_id"])


def test_diagnose_says_with_its_status_whether_anything_waits(flaky: BootedSystemd) -> None:
    """0 for a healthy unit (no change warranted), 3 for a failed one it proposes a fix
    for, 4 for one whose program is gone (a human must act), 5 for a unit outside the
    diagnosis scope, 1 when the diagnosis service cannot be reached, 2 for a bad name."""
    ct = flaky
    code, out, err = status_of(ct, "diagnose", "demo-web.service")
    assert code == 0, (out, err)
    assert "healthy" in out

    ct.systemctl("kill", "--signal=KILL", "demo-db.service")
    ct.wait_for(
        lambda: ct.systemctl("is-failed", "demo-db.service", check=False).returncode == 0,
        timeout=15,
    )
    try:
        code, out, err = status_of(ct, "diagnose", "demo-db.service")
        assert code == 3, (out, err)
        plan_id = out.split("plan ", 1)[1].split()[0]
        cli(ct, "reject", plan_id, "--reason", "exit-code test")
    finally:
        ct.systemctl("start", "demo-db.service")

    put_unit(ct, MISSING_UNIT)
    code, out, err = status_of(ct, "diagnose", FLAKY)
    assert code == 4, (out, err)
    assert "missing_file" in out

    code, out, err = status_of(ct, "diagnose", "demo-other.service")
    assert code == 5, (out, err)
    assert "not in the diagnosis scope" in err

    code, _, err = status_of(ct, "diagnose", "demo-web", "--json")
    assert code == 0, err

    proc = ct.run(
        [
            "env",
            "OPSBOT_DIAGNOSE_SOCKET=/run/opsbot/nothing.sock",
            "/opt/opsbot/venv/bin/opsbot",
            "diagnose",
            "demo-web",
        ],
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("opsbot: error: no socket at /run/opsbot/nothing.sock")

    code, _, err = status_of(ct, "diagnose", "../etc/passwd")
    assert code == 2, err


def test_approve_wait_follows_the_plan_to_verified_or_unresolved(flaky: BootedSystemd) -> None:
    """approve --wait prints what will apply the plan (the path unit is active: now),
    follows the apply and opsbot-verify, and exits 0 when health held, 6 when the
    step failed."""
    ct = flaky
    ct.systemctl("kill", "--signal=KILL", "demo-web.service")
    ct.wait_for(
        lambda: ct.systemctl("is-failed", "demo-web.service", check=False).returncode == 0,
        timeout=15,
    )
    good = plan_for(ct, restart_plan("demo-web.service", active_state=["failed"]))
    proc = approve(ct, good, "--wait", "--timeout", "90s", check=False)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "opsbot-apply.service starts now (opsbot-apply.path is active)" in proc.stdout
    assert "VERIFIED" in proc.stdout

    # Its program gone, the start itself fails: FAILED. (A start that ends UNRESOLVED is
    # the same 6, tests/unit/console/test_console_exit_codes.py; not made here, where it
    # would count as "tried before" for test_verification_story's start of this unit.)
    put_unit(ct, MISSING_UNIT)
    start = {"tool": "start_unit", "args": {"unit": FLAKY}, "reason": "start it"}
    bad = plan_for(ct, {"goal": "start the flaky one", "steps": [start]})
    proc = approve(ct, bad, "--wait", "--timeout", "90s", "--json", check=False)
    assert proc.returncode == 6, (proc.stdout, proc.stderr)
    assert json.loads(proc.stdout)["state"] == "FAILED"


def test_a_refused_plan_exits_5_and_a_plan_nothing_will_apply_exits_3(
    opsbot: BootedSystemd,
) -> None:
    """A plan made for a failed unit that has since recovered goes STALE at apply:
    approve --wait exits 5, and so does approving it again. With opsbot-apply.path and
    its timer stopped, approve says nothing will apply the plan, and --wait gives up with
    3 (it still waits for approval's effect); apply --dry-run then says it would run and
    exits 0."""
    ct = opsbot
    nothing_else_waits(ct)
    stale = plan_for(ct, restart_plan("demo-db.service", active_state=["failed"]))
    proc = approve(ct, stale, "--wait", "--timeout", "90s", check=False)
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert "STALE" in proc.stdout
    code, _, err = status_of(ct, "approve", stale, "--sha256", "0" * 16)
    assert code == 5, err
    assert "only PROPOSED plans can be approved" in err

    pinned = invocation(ct, "demo-db.service")
    by_timer = plan_for(ct, restart_plan("demo-db.service", invocation_id=pinned))
    waiting = plan_for(ct, restart_plan("demo-db.service", goal="again", invocation_id=pinned))
    ct.systemctl("stop", "opsbot-apply.path")
    try:
        said = approve(ct, by_timer).stdout
        cli(ct, "reject", by_timer, "--reason", "exit-code test")
        assert "opsbot-apply.timer applies it " in said
        assert "(opsbot-apply.path is not active)" in said
        pause_applies(ct)
        proc = approve(ct, waiting, "--wait", "--timeout", "3s", check=False)
        assert proc.returncode == 3, (proc.stdout, proc.stderr)
        assert "nothing applies it on its own" in proc.stdout
        assert "opsbot-apply.path and opsbot-apply.timer are inactive" in proc.stdout
        code, out, err = status_of(ct, "apply", "--dry-run")
        assert code == 0, (out, err)
        assert "demo-db.service has not been started again since diagnosis" in out
        assert ": as expected" in out
    finally:
        cli(ct, "reject", waiting, "--reason", "exit-code test")
        resume_applies(ct)
    assert wait_state(ct, waiting, {"REJECTED"}) == "REJECTED"


def test_usage_config_and_permission_each_have_their_status(opsbot: BootedSystemd) -> None:
    """2 for a malformed id or a root-only command run by an operator, 1 for a plan that
    does not exist or permission denied, 78 for an invalid config."""
    ct = opsbot
    assert status_of(ct, "show", "not-an-id")[0] == 2
    assert status_of(ct, "approve", "20261201-000000-00000000", user="olivia")[0] == 2
    assert status_of(ct, "show", "20261201-000000-00000000")[0] == 1
    ct.run(["install", "-d", "-m", "0755", "/etc/opsbot-typo"])
    ct.write_file("/etc/opsbot-typo/opsbot.toml", "[diagnose]\nmax_steps = = 6\n")
    proc = ct.run(
        [
            "env",
            "OPSBOT_CONFIG=/etc/opsbot-typo/opsbot.toml",
            "/opt/opsbot/venv/bin/opsbot",
            "check-config",
        ],
        check=False,
    )
    assert proc.returncode == 78, (proc.stdout, proc.stderr)


def test_apply_prints_each_step_waits_for_verification_and_sums_up(
    opsbot: BootedSystemd,
) -> None:
    """Root runs the apply by hand (path unit and timer stopped): a line per step as it
    ends, like ansible-playbook's, the plan's verification, and a summary like terraform's;
    exit 0 once health held. An apply with only an unapproved plan left says nothing is
    approved, starts no opsbot-apply.service run, and exits 3."""
    ct = opsbot
    nothing_else_waits(ct)
    pause_applies(ct)
    try:
        ct.systemctl("kill", "--signal=KILL", "demo-web.service")
        ct.wait_for(
            lambda: ct.systemctl("is-failed", "demo-web.service", check=False).returncode == 0,
            timeout=15,
        )
        plan_id = plan_for(ct, restart_plan("demo-web.service", active_state=["failed"]))
        approve(ct, plan_id)
        code, out, err = status_of(ct, "apply")
        assert code == 0, (out, err)
        lines = out.splitlines()
        assert f"{plan_id}  step 1 changed: systemctl restart" in out
        assert any(line.startswith("  ") and "VERIFIED" in line for line in lines), out
        assert lines[-1] == "Apply complete: 1 plan (1 VERIFIED), 1 ran 1 step, 0 failed"
        assert all(len(line) <= 100 for line in lines), out

        waiting = plan_for(ct, restart_plan("demo-web.service", active_state=["failed"]))
        last_run = apply_started(ct)
        code, out, err = status_of(ct, "apply")
        assert code == 3, (out, err)
        assert out.startswith("nothing approved: ") and f"{waiting}  PROPOSED" in out
        assert apply_started(ct) == last_run  # no run of the unit for nothing
        cli(ct, "reject", waiting)
    finally:
        resume_applies(ct)
