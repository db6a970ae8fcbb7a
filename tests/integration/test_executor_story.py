"""The executor half on a real systemd: from a submitted plan to a restarted unit.

Each test is a part of the operator's story: the diagnose user proposes, strangers are
refused, nothing runs unapproved, root approves, the path unit applies, the journal
tells it all; and a tampered or stale plan runs nothing.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from testbed.container import BootedSystemd
from testbed.host import (
    SETTLED,
    STEPS_RAN,
    approve,
    invocation,
    opsbot,
    pause_applies,
    plan_state,
    request,
    restart_plan,
    resume_applies,
    send_raw,
    submit,
    wait_state,
)
from testbed.observe import unit_properties


@pytest.fixture
def apply_paused(opsbot: BootedSystemd):  # type: ignore[no-untyped-def]
    """Stop the timer and path, so the test decides when an apply runs."""
    pause_applies(opsbot)
    yield opsbot
    resume_applies(opsbot)


def test_socket_is_owned_and_guarded_as_the_units_say(opsbot: BootedSystemd) -> None:
    """The socket is listening, root:opsbot-operators, mode 0660, before any daemon runs."""
    assert opsbot.systemctl("is-active", "opsbot-executor.socket").stdout.strip() == "active"
    stat = opsbot.run(["stat", "-c", "%U %G %a", "/run/opsbot/executor.sock"]).stdout.split()
    assert stat == ["root", "opsbot-operators", "660"]


def test_approved_plan_is_applied_by_the_path_unit_and_audited(opsbot: BootedSystemd) -> None:
    """Diagnose submits, root approves, opsbot-apply.path runs it: the unit's invocation
    changes, the plan is APPLIED, and journalctl PLAN_ID= and opsbot audit tell the story."""
    before = invocation(opsbot, "demo-web.service")
    reply = submit(opsbot, restart_plan("demo-web.service", active_state=["active"]))
    assert reply["verdict"] == "ACCEPT", reply
    plan_id = reply["plan_id"]
    assert re.fullmatch(r"[0-9a-f]{64}", reply["sha256"])

    again = submit(opsbot, restart_plan("demo-web.service", active_state=["active"]))
    assert again["plan_id"] == plan_id and again["duplicate"] is True

    shown = opsbot.run(["opsbot", "show", plan_id, "--argv"]).stdout
    assert shown.strip() == "systemctl restart --no-ask-password -- demo-web.service"
    assert plan_state(opsbot, plan_id) == "PROPOSED"
    assert invocation(opsbot, "demo-web.service") == before

    approve(opsbot, plan_id)
    assert wait_state(opsbot, plan_id, SETTLED) in STEPS_RAN
    assert invocation(opsbot, "demo-web.service") != before

    # The approval is consumed, and root's archiver then moves it to used/ (a change the
    # path unit sees once): the path unit must not start apply again and again.
    def apply_runs() -> int:
        log = opsbot.journal("-u", "opsbot-apply.service", "-o", "cat", "--since", "-2min")
        return log.count("Starting opsbot-apply.service")

    settled = apply_runs()
    time.sleep(4)
    assert apply_runs() - settled <= 1  # at most one timer tick in 4 s, never a loop

    story = opsbot.journal("-o", "json", f"PLAN_ID={plan_id}")
    events = [json.loads(line).get("EVENT") for line in story.splitlines()]
    for event in (
        "plan.accepted",
        "plan.approved",
        "approval.consumed",
        "plan.applying",
        "step.started",
        "step.finished",
        "plan.applied",
    ):
        assert event in events, f"{event} missing from the journal: {events}"
    finished = [
        json.loads(line)
        for line in story.splitlines()
        if json.loads(line).get("EVENT") == "step.finished"
    ]
    assert finished[0]["EXIT_STATUS"] == "0"
    assert finished[0]["ARGV"] == "systemctl restart --no-ask-password -- demo-web.service"
    assert finished[0]["_SYSTEMD_UNIT"] == "opsbot-apply.service"

    audit = opsbot.run(["opsbot", "audit", plan_id]).stdout
    assert "plan.accepted" in audit and "plan.applied" in audit


def test_approvals_in_quick_succession_are_all_applied_by_the_path_unit(
    opsbot: BootedSystemd,
) -> None:
    """Seven plans approved within a few seconds (an operator clearing a queue, or a
    suite): the path unit applies every one of them and stays active; systemd's start
    limit (5 starts in 10 s by default) must not leave it failed for the timer to catch
    up a minute later."""
    opsbot.systemctl("stop", "opsbot-apply.timer")
    try:
        plans = []
        for i in range(7):
            # reset-failed: a step that can run seven times in a row (a restart would hit
            # demo-web's own start limit, which is not what this test is about).
            plan = {
                "goal": f"burst {i}",
                "steps": [
                    {
                        "tool": "reset_failed_unit",
                        "args": {"unit": "demo-web.service"},
                        "reason": "burst",
                    }
                ],
            }
            reply = submit(opsbot, plan)
            assert reply["verdict"] == "ACCEPT", reply
            plans.append(reply["plan_id"])
        # One after another, each applied before the next is approved: seven starts of
        # opsbot-apply.service within a few seconds.
        for plan_id in plans:
            approve(opsbot, plan_id)
            assert wait_state(opsbot, plan_id, SETTLED, timeout=30) in STEPS_RAN
        props = ("ActiveState", "Result")
        path = unit_properties(opsbot, "opsbot-apply.path", props)
        assert path == {"ActiveState": "active", "Result": "success"}, path
        service = unit_properties(opsbot, "opsbot-apply.service", ("Result",))
        assert service["Result"] == "success", service
    finally:
        opsbot.systemctl("reset-failed", "opsbot-apply.path", "opsbot-apply.service", check=False)
        opsbot.systemctl("start", "opsbot-apply.path", "opsbot-apply.timer")


def test_stranger_cannot_reach_the_socket_and_operator_cannot_submit(opsbot: BootedSystemd) -> None:
    """A user outside opsbot-operators is refused by the kernel; an operator can list but
    not submit; nothing is stored for either."""
    status, _, err = send_raw(
        opsbot,
        json.dumps({"v": 1, "op": "submit", "plan": restart_plan("demo-web.service")}),
        user="mallory",
    )
    assert status == 3 and "Permission denied" in err

    reply = submit(opsbot, restart_plan("demo-db.service", goal="operator tries"), user="olivia")
    assert reply["verdict"] == "REJECT"
    assert "may not submit" in reply["reason"]
    listing = request(opsbot, {"v": 1, "op": "list"}, user="olivia")
    assert listing["verdict"] == "PLANS"
    assert all(p["goal"] != "operator tries" for p in listing["plans"])
    assert request(opsbot, {"v": 1, "op": "list"})["verdict"] == "REJECT"  # diagnose may not


def test_bad_plans_get_field_errors_and_the_daemon_keeps_serving(opsbot: BootedSystemd) -> None:
    """Malformed JSON, a denied unit, an unknown tool: REJECT or REVISE with the field, and
    a valid request right after still gets ACCEPT."""
    status, out, _ = send_raw(opsbot, b'{"v": 1, "op": "submit", "plan": {\n')
    assert status == 0 and json.loads(out.splitlines()[0])["verdict"] == "REJECT"

    reply = submit(opsbot, restart_plan("sshd.service"))
    assert reply["verdict"] == "REVISE"
    assert reply["errors"][0]["path"] == "steps.0.args.unit"
    assert "denylist" in reply["errors"][0]["message"]

    reply = submit(opsbot, restart_plan("demo-other.service"))
    assert reply["verdict"] == "REVISE" and "may not touch" in reply["errors"][0]["message"]

    reply = submit(
        opsbot, {"goal": "x", "steps": [{"tool": "rm_rf", "args": {"unit": "a.service"}}]}
    )
    assert reply["verdict"] == "REVISE" and reply["errors"][0]["path"] == "steps.0"

    assert (
        submit(opsbot, restart_plan("demo-db.service", goal="still serving"))["verdict"] == "ACCEPT"
    )


def test_unapproved_plan_never_runs(apply_paused: BootedSystemd) -> None:
    """`opsbot apply` leaves a PROPOSED plan alone: no approval, no step."""
    ct = apply_paused
    before = invocation(ct, "demo-db.service")
    plan_id = submit(ct, restart_plan("demo-db.service", goal="unapproved"))["plan_id"]
    ct.systemctl("start", "opsbot-apply.service")
    assert plan_state(ct, plan_id) == "PROPOSED"
    assert invocation(ct, "demo-db.service") == before
    dry = opsbot(ct, "apply", "--dry-run", check=False).stdout
    assert plan_id in dry and "not approved" in dry


def test_plan_edited_after_approval_is_refused(apply_paused: BootedSystemd) -> None:
    """Changing the stored plan's bytes after approval: the apply refuses it, runs nothing,
    and says why."""
    ct = apply_paused
    before = invocation(ct, "demo-db.service")
    plan_id = submit(ct, restart_plan("demo-db.service", goal="tamper target"))["plan_id"]
    approve(ct, plan_id)
    path = f"/var/lib/opsbot/plans/{plan_id}.json"
    record = json.loads(ct.run(["cat", path]).stdout)
    record["plan"] = record["plan"].replace("demo-db.service", "demo-web.service")
    ct.run(["tee", path], input=json.dumps(record))
    ct.systemctl("start", "opsbot-apply.service")
    detail = json.loads(opsbot(ct, "show", plan_id, "--json", check=False).stdout or "{}")
    assert not detail  # show refuses a tampered plan
    assert invocation(ct, "demo-db.service") == before
    assert invocation(ct, "demo-web.service") != ""
    log = ct.journal("-o", "cat", "-u", "opsbot-apply.service", f"PLAN_ID={plan_id}")
    assert "modified after it was stored" in log


def test_stale_precondition_marks_stale_and_runs_nothing(apply_paused: BootedSystemd) -> None:
    """A plan made for a failed unit, approved after the unit recovered: STALE, no restart."""
    ct = apply_paused
    before = invocation(ct, "demo-db.service")
    plan_id = submit(
        ct, restart_plan("demo-db.service", goal="db was failed", active_state=["failed"])
    )["plan_id"]
    approve(ct, plan_id)
    ct.systemctl("start", "opsbot-apply.service")
    assert plan_state(ct, plan_id) == "STALE"
    assert invocation(ct, "demo-db.service") == before
    shown = opsbot(ct, "show", plan_id).stdout
    assert "expected active state failed" in shown


def test_executor_user_is_held_to_the_allowlist_by_polkit(opsbot: BootedSystemd) -> None:
    """Even run by hand as the executor's user, systemctl may restart an allowlisted unit,
    but not stop it, and not touch any other unit."""
    user = "opsbot-executor"
    ok = opsbot.run(
        ["systemctl", "restart", "--no-ask-password", "demo-web.service"], user=user, check=False
    )
    assert ok.returncode == 0, ok.stderr
    for argv in (
        ["systemctl", "stop", "--no-ask-password", "demo-web.service"],
        ["systemctl", "restart", "--no-ask-password", "demo-other.service"],
        ["systemctl", "restart", "--no-ask-password", "systemd-journald.service"],
    ):
        denied = opsbot.run(argv, user=user, check=False)
        assert denied.returncode != 0
        assert "Access denied" in denied.stderr or "authentication" in denied.stderr


def test_units_verify_and_executor_exposure_is_at_most_2(opsbot: BootedSystemd) -> None:
    """systemd-analyze verify is clean (the executor's units and the approval path's) and
    the executor scores <= 2.0 exposure."""
    units = [
        f"/etc/systemd/system/{u}"
        for u in (
            "opsbot-executor.socket",
            "opsbot-executor.service",
            "opsbot-apply.service",
            "opsbot-apply.timer",
            "opsbot-apply.path",
            "opsbot-archive.service",
            "opsbot-archive.timer",
            "opsbot-archive.path",
            "opsbot-polkit-rule.service",
            "opsbot-polkit-rule.timer",
            "opsbot-polkit-rule.path",
            "opsbot-approver.socket",
            "opsbot-approver.service",
            "opsbot-web.socket",
            "opsbot-web.service",
            "opsbot-notify.service",
            "opsbot-notify.path",
            "opsbot-notify.timer",
            "opsbot-notify-burst.timer",
            "opsbot-rules.service",
            "opsbot-rules.path",
            "opsbot-rules.timer",
            "opsbot-rules-burst.timer",
        )
    ]
    verify = opsbot.run(["systemd-analyze", "verify", *units], check=False)
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr.strip() == ""
    out = opsbot.run(["systemd-analyze", "security", "opsbot-executor.service"]).stdout
    score = float(re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out).group(1))  # type: ignore[union-attr]
    assert score <= 2.0, out
