"""The opsbot.fleet modules, run as Ansible runs them (the module file with its arguments in a
JSON file, ansible_collections importable), against a stand-in ``opsbot`` that answers as the
real CLI does (its JSON is the real models' dump) and records every argv it was given: an
operator's reviewed sha256 is the only way to an approval, and check mode approves nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from plans import argv_of
from shared_schema import Plan
from shared_schema.approver_socket import PolicyReported, RuleDecision, RuleSummary
from shared_schema.executor_socket import PlanDetail, PlanSummary

COLLECTIONS = Path(__file__).resolve().parents[3] / "packaging" / "ansible"
MODULES = COLLECTIONS / "ansible_collections" / "opsbot" / "fleet" / "plugins" / "modules"
PLAN_ID = "20261201-213000-0a1b2c3d"
OTHER_ID = "20261201-213500-0f0f0f0f"

#: The stand-in CLI: answers from STATE (a JSON file), appends each argv to LOG.
STAND_IN = """\
import json, sys
STATE, LOG = {state!r}, {log!r}
argv = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(json.dumps(argv) + "\\n")
with open(STATE) as f:
    state = json.load(f)
plans = {{d["summary"]["plan_id"]: d for d in state["plans"]}}
def fail(message, status):
    print("opsbot: error: " + message, file=sys.stderr)
    sys.exit(status)
if argv[0] == "plans":
    wanted = argv[argv.index("--state") + 1].split(",") if "--state" in argv else None
    print(json.dumps([d["summary"] for d in state["plans"]
                      if wanted is None or d["summary"]["state"] in wanted]))
elif argv[0] == "show":
    if argv[1] not in plans:
        fail("no plan " + argv[1], 1)
    print(json.dumps(plans[argv[1]]))
elif argv[0] == "approve":
    detail = plans.get(argv[1])
    sha = argv[argv.index("--sha256") + 1]
    if detail is None or not detail["summary"]["sha256"].startswith(sha):
        fail("plan " + argv[1] + " does not have sha256 " + sha, 5)
    detail["summary"]["state"] = state.get("after_approve", "APPROVED")
    with open(STATE, "w") as f:
        json.dump(state, f)
    print(json.dumps(state["approval"]))
elif argv[0] == "diagnose":
    print(json.dumps(state["diagnose"]))
    sys.exit(state.get("diagnose_status", 3))
elif argv[0] == "replay":
    if "replay" not in state:
        fail("permission denied reading /var/lib/opsbot-diagnose/records: run as root", 1)
    print(json.dumps(state["replay"]))
    sys.exit(state.get("replay_status", 0))
elif argv[:2] == ["policy", "report"]:
    if "policy_report" not in state:
        fail("cannot connect to /run/opsbot/approver.sock: Connection refused", 1)
    print(json.dumps(state["policy_report"]))
else:
    fail("unknown command " + argv[0], 2)
"""


def detail(plan_id: str = PLAN_ID, state: str = "PROPOSED", unit: str = "app.service") -> Any:
    """A plan as ``opsbot show ID --json`` prints it: the executor models' own dump."""
    plan = Plan.model_validate(
        {
            "goal": f"bring {unit} back",
            "steps": [
                {
                    "tool": "restart_unit",
                    "args": {"unit": unit},
                    "expect": {"active_state": ["failed"]},
                    "reason": f"{unit} exited 1 after the deploy",
                }
            ],
        }
    )
    summary = PlanSummary(
        plan_id=plan_id,
        state=state,
        sha256=hashlib.sha256(plan.canonical()).hexdigest(),
        goal=plan.goal,
        units=[unit],
        submitted_at=datetime(2026, 12, 1, 21, 30, tzinfo=UTC),
        submitted_by="opsbot-diagnose",
    )
    shown = PlanDetail(
        summary=summary, plan=plan, argv=argv_of(plan.model_dump(mode="json")["steps"])
    )
    return shown.model_dump(mode="json")


