"""The fleet review report (filter plugin opsbot.fleet.fleet_report, run on the controller):
the same fix on several hosts is one group ("2 hosts restart_unit app.service web1, web2")
whatever each host's preconditions, the table fits 100 columns, the Markdown carries every
sha256 whole, and a file that is not a report is refused."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.unit.fleet.test_fleet_modules import COLLECTIONS, policy_report

PLUGIN = COLLECTIONS / "ansible_collections/opsbot/fleet/plugins/filter/fleet_report.py"


def _load() -> ModuleType:
    """The filter plugin as Ansible loads it, its collection's module_utils importable."""
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))
    spec = importlib.util.spec_from_file_location("opsbot_fleet_report_plugin", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet = _load()


def plan(
    plan_id: str, unit: str = "app.service", tool: str = "restart_unit", **extra: Any
) -> dict[str, Any]:
    """A plan as opsbot_plans returns it."""
    n = int(plan_id[-2:])
    return {
        "plan_id": plan_id,
        "state": "PROPOSED",
        "goal": f"bring {unit} back",
        "sha256": f"{n:02d}" * 32,
        "steps": [
            {
                "tool": tool,
                "unit": unit,
                "argv": ["systemctl", tool.split("_")[0], "--no-ask-password", "--", unit],
                "precondition": {"active_state": ["failed"], "invocation_id": f"inv{n}"},
            }
        ],
        "evidence": [f"{unit}: exited 1"],
        "submitted_at": "2026-12-01T21:30:00Z",
        **extra,
    }


def hostplans() -> dict[str, list[dict[str, Any]]]:
    return {
        "web1": [plan("20261201-213000-0000aa01")],
        "web2": [plan("20261201-213000-0000aa02")],
        "db1": [plan("20261201-213000-0000aa03", "postgresql.service", "reload_unit")],
        "web3": [],
    }


def test_the_same_fix_on_two_hosts_is_one_group() -> None:
    """web1 and web2 restart app.service (each its own invocation id in the
    precondition): one group of 2, first; db1's reload is a group of its own."""
    report = fleet.fleet_report(hostplans(), generated_at="2026-12-01T21:31:00+00:00")
    assert report["format"] == "opsbot-fleet-report/1"
    assert report["generated_at"] == "2026-12-01T21:31:00+00:00"
    assert [(g["count"], g["goal"], g["steps"]) for g in report["groups"]] == [
        (2, "bring app.service back", [["restart_unit", "app.service"]]),
        (1, "bring postgresql.service back", [["reload_unit", "postgresql.service"]]),
    ]
    assert report["groups"][0]["hosts"] == [
        {"host": "web1", "plan_id": "20261201-213000-0000aa01", "sha256": "01" * 32},
        {"host": "web2", "plan_id": "20261201-213000-0000aa02", "sha256": "02" * 32},
    ]
    assert list(report["hosts"]) == ["web1", "web2", "db1", "web3"]
    assert report["hosts"]["web3"] == []
    assert report["hosts"]["db1"][0]["steps"][0]["argv"][1] == "reload"


def test_the_same_fix_on_seven_hosts() -> None:
    """Seven hosts with the same fix and one with another: a group of 7 first; steps in
    another order are another fix (order matters: the plan runs them in order)."""
    many = {f"web{n}": [plan(f"20261201-213000-0000aa{n:02d}")] for n in range(1, 8)}
    two_steps = plan("20261201-213000-0000aa08")
    two_steps["steps"] = [
        {"tool": "reset_failed_unit", "unit": "app.service"},
        {"tool": "restart_unit", "unit": "app.service"},
    ]
    flipped = plan("20261201-213000-0000aa09")
    flipped["steps"] = list(reversed(two_steps["steps"]))
    many.update(web8=[two_steps], web9=[flipped])
    groups = fleet.fleet_report(many)["groups"]
    assert [g["count"] for g in groups] == [7, 1, 1]
    assert [h["host"] for h in groups[0]["hosts"]] == [f"web{n}" for n in range(1, 8)]
    assert groups[1]["steps"] != groups[2]["steps"]


def test_the_table_fits_100_columns() -> None:
    """Many long host names and a long goal: every line at most 100 columns, host
    names wrapped, not lost."""
    names = [f"host-with-a-rather-long-name-{n:02d}.example.org" for n in range(12)]
    long_goal = "bring app.service back " * 10
    report = fleet.fleet_report(
        {
            name: [plan(f"20261201-213000-0000aa{n:02d}", goal=long_goal)]
            for n, name in enumerate(names)
        }
    )
    lines = fleet.fleet_report_table(report)
    assert max(len(line) for line in lines) <= 100
    assert lines[0] == "12 plans on 12 hosts (of 12 reviewed), 1 fix:"
    assert lines[1].startswith("12 hosts restart_unit app.service  host-with-a-rather-long-name-00")
    assert all(name in "\n".join(lines) for name in names)


def test_the_table_names_each_fix_and_host() -> None:
    """What the operator reads before approving: the groups, then each host's plan with
    the start of its sha256, and the host that has nothing waiting."""
    lines = fleet.fleet_report_table(fleet.fleet_report(hostplans()))
    assert lines[:5] == [
        "3 plans on 3 hosts (of 4 reviewed), 2 fixes:",
        "2 hosts  restart_unit app.service  web1, web2",
        "         goal: bring app.service back",
        "1 host   reload_unit postgresql.service  db1",
        "         goal: bring postgresql.service back",
    ]
    assert "web1  20261201-213000-0000aa01  PROPOSED  sha256 0101010101010101...  " in lines[6]
    assert lines[-1] == "web3: no plan waits"


def test_host_text_cannot_paint_the_terminal() -> None:
    """A goal is written by a model reading logs anyone can write to: escape sequences and
    line breaks are shown escaped, on one line."""
    hostile = plan("20261201-213000-0000aa01", goal="fix\x1b[2J\nnow")
    lines = fleet.fleet_report_table(fleet.fleet_report({"web1": [hostile]}))
    assert all("\x1b" not in line and "\n" not in line for line in lines)
    assert "         goal: fix\\x1b[2J now" in lines


def test_markdown_carries_every_sha256_whole() -> None:
    """The Markdown report: the fixes as a table, each host's plans with the whole sha256
    and each step's argv; a pipe in a goal does not break the table."""
    plans = hostplans()
    plans["db1"][0]["goal"] = "reload | restart"
    text = fleet.fleet_report_markdown(fleet.fleet_report(plans))
    assert "| 2 | restart_unit app.service | bring app.service back |" in text
    assert "reload \\| restart" in text
    for n in (1, 2, 3):
        assert f"sha256 `{f'{n:02d}' * 32}`" in text
    assert "`systemctl restart --no-ask-password -- app.service`" in text
    assert "### web3\n\nNo plan waits." in text


def test_what_is_not_a_mapping_of_hosts_is_refused() -> None:
    """The filter takes {host: [plan, ...]} as the playbook builds it, nothing else."""
    with pytest.raises(fleet.ReportError, match="fleet_report"):
        fleet.fleet_report([])


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("x", "its plans are not a list"),
        ([{"plan_id": "x"}], "a plan is not what opsbot_plans returns"),
        ([dict(plan("20261201-213000-0000aa01"), steps=[{}])], "steps need tool, unit"),
    ],
)
def test_what_is_not_opsbot_plans_output_is_not_reviewed(value: Any, why: str) -> None:
    """A host that answers what opsbot_plans never returns is not reviewed (nothing of it
    to approve), and says why; the other hosts are reviewed all the same."""
    report = fleet.fleet_report({"web1": value, "web2": [plan("20261201-213000-0000aa02")]})
    assert list(report["hosts"]) == ["web2"]
    assert report["unread"]["web1"].startswith("its answer is not opsbot's: ")
    assert why in report["unread"]["web1"]


