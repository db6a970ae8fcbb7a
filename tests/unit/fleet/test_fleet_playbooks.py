"""fleet-review.yml and fleet-approve.yml run by ansible-playbook against hosts whose opsbot is
the stand-in CLI of test_fleet_modules (``connection: local``, one stand-in per host): the
review writes the report, the approval follows it canary first, and a plan changed since the
review, a STALE canary or --check stops everything after it. The lead's integration test runs
the same playbooks over SSH against booted hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.fleet.test_fleet_modules import COLLECTIONS, Host, detail, policy_report

#: Real ansible-playbook runs: minutes a developer skips with -m 'not slow'.
pytestmark = pytest.mark.slow

PLAYBOOKS = COLLECTIONS / "ansible_collections" / "opsbot" / "fleet" / "playbooks"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
IDS = {"web1": "20261201-213000-0000aa01", "web2": "20261201-213000-0000aa02"}
IDS["db1"] = "20261201-213000-0000aa03"

pytestmark = pytest.mark.skipif(
    not PLAYBOOK.exists() and os.environ.get("CI") != "true", reason="no ansible-playbook"
)


class Fleet:
    """Three hosts with a plan each (web1 and web2 the same fix), one with none; only
    web1's approver answers `opsbot policy report`."""

    def __init__(self, tmp_path: Path, after_approve: str = "VERIFIED") -> None:
        self.tmp = tmp_path
        self.hosts: dict[str, Host] = {}
        lines = ["[all:vars]", "opsbot_become=false", "[opsbot]"]
        for name in ("web1", "web2", "db1", "idle"):
            (tmp_path / name).mkdir()
            unit = "pg.service" if name == "db1" else "app.service"
            plans = [detail(IDS[name], unit=unit)] if name in IDS else []
            rules = {}
            if name == "web1":
                rules["policy_report"] = policy_report(IDS[name], plans[0]["summary"]["sha256"])
            self.hosts[name] = Host(tmp_path / name, plans, after_approve=after_approve, **rules)
            lines.append(
                f"{name} ansible_connection=local ansible_python_interpreter={sys.executable} "
                f"opsbot_cli={self.hosts[name].cli}"
            )
        (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")

    def playbook(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
            "ANSIBLE_HOME": str(self.tmp / ".ansible"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }
        return subprocess.run(
            [str(PLAYBOOK), "-i", "hosts.ini", str(PLAYBOOKS / name), *args],
            cwd=self.tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def approvals(self) -> dict[str, list[str]]:
        """Which hosts were asked to approve, and which plans."""
        return {
            name: [argv[1] for argv in host.calls() if argv[0] == "approve"]
            for name, host in self.hosts.items()
            if any(argv[0] == "approve" for argv in host.calls())
        }

    def review(self) -> dict[str, Any]:
        done = self.playbook("fleet-review.yml")
        assert done.returncode == 0, done.stdout + done.stderr
        report: dict[str, Any] = json.loads((self.tmp / "fleet-report.json").read_text())
        return report

    def approve(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.playbook(
            "fleet-approve.yml",
            "-e",
            "report=fleet-report.json",
            "-e",
            "opsbot_wait_delay=0",
            *args,
        )


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


def test_review_then_approve_canary_first(fleet: Fleet) -> None:
    """The review writes JSON and Markdown where the operator stands, in inventory order,
    web1 and web2 as one fix, with what web1's rules would do (and web2's approver that
    did not answer, reviewed all the same); the approval asks web1 (the canary) alone,
    then the rest, each for exactly its reviewed plan, and ends with every host VERIFIED."""
    report = fleet.review()
    assert list(report["hosts"]) == ["web1", "web2", "db1", "idle"]
    assert [g["count"] for g in report["groups"]] == [2, 1]
    assert (fleet.tmp / "fleet-report.md").read_text().startswith("# opsbot fleet review")
    assert report["rules"]["web1"]["plans"][IDS["web1"]]["rule"] == "night-restarts"
    assert "Connection refused" in report["rules"]["web2"]["error"]
    done = fleet.approve()
    assert done.returncode == 0, done.stdout
    assert "rollout: web1, web2, db1 (canary web1)" in done.stdout
    assert fleet.approvals() == {name: [plan_id] for name, plan_id in IDS.items()}
    canary, batch = done.stdout.split("PLAY [Approve the reviewed plans")[1:]
    assert "on web1" in canary and "web2" not in canary
    assert "web2: VERIFIED" in batch and "db1: VERIFIED" in batch


def test_a_plan_changed_after_the_review_stops_the_rollout(fleet: Fleet) -> None:
    """web2's plan is another one by the time of the approval: web2 fails naming both
    sha256, and neither web2 nor db1 (in the same batch) is asked to approve anything."""
    fleet.review()
    state = json.loads(fleet.hosts["web2"].state.read_text())
    state["plans"][0]["summary"]["sha256"] = "f" * 64
    fleet.hosts["web2"].state.write_text(json.dumps(state))
    done = fleet.approve()
    assert done.returncode != 0
    assert f"plan {IDS['web2']} on this host is now sha256 {'f' * 64}" in done.stdout
    assert fleet.approvals() == {"web1": [IDS["web1"]]}


def test_a_stale_canary_stops_the_rollout(tmp_path: Path) -> None:
    """The canary's plan goes STALE instead of VERIFIED: the play fails naming host,
    plan and state, and no other host is touched."""
    fleet = Fleet(tmp_path, after_approve="STALE")
    fleet.review()
    done = fleet.approve("-e", "canary=db1")
    assert done.returncode != 0
    assert f"db1: plan {IDS['db1']} is STALE, not VERIFIED; the rollout stops here" in done.stdout
    assert fleet.approvals() == {"db1": [IDS["db1"]]}


def test_check_mode_changes_nothing_anywhere(fleet: Fleet) -> None:
    """--check: the review still writes its report (the controller's file, not a host),
    the approval says what it would approve on each host and approves nothing."""
    done = fleet.playbook("fleet-review.yml", "--check")
    assert done.returncode == 0, done.stdout
    assert (fleet.tmp / "fleet-report.json").exists()
    done = fleet.approve("--check")
    assert done.returncode == 0, done.stdout
    assert f"would approve plan {IDS['web1']}" in done.stdout
    assert fleet.approvals() == {}


def test_approve_without_a_report_or_with_a_bad_canary_fails_clearly(fleet: Fleet) -> None:
    """No -e report=: one line saying to pass it; a canary without a plan: refused."""
    done = fleet.playbook("fleet-approve.yml")
    assert done.returncode != 0
    assert "pass the reviewed report: -e report=fleet-report.json" in done.stdout
    fleet.review()
    done = fleet.approve("-e", "canary=idle")
    assert done.returncode != 0
    assert "canary idle has no plan in fleet-report.json" in done.stdout
    assert fleet.approvals() == {}
