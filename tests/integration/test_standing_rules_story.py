"""Standing approvals on a booted systemd (issue 26): root's ``[[approve.rule]]`` earns its
trust in shadow, then approves the routine fix in a person's place, in the open, and
stands back for the unit once a fix it approved did not hold.

invoices-api.service is generated here (no product code knows its name) and watched as
the issue says, ``OnFailure=opsbot-onfailure@%n.service``; a SIGKILL is the fault, and
the embedded runbook's fix is to start it again. The host is the phone fixture's
(testbed/phone.py): plans are announced on a signed webhook to approvers alice..erin.
What the rules decided is what root's ``opsbot policy report`` says.

opsbot-rules.path and opsbot-notify.path start their units when a plan is stored; a plan
stored while a run was ending is left to the units' timers (a minute or two later), so
the story starts a run itself once the one going on ended (:func:`run_now`) instead of
waiting that long.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import approve, opsbot, restart_plan, submit, wait_state
from testbed.phone import PAGE, PHONE_CONFIG, Phone

APP = "invoices-api.service"
APP_FILE = f"/etc/systemd/system/{APP}"
APP_UNIT = (
    "[Unit]\nDescription=the app of the standing rules' story\n"
    "OnFailure=opsbot-onfailure@%n.service\n"
    "[Service]\nExecStart=/bin/sleep infinity\n"
)
#: Its next build, deployed as a drop-in: it quits, cleanly, right after each start. No
#: failure for OnFailure= to see; only the verification sees it did not come back.
NEW_BUILD = f"/etc/systemd/system/{APP}.d/50-new-build.conf"
NEW_BUILD_TEXT = "[Service]\nExecStart=\nExecStart=/bin/true\n"
CONFIG = "/etc/opsbot/opsbot.toml"
APPROVALS = "/var/lib/opsbot-approvals"
RULE = "invoices-starts"
FINAL = {"VERIFIED", "UNRESOLVED", "FAILED", "STALE"}
#: An approved plan is applied by opsbot-apply.path, or by its timer a minute after a
#: run that was going on; then verified within settle_seconds (3 s here).
APPLIED_AND_JUDGED = 90


def story_config(mode: str) -> str:
    """The phone host's config, the app in [executor.allow], and one rule in ``mode``."""
    allowed = PHONE_CONFIG.replace(
        'start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service"]',
        f'start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service", "{APP}"]',
    ).replace(
        'restart_unit = ["demo-web.service", "demo-db.service"]',
        f'restart_unit = ["demo-web.service", "demo-db.service", "{APP}"]',
    )
    assert allowed.count(APP) == 2, "the tests' allowlist changed"
    return (
        allowed
        + f"""
[[approve.rule]]
name = "{RULE}"
mode = "{mode}"
tools = ["start_unit", "restart_unit"]
units = ["invoices-*.service"]
max_per_unit = 3
period = "24h"
"""
    )


@pytest.fixture
def invoices(phone: Phone) -> Iterator[Phone]:
    """invoices-api.service running, in the allowlist, with one rule in shadow."""
    ct = phone.ct
    ct.write_file(APP_FILE, APP_UNIT)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", APP)
    ct.write_file(CONFIG, story_config("shadow"))
    opsbot(ct, "polkit-rule", "--write")
    yield phone
    waiting = opsbot(ct, "plans", "--state", "proposed,approved", "--json").stdout
    for plan in json.loads(waiting):
        if APP in plan["units"]:
            opsbot(ct, "reject", plan["plan_id"], "--reason", "the story is over")
    ct.write_file(CONFIG, PHONE_CONFIG)
    opsbot(ct, "polkit-rule", "--write")
    ct.systemctl("stop", APP, check=False)
    ct.run(["rm", "-rf", APP_FILE, f"{APP_FILE}.d"])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", APP, check=False)


def kill(ct: BootedSystemd) -> None:
    """The fault: SIGKILL to the app's main process (systemd marks it failed)."""
    ct.systemctl("kill", "--kill-who=main", "-s", "KILL", APP)


def plan_of_app(ct: BootedSystemd, known: set[str]) -> dict[str, Any]:
    """The next plan for the app (not one of ``known``) that the diagnosis stored."""

    def stored() -> dict[str, Any] | None:
        listed = json.loads(opsbot(ct, "plans", "--json", "-n", "20").stdout)
        fresh = [p for p in listed if APP in p["units"] and p["plan_id"] not in known]
        return fresh[0] if fresh else None

    plan = ct.wait_for(stored, timeout=60, interval=0.5, what=f"a plan for {APP}")
    assert plan is not None
    known.add(plan["plan_id"])
    return plan


