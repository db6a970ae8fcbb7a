"""A fix counts only when health holds, on a real systemd: after the last step,
opsbot-verify.path starts opsbot-verify (as the diagnose user) and the plan ends VERIFIED
or UNRESOLVED; an UNRESOLVED plan of a watched unit starts one follow-up diagnosis that
does not propose the same steps; opsbot's restart budget stops restarting what restarts
do not fix. The test config sets settle_seconds = 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import (
    TEST_CONFIG,
    approve,
    opsbot as cli,
    request,
    restart_plan,
    submit,
    wait_state,
)

FLAKY = "demo-flaky.service"
#: Up for one second after each start, then exit 1: a start that cannot hold.
FLAKY_UNIT = (
    "[Unit]\nDescription=fails a second after it starts\n"
    "[Service]\nExecStart=/bin/sh -c 'sleep 1; exit 1'\n"
)
FINAL = {"VERIFIED", "UNRESOLVED", "FAILED", "STALE"}


def start_plan(unit: str, why: str) -> dict[str, Any]:
    return {"goal": why, "steps": [{"tool": "start_unit", "args": {"unit": unit}, "reason": why}]}


def carried(ct: BootedSystemd, plan: dict[str, Any]) -> str:
    reply = submit(ct, plan)
    assert reply["verdict"] == "ACCEPT", reply
    approve(ct, reply["plan_id"])
    return str(reply["plan_id"])


def shown(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    return dict(json.loads(cli(ct, "show", plan_id, "--json").stdout))


@pytest.fixture
def flaky(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """demo-flaky.service, failed once already, watched by opsbot."""
    ct = opsbot
    ct.write_file(f"/etc/systemd/system/{FLAKY}", FLAKY_UNIT)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", FLAKY, check=False)
    ct.wait_for(lambda: ct.systemctl("is-failed", FLAKY, check=False).returncode == 0, timeout=10)
    opsbot_cli(ct, "watch", FLAKY)
    yield ct
    opsbot_cli(ct, "unwatch", FLAKY)
    ct.systemctl("stop", FLAKY, check=False)
    ct.run(["rm", "-f", f"/etc/systemd/system/{FLAKY}"])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", FLAKY, check=False)


def opsbot_cli(ct: BootedSystemd, *args: str) -> str:
    return cli(ct, *args).stdout


def test_a_restart_that_brings_the_service_back_is_verified(opsbot: BootedSystemd) -> None:
    """Restart demo-web: its steps ran (APPLIED), then opsbot-verify watched it for the
    settle window and the plan is VERIFIED, with what it saw; show, plans and the audit
    say so, and the journal has plan.verified under its own MESSAGE_ID."""
    ct = opsbot
    plan_id = carried(ct, restart_plan("demo-web.service", goal="verify me"))
    assert wait_state(ct, plan_id, FINAL, timeout=60) == "VERIFIED"
    summary = shown(ct, plan_id)["summary"]
    verification = summary["verification"]
    assert verification["result"] == "verified" and verification["by"] == "opsbot-diagnose"
    assert 3.0 <= verification["seconds"] < 30.0
    assert verification["evidence"][0].startswith("demo-web.service is active/running")
    assert "verified  verified" in opsbot_cli(ct, "show", plan_id)
    listed = json.loads(opsbot_cli(ct, "plans", "--json"))
    assert {p["plan_id"]: p["state"] for p in listed}[plan_id] == "VERIFIED"
    audit = json.loads(opsbot_cli(ct, "audit", plan_id, "--json"))
    events = [e["event"] for e in audit["entries"]]
    assert events.index("plan.applied") < events.index("plan.verified")
    entries = ct.journal("-o", "json", f"PLAN_ID={plan_id}", "EVENT=plan.verified").splitlines()
    [entry] = [json.loads(line) for line in entries]
    assert entry["_SYSTEMD_UNIT"] == "opsbot-executor.service"
    again = ct.journal("-o", "json", f"MESSAGE_ID={entry['MESSAGE_ID']}").splitlines()
    assert all(json.loads(line)["EVENT"] == "plan.verified" for line in again)


def test_a_start_that_does_not_hold_is_unresolved_and_followed_up_once(
    flaky: BootedSystemd,
) -> None:
    """demo-flaky is started by an approved plan, runs a second and fails again: the
    steps exited 0, but the plan ends UNRESOLVED saying so. It is watched, so one
    follow-up diagnosis runs, knowing what was tried: it does not propose the same start
    again, and the executor refuses that plan if anyone submits it."""
    ct = flaky
    plan_id = carried(ct, start_plan(FLAKY, "start the flaky one"))
    assert wait_state(ct, plan_id, FINAL, timeout=60) == "UNRESOLVED"
    verification = shown(ct, plan_id)["summary"]["verification"]
    assert verification["result"] == "unresolved"
    assert verification["evidence"][0].startswith(f"{FLAKY} failed again")
    assert "UNRESOLVED" in opsbot_cli(ct, "show", plan_id)

    def follow_ups() -> list[dict[str, Any]]:
        out = ct.journal("-o", "json", f"FOLLOW_UP_OF={plan_id}", "EVENT=diagnose.finished")
        return [json.loads(line) for line in out.splitlines()]

    [finished] = ct.wait_for(follow_ups, timeout=60, what="the follow-up diagnosis")
    started = ct.journal("-o", "json", f"RUN_ID={finished['RUN_ID']}", "EVENT=diagnose.started")
    assert plan_id in json.loads(started.splitlines()[0])["SYMPTOM"]
    assert finished["KIND"] == "note" or finished.get("PLAN_ID") != plan_id
    if finished.get("PLAN_ID"):
        steps = shown(ct, finished["PLAN_ID"])["plan"]["steps"]
        assert [(s["tool"], s["args"]["unit"]) for s in steps] != [("start_unit", FLAKY)]
    again = submit(ct, start_plan(FLAKY, "and once more"))
    assert again["verdict"] == "REVISE"
    assert again["errors"][0]["message"].startswith(f"tried before: plan {plan_id}")


def test_only_the_diagnose_user_may_report_and_a_report_runs_nothing(
    opsbot: BootedSystemd,
) -> None:
    """An operator cannot report a verification (nor ask which are pending); the diagnose
    user's report for a plan that is not APPLIED is refused and changes nothing."""
    ct = opsbot
    reply = submit(ct, restart_plan("demo-db.service", goal="never approved"))
    plan_id, sha = reply["plan_id"], reply["sha256"]
    forged = {"v": 1, "op": "verify", "plan_id": plan_id, "sha256": sha, "result": "verified"}
    for op in (forged, {"v": 1, "op": "pending"}):
        answer = request(ct, op, user="olivia")
        assert answer["verdict"] == "REJECT" and "may not" in answer["reason"], answer
    answer = request(ct, forged)
    assert answer["verdict"] == "REJECT" and "is PROPOSED" in answer["reason"]
    assert shown(ct, plan_id)["summary"]["state"] == "PROPOSED"
    cli(ct, "reject", plan_id, "--reason", "test cleanup")