def test_a_file_that_is_not_a_report_is_refused() -> None:
    """The table and the Markdown take only a report of this format."""
    for render in (fleet.fleet_report_table, fleet.fleet_report_markdown):
        with pytest.raises(fleet.ReportError, match="opsbot-fleet-report/1"):
            render({"format": "something/1", "hosts": {}})


def test_the_filters_ansible_sees() -> None:
    """FilterModule names the filters the playbooks call."""
    assert sorted(fleet.FilterModule().filters()) == [
        "fleet_plan_ends",
        "fleet_report",
        "fleet_report_markdown",
        "fleet_report_path",
        "fleet_report_refusals",
        "fleet_report_table",
    ]


def test_a_relative_report_path_is_the_operators(tmp_path: Path, monkeypatch: Any) -> None:
    """-e report=fleet-report.json means the file where the operator ran the playbook
    (a local task's own directory is the playbook's)."""
    monkeypatch.chdir(tmp_path)
    assert fleet.fleet_report_path("fleet-report.json") == str(tmp_path / "fleet-report.json")
    assert fleet.fleet_report_path("/srv/r.json") == "/srv/r.json"


def test_how_each_waited_plan_ended() -> None:
    """fleet-approve.yml's wait results, as the assert that stops the rollout reads them:
    a plan's state and reason, or "unknown" with the task's message when it was not read."""
    results = [
        {"item": {"plan_id": "p1"}, "plans": [{"state": "VERIFIED", "reason": ""}]},
        {"item": {"plan_id": "p2"}, "plans": [{"state": "STALE", "reason": "unit restarted"}]},
        {"item": {"plan_id": "p3"}, "msg": "no plan p3 on this host"},
    ]
    assert fleet.fleet_plan_ends(results) == [
        {"plan_id": "p1", "state": "VERIFIED", "reason": ""},
        {"plan_id": "p2", "state": "STALE", "reason": "unit restarted"},
        {"plan_id": "p3", "state": "unknown", "reason": "no plan p3 on this host"},
    ]