def policy_report(plan_id: str = PLAN_ID, sha256: str = "0" * 64) -> Any:
    """``opsbot policy report --json`` as root's approver answers it (the models' dump): a
    shadow rule that would have approved plan_id, and one that refused it."""
    decision = RuleDecision(
        plan_id=plan_id,
        sha256=sha256,
        at=datetime(2026, 12, 1, 21, 30, 5, tzinfo=UTC),
        units=["app.service"],
        tools=["restart_unit"],
        outcome="would approve",
        rule="night-restarts",
        rule_sha256="1" * 64,
        refused=["db-reloads: tool restart_unit is not one the rule names"],
    )
    reported = PolicyReported(
        rules=[
            RuleSummary(
                name="night-restarts",
                mode="shadow",
                would_approve=4,
                ended={"VERIFIED": 3, "EXPIRED": 1},
            ),
            RuleSummary(
                name="db-reloads",
                mode="shadow",
                refused={"tool restart_unit is not one the rule names": 5},
            ),
        ],
        records=5,
        dropped=0,
        recent=[decision],
    )
    return reported.model_dump(mode="json")


APPROVAL = {
    "approval": {
        "v": 1,
        "plan_id": PLAN_ID,
        "sha256": "0" * 64,
        "approver": "root",
        "approved_at": "2026-12-01T21:40:00Z",
        "expires_at": "2026-12-01T22:40:00Z",
    },
    "next_apply": "opsbot-apply.service starts now (opsbot-apply.path is active)",
    "applies": True,
    "runs": "now",
    "override_window": False,
    "window": None,
}