def run_now(ct: BootedSystemd, unit: str) -> None:
    """A run of the oneshot ``unit`` that begins after this call: the one going on (which
    may have begun before the plan was stored) is waited out first, as a start now would
    merge into it."""
    ct.wait_for(
        lambda: ct.systemctl("show", "-P", "ActiveState", unit).stdout.strip() != "activating",
        timeout=120,
        interval=0.2,
        what=f"{unit} idle",
    )
    ct.systemctl("start", unit)


def report(ct: BootedSystemd) -> dict[str, Any]:
    said: dict[str, Any] = json.loads(opsbot(ct, "policy", "report", "--json").stdout)
    return said


def ruled(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    """What the rules decided about ``plan_id`` (stored before this call), as root's
    ``opsbot policy report`` tells it: the running approver asks them as the plan is
    stored (approver_svc/watch.py; opsbot-rules.service is then skipped), a run of
    opsbot-rules.service where it does not run."""
    run_now(ct, "opsbot-rules.service")

    def decided() -> dict[str, Any] | None:
        found = [d for d in report(ct)["recent"] if d["plan_id"] == plan_id]
        assert len(found) <= 1, found
        return dict(found[0]) if found else None

    decision = ct.wait_for(decided, timeout=30, interval=0.5, what=f"the rules on {plan_id}")
    assert decision is not None
    return decision


def announced(phone: Phone, plan_id: str) -> list[dict[str, Any]]:
    """The webhook messages about ``plan_id`` (after a notify run that saw it)."""
    run_now(phone.ct, "opsbot-notify.service")
    return [m for m in phone.hooks() if m.get("plan_id") == plan_id]


def shown(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)["summary"]
    return summary


def rule_summary(ct: BootedSystemd) -> dict[str, Any]:
    [mine] = [r for r in report(ct)["rules"] if r["name"] == RULE]
    return dict(mine)


def approvals(ct: BootedSystemd, plan_id: str) -> list[dict[str, Any]]:
    """The approval files of ``plan_id``, waiting or used (the archiver moves a used one)."""
    found = []
    for path in sorted((ct.root / APPROVALS.lstrip("/")).rglob(f"{plan_id}*.approval")):
        with contextlib.suppress(FileNotFoundError):
            found.append(json.loads(path.read_text()))
    return found


def journaled(ct: BootedSystemd, plan_id: str, event: str) -> list[dict[str, Any]]:
    out = ct.journal("-o", "json", f"PLAN_ID={plan_id}", f"EVENT={event}")
    return [json.loads(line) for line in out.splitlines()]


def test_a_rule_earns_trust_in_shadow_approves_in_enforce_and_stands_back_after_a_failed_fix(
    invoices: Phone,
) -> None:
    """The operator's story, in order, on one host:

    1. shadow: the app is killed, diagnosed, and a plan to start it stored; the rule
       records that it would approve it, and the plan waits for a human (announced with
       links, no approval file), who approves it: VERIFIED, and the report says so;
    2. enforce (opsbot.toml edited; the approver reads it before its next request): the
       app is killed again; the rule approves the plan (the approval names the rule, no
       approver), it is applied and VERIFIED, and the approvers were told, without links
       (once on the webhook they share), and then that the incident ended, each with a
       link to the plan's status;
    3. a new build that quits at once: killed again, the rule approves the start, which
       does not hold: UNRESOLVED, and the approvers are told so, with what verify saw.
       The rule is suspended for the app: the next plan for it
       waits for a human, and the rules' record says why; a human's fix, VERIFIED."""
    phone = invoices
    ct = phone.ct
    known: set[str] = set()

    # 1. Shadow: what the rule would do is recorded; a human decides.
    kill(ct)
    first = plan_of_app(ct, known)["plan_id"]
    decision = ruled(ct, first)
    assert (decision["outcome"], decision["rule"]) == ("would approve", RULE), decision
    assert decision["units"] == [APP] and decision["tools"] == ["start_unit"]
    [to_alice] = [m for m in announced(phone, first) if m["approver"] == "alice"]
    assert to_alice["approve_url"], to_alice
    assert approvals(ct, first) == [] and shown(ct, first)["state"] == "PROPOSED"
    approve(ct, first)
    [by_human] = approvals(ct, first)
    assert by_human["approver"] == "root" and "approved_by_rule" not in by_human, by_human
    assert wait_state(ct, first, FINAL, timeout=APPLIED_AND_JUDGED) == "VERIFIED"
    summary = rule_summary(ct)
    assert summary["mode"] == "shadow" and summary["approved"] == 0, summary
    assert summary["would_approve"] == 1 and summary["ended"] == {"VERIFIED": 1}, summary

    # 2. Enforce: the rule approves in a person's place, and the approvers are told.
    ct.write_file(CONFIG, story_config("enforce"))
    kill(ct)
    second = plan_of_app(ct, known)
    decision = ruled(ct, second["plan_id"])
    assert (decision["outcome"], decision["rule"]) == ("approved", RULE), decision
    [by_rule] = approvals(ct, second["plan_id"])
    assert by_rule["approved_by_rule"] == RULE and "approver" not in by_rule, by_rule
    assert by_rule["sha256"] == second["sha256"]
    assert by_rule["rule_sha256"] == decision["rule_sha256"]
    assert wait_state(ct, second["plan_id"], FINAL, timeout=APPLIED_AND_JUDGED) == "VERIFIED"
    summary_of_plan = shown(ct, second["plan_id"])
    assert summary_of_plan["approved_by_rule"] == RULE, summary_of_plan
    assert summary_of_plan["approved_by"] == "", summary_of_plan
    [entry] = journaled(ct, second["plan_id"], "plan.approved")
    assert entry["APPROVED_BY_RULE"] == RULE and "APPROVER" not in entry, entry
    assert entry["_SYSTEMD_UNIT"] == "opsbot-approver.service"
    told = announced(phone, second["plan_id"])
    # News is the same for all: the webhook they share gets it once.
    [by_rule_told] = [m for m in told if m["event"] == "plan.approved_by_rule"]
    assert {m["event"] for m in told} <= {"plan.approved_by_rule", "incident.ended"}, told
    assert by_rule_told["rule"] == RULE and not by_rule_told.get("approve_url"), told
    assert f"rule {RULE} approved plan {second['plan_id']}" in by_rule_told["text"]
    assert by_rule_told["status_url"].startswith(PAGE), by_rule_told
    # ... and once it VERIFIED, that the incident ended, with a link to its status.
    [ended] = [m for m in announced(phone, second["plan_id"]) if m["event"] == "incident.ended"]
    assert ended["state"] == "VERIFIED" and ended["approved_by"] == f"rule {RULE}", ended
    status_page = phone.click(ended["status_url"])["get"]
    assert status_page["status"] == 200, status_page
    assert "VERIFIED" in status_page["text"] and f"Approved by rule {RULE}" in status_page["text"]
    summary = rule_summary(ct)
    assert summary["mode"] == "enforce" and summary["approved"] == 1, summary

    # 3. A fix that does not hold suspends the rule for the app.
    ct.write_file(NEW_BUILD, NEW_BUILD_TEXT)
    ct.systemctl("daemon-reload")
    kill(ct)
    third = plan_of_app(ct, known)["plan_id"]
    decision = ruled(ct, third)
    assert (decision["outcome"], decision["rule"]) == ("approved", RULE), decision
    assert wait_state(ct, third, FINAL, timeout=APPLIED_AND_JUDGED) == "UNRESOLVED"
    # Every approver hears it did not hold: what opsbot-verify saw, and the status link.
    [unresolved] = [m for m in announced(phone, third) if m["event"] == "plan.unresolved"]
    assert unresolved["verification"] and unresolved["approved_by"] == f"rule {RULE}"
    status_page = phone.click(unresolved["status_url"])["get"]
    assert status_page["status"] == 200 and "UNRESOLVED" in status_page["text"], status_page

    def followed_up() -> list[dict[str, Any]]:
        out = ct.journal("-o", "json", f"FOLLOW_UP_OF={third}", "EVENT=diagnose.finished")
        return [json.loads(line) for line in out.splitlines()]

    [finished] = ct.wait_for(followed_up, timeout=60, what="the follow-up diagnosis")
    assert finished["KIND"] == "note", finished  # the same start again: for a human
    ct.run(["rm", "-rf", f"{APP_FILE}.d"])  # a human rolls the build back
    ct.systemctl("daemon-reload")
    # The next plan for the app, as a diagnosis submits one (a start was tried: a restart).
    reply = submit(ct, restart_plan(APP, "bring invoices back", active_state=["inactive"]))
    assert reply["verdict"] == "ACCEPT", reply
    fourth = str(reply["plan_id"])
    decision = ruled(ct, fourth)
    suspended = (
        f"the last plan that ran on {APP}, {third}, ended UNRESOLVED: rules are suspended "
        "for it until a plan a human approves ends VERIFIED"
    )
    assert decision["outcome"] == "for humans", decision
    assert decision["refused"] == [f"{RULE}: {suspended}"], decision
    assert any(m["approve_url"] for m in announced(phone, fourth) if m["approver"] == "alice")
    assert approvals(ct, fourth) == [] and shown(ct, fourth)["state"] == "PROPOSED"
    approve(ct, fourth)
    assert wait_state(ct, fourth, FINAL, timeout=APPLIED_AND_JUDGED) == "VERIFIED"
    summary = rule_summary(ct)
    assert summary["approved"] == 2 and summary["refused"][suspended] == 1, summary