#: What opsbot_policy_report left per host (registered with failed_when: false).
APPROVER_DOWN = (
    "`/usr/local/bin/opsbot policy report --json` exited 1 (error: a daemon cannot be "
    "reached, permission denied, internal error): error: cannot connect to "
    "/run/opsbot/approver.sock: Connection refused"
)


def rules_read() -> dict[str, Any]:
    paused = policy_report()
    paused.update(
        rules=[],
        recent=[],
        pause={"paused": True, "by": "root", "at": "2026-12-01T21:00:00Z", "reason": "deploy"},
    )
    return {
        "web1": {
            "changed": False,
            "report": policy_report("20261201-213000-0000aa01", sha256="01" * 32),
        },
        "web2": {"changed": False, "failed": False, "msg": APPROVER_DOWN, "rc": 1},
        "db1": {"changed": False, "report": paused},
    }


def test_the_report_says_what_each_hosts_rules_did() -> None:
    """With rules=: per host, each rule's counts and how the plans it would have approved
    ended, the decision about each reviewed plan, the pause; a host whose approver did not
    answer keeps the task's message, and one without a result says so."""
    report = fleet.fleet_report(hostplans(), rules=rules_read())
    rules = report["rules"]
    assert list(rules) == ["web1", "web2", "db1", "web3"]
    web1 = rules["web1"]
    assert web1["error"] == "" and web1["paused"] is None
    assert web1["rules"][0] == {
        "name": "night-restarts",
        "mode": "shadow",
        "approved": 0,
        "would_approve": 4,
        "ended": {"VERIFIED": 3, "EXPIRED": 1},
        "refused": {},
    }
    assert web1["plans"] == {
        "20261201-213000-0000aa01": {
            "outcome": "would approve",
            "rule": "night-restarts",
            "refused": ["db-reloads: tool restart_unit is not one the rule names"],
            "read": [],
        }
    }
    assert rules["web2"] == {"error": APPROVER_DOWN}
    assert rules["db1"]["paused"]["by"] == "root" and rules["db1"]["rules"] == []
    assert rules["web3"] == {"error": "opsbot policy report did not run there"}
    assert "rules" not in fleet.fleet_report(hostplans())


def test_the_table_and_markdown_show_the_rules() -> None:
    """The terminal: one line a rule, the plan a rule would have approved, the pause and
    the approver that did not answer, each within 100 columns; the Markdown: a table of
    the rules per host and, under the plan, what the rules decided about it."""
    report = fleet.fleet_report(hostplans(), rules=rules_read())
    lines = fleet.fleet_report_table(report)
    assert max(len(line) for line in lines) <= 100
    tail = lines[lines.index("standing rules (opsbot policy report):") + 1 :]
    assert tail[:3] == [
        "web1  night-restarts (shadow): approved 0, would approve 4 (VERIFIED 3, EXPIRED 1), "
        "refused 0",
        "web1  db-reloads (shadow): approved 0, would approve 0, refused 5",
        "web1  20261201-213000-0000aa01: would approve (night-restarts)",
    ]
    assert tail[3] == APPROVER_DOWN.join(["web2  not read: ", ""])[:97] + "..."
    assert tail[4:] == [
        "db1  PAUSED by root at 2026-12-01T21:00:00Z: deploy",
        "db1  no [[approve.rule]]",
        "web3  not read: opsbot policy report did not run there",
    ]
    text = fleet.fleet_report_markdown(report)
    assert "  - standing rules: would approve (night-restarts)" in text
    assert "| night-restarts | shadow | 0 | 4 | VERIFIED 3, EXPIRED 1 |  |" in text
    assert "| db-reloads | shadow | 0 | 0 |  | 5: tool restart_unit is not one" in text
    assert "### web2\n\nNot read: '/usr/local/bin/opsbot policy report --json' exited 1" in text