def test_the_restart_budget_stops_a_third_restart(opsbot: BootedSystemd) -> None:
    """With restart_budget = 2: two applied restarts of demo-other (no other test touches
    it), then a third plan to restart it is refused at submit, naming the budget."""
    ct = opsbot
    strict = TEST_CONFIG.replace("restart_budget = 100", "restart_budget = 2").replace(
        'restart_unit = ["demo-web.service", "demo-db.service"]',
        'restart_unit = ["demo-web.service", "demo-db.service", "demo-other.service"]',
    )
    assert strict.count("demo-other") == 1 and "restart_budget = 2" in strict
    ct.write_file("/etc/opsbot/opsbot.toml", strict)
    cli(ct, "polkit-rule", "--write")  # demo-other may now be restarted
    ct.systemctl("stop", "opsbot-executor.service")  # it reads the config at start
    try:
        for i in range(2):
            plan_id = carried(ct, restart_plan("demo-other.service", goal=f"budget {i}"))
            assert wait_state(ct, plan_id, FINAL, timeout=60) == "VERIFIED"
        third = submit(ct, restart_plan("demo-other.service", goal="budget 2"))
        assert third["verdict"] == "REVISE", third
        message = third["errors"][0]["message"]
        assert message.startswith("restart budget spent: opsbot's plans started or restarted")
        assert "demo-other.service 2 times" in message
    finally:
        ct.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)
        cli(ct, "polkit-rule", "--write")
        ct.systemctl("stop", "opsbot-executor.service")