class Host:
    """One managed host's opsbot, as the modules see it: the stand-in CLI and its log."""

    def __init__(self, tmp_path: Path, plans: list[Any], **extra: Any) -> None:
        self.tmp = tmp_path
        self.state = tmp_path / "state.json"
        self.log = tmp_path / "argv.log"
        self.state.write_text(json.dumps({"plans": plans, "approval": APPROVAL, **extra}))
        self.cli = tmp_path / "opsbot"
        self.cli.write_text(
            f"#!{sys.executable}\n" + STAND_IN.format(state=str(self.state), log=str(self.log))
        )
        self.cli.chmod(0o755)

    def calls(self) -> list[list[str]]:
        """Every argv the CLI was run with (without the program)."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def verbs(self) -> list[str]:
        return [argv[0] for argv in self.calls()]

    def run(self, module: str, check_mode: bool = False, **params: Any) -> dict[str, Any]:
        """Run plugins/modules/MODULE.py as Ansible would; its JSON result."""
        args = self.tmp / "args.json"
        module_args = {**params, "opsbot_cli": str(self.cli), "_ansible_check_mode": check_mode}
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
        done = subprocess.run(
            [sys.executable, str(MODULES / f"{module}.py"), str(args)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(COLLECTIONS)},
            check=False,
        )
        result: dict[str, Any] = json.loads(done.stdout)
        assert (done.returncode != 0) == bool(result.get("failed")), done.stderr
        return result


def test_approve_binds_the_whole_reviewed_sha256(tmp_path: Path) -> None:
    """The plan on the host is the one reviewed: approved with its whole sha256, changed."""
    plan = detail()
    host = Host(tmp_path, [plan])
    sha = plan["summary"]["sha256"]
    result = host.run("opsbot_approve", plan_id=PLAN_ID, sha256=sha)
    assert result["changed"] is True
    assert result["msg"] == f"approved plan {PLAN_ID} (sha256 {sha})"
    assert result["approval"]["next_apply"].startswith("opsbot-apply.service starts now")
    assert host.calls() == [
        ["show", PLAN_ID, "--json"],
        ["approve", PLAN_ID, "--sha256", sha, "--json"],
    ]


def test_a_plan_changed_since_the_review_is_never_approved(tmp_path: Path) -> None:
    """The review saw one sha256; the host's plan has another now (rewritten, or
    another plan under the id): the task fails naming both, and approve never runs."""
    host = Host(tmp_path, [detail()])
    reviewed = detail(unit="other.service")["summary"]["sha256"]
    result = host.run("opsbot_approve", plan_id=PLAN_ID, sha256=reviewed)
    actual = detail()["summary"]["sha256"]
    assert result["failed"] is True
    assert result["msg"] == (
        f"plan {PLAN_ID} on this host is now sha256 {actual}; the review saw {reviewed}; "
        "not approved"
    )
    assert "approve" not in host.verbs()


@pytest.mark.parametrize("sha", ["", "6d743b17123c", "g" * 64, "0" * 63, "0" * 65, "0" * 64 + " x"])
def test_anything_but_a_whole_sha256_is_refused(tmp_path: Path, sha: str) -> None:
    """A prefix (enough for the CLI on a terminal) or anything not 64 hex digits: refused
    before the host is even asked, so there is never an approval without the sha256."""
    host = Host(tmp_path, [detail()])
    result = host.run("opsbot_approve", plan_id=PLAN_ID, sha256=sha)
    assert result["failed"] is True
    assert "is not a whole sha256 (64 hex digits)" in result["msg"]
    assert host.calls() == []


def test_check_mode_says_it_would_approve_and_approves_nothing(tmp_path: Path) -> None:
    """--check: the plan is read and its sha256 compared, "would approve", no approve."""
    plan = detail()
    host = Host(tmp_path, [plan])
    sha = plan["summary"]["sha256"]
    result = host.run("opsbot_approve", check_mode=True, plan_id=PLAN_ID, sha256=sha)
    assert result["changed"] is True
    assert result["msg"] == f"would approve plan {PLAN_ID} (sha256 {sha})"
    assert host.verbs() == ["show"]


@pytest.mark.parametrize("state", ["APPROVED", "APPLYING", "APPLIED", "VERIFIED"])
def test_an_approved_plan_is_left_as_it_is(tmp_path: Path, state: str) -> None:
    """A second run of the rollout: the plan went through already, changed=false."""
    plan = detail(state=state)
    host = Host(tmp_path, [plan])
    result = host.run("opsbot_approve", plan_id=PLAN_ID, sha256=plan["summary"]["sha256"])
    assert result["changed"] is False
    assert result["msg"] == f"plan {PLAN_ID} is {state} already"
    assert host.verbs() == ["show"]


@pytest.mark.parametrize("state", ["STALE", "EXPIRED", "REJECTED", "FAILED", "UNRESOLVED"])
def test_an_ended_plan_fails_naming_its_state(tmp_path: Path, state: str) -> None:
    """A plan that went STALE (its unit changed) or ended otherwise: approving it now
    means nothing, so the task fails and says the state."""
    plan = detail(state=state)
    host = Host(tmp_path, [plan])
    result = host.run("opsbot_approve", plan_id=PLAN_ID, sha256=plan["summary"]["sha256"])
    assert result["failed"] is True
    assert result["msg"].startswith(f"plan {PLAN_ID} is {state}")
    assert "approve" not in host.verbs()


def test_an_unknown_plan_fails_with_the_cli_message(tmp_path: Path) -> None:
    """The CLI's own error line reaches the operator, with what its exit status means."""
    host = Host(tmp_path, [detail()])
    result = host.run("opsbot_approve", plan_id=OTHER_ID, sha256="a" * 64)
    assert result["failed"] is True
    assert f"error: no plan {OTHER_ID}" in result["msg"]
    assert "exited 1 (error: a daemon cannot be reached" in result["msg"]


def test_plans_lists_goal_steps_argv_sha256_and_evidence(tmp_path: Path) -> None:
    """opsbot_plans: each plan in the state asked for, whole sha256, argv per step, and
    never a change; --state goes to the CLI as it takes it."""
    host = Host(tmp_path, [detail(), detail(OTHER_ID, state="VERIFIED", unit="web.service")])
    result = host.run("opsbot_plans", check_mode=True, state=["PROPOSED"])
    assert result["changed"] is False
    (plan,) = result["plans"]
    assert plan["plan_id"] == PLAN_ID
    assert plan["sha256"] == detail()["summary"]["sha256"]
    assert plan["goal"] == "bring app.service back"
    assert plan["steps"] == [
        {
            "tool": "restart_unit",
            "unit": "app.service",
            "argv": ["systemctl", "restart", "--no-ask-password", "--", "app.service"],
            "precondition": {"active_state": ["failed"], "sub_state": None, "invocation_id": None},
            "reason": "app.service exited 1 after the deploy",
        }
    ]
    assert plan["evidence"] == ["app.service: app.service exited 1 after the deploy"]
    assert host.calls()[0] == ["plans", "--json", "--state", "PROPOSED"]


def test_plans_follows_one_plan_and_fails_for_a_missing_one(tmp_path: Path) -> None:
    """plan_id: only that plan (the rollout waits on it); an id the host does not have
    fails rather than answering an empty list the wait would loop on."""
    host = Host(tmp_path, [detail(), detail(OTHER_ID, state="VERIFIED", unit="web.service")])
    one = host.run("opsbot_plans", plan_id=OTHER_ID)
    assert [(p["plan_id"], p["state"]) for p in one["plans"]] == [(OTHER_ID, "VERIFIED")]
    missing = host.run("opsbot_plans", plan_id="20261201-000000-00000000")
    assert missing["failed"] is True
    assert missing["msg"] == "no plan 20261201-000000-00000000 on this host"


def _verdict(plan: Any) -> dict[str, Any]:
    return {
        "events": [],
        "verdict": {
            "kind": "plan",
            "ended_by": "plan_accepted",
            "run_id": "r1",
            "unit": "app.service",
            "steps_used": 3,
            "tokens": 0,
            "evidence": [],
            "plan_id": PLAN_ID,
            "sha256": plan["summary"]["sha256"],
            "plan": plan["plan"],
        },
    }


def test_diagnose_stores_a_plan_and_says_so(tmp_path: Path) -> None:
    """A diagnosis that proposed a plan (exit 3) changed the host: a plan waits."""
    plan = detail()
    host = Host(tmp_path, [], diagnose=_verdict(plan))
    result = host.run("opsbot_diagnose", unit="app.service", symptom="502")
    assert result["changed"] is True
    assert (result["verdict"], result["plan_id"]) == ("plan", PLAN_ID)
    assert result["sha256"] == plan["summary"]["sha256"]
    assert result["exit_status"] == 3
    assert host.calls() == [["diagnose", "app.service", "--json", "--symptom", "502"]]


def test_diagnose_in_check_mode_runs_nothing(tmp_path: Path) -> None:
    """A diagnosis stores a plan: check mode only says it would diagnose."""
    host = Host(tmp_path, [], diagnose=_verdict(detail()))
    result = host.run("opsbot_diagnose", check_mode=True, unit="app.service")
    assert result["changed"] is False
    assert result["msg"].startswith("would diagnose app.service")
    assert host.calls() == []


def test_policy_report_returns_the_hosts_report_and_changes_nothing(tmp_path: Path) -> None:
    """opsbot_policy_report: `opsbot policy report --json` as the host printed it, never a
    change, the same in check mode."""
    host = Host(tmp_path, [], policy_report=policy_report())
    result = host.run("opsbot_policy_report", check_mode=True)
    assert result["changed"] is False
    assert result["report"] == policy_report()
    assert host.calls() == [["policy", "report", "--json"]]


def test_policy_report_fails_with_the_cli_message(tmp_path: Path) -> None:
    """An approver that does not answer: the task fails with the CLI's own line (the
    review keeps it as that host's "not read")."""
    result = Host(tmp_path, []).run("opsbot_policy_report")
    assert result["failed"] is True
    assert result["msg"] == (
        "`" + str(tmp_path / "opsbot") + " policy report --json` exited 1 (error: a daemon "
        "cannot be reached, permission denied, internal error): error: cannot connect to "
        "/run/opsbot/approver.sock: Connection refused"
    )
