"""Issue 39: the fleet's review and approval attacked from a subverted host (root there, so
every answer its opsbot or its Python gives is the attacker's) and from the diagnose user
on a host (who writes a plan's goal, reasons and units, never its id, sha256 or state).

What a host says must stay that host's word: under its own inventory name only, never
another host's figures or decisions; never a fake line, a colour, a link or a tag in the
operator's report; never text Ansible would run as a template; and a plan the standing
rules refused never reaches an approval without the refusal, and root's reading, shown.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from shared_schema.approver_socket import PolicyReported, RuleDecision, RuleSummary
from tests.unit.fleet.test_fleet_modules import PLAN_ID, Host, detail
from tests.unit.fleet.test_fleet_playbooks import IDS, PLAYBOOK, Fleet
from tests.unit.fleet.test_fleet_report import fleet, plan

WEB1, WEB2 = "20261201-213000-0000aa01", "20261201-213000-0000aa02"
#: What root's approver reads of a unit that runs and answers (plans.readings words).
HEALTHY = "app.service is active/running (Result=success), no health target of its own"
REFUSED = (
    f"night-restarts: root reads no failure of app.service now ({HEALTHY}): the plan's own "
    "words are not enough"
)


def decision(plan_id: str, sha256: str, **fields: Any) -> dict[str, Any]:
    """One ``recent[]`` record of ``opsbot policy report --json`` (the model's dump)."""
    said = RuleDecision(
        plan_id=plan_id,
        sha256=sha256,
        at=datetime(2026, 12, 1, 21, 30, 5, tzinfo=UTC),
        units=["app.service"],
        tools=["restart_unit"],
        **{"outcome": "for humans", **fields},
    )
    return said.model_dump(mode="json")


def rules_report(*recent: dict[str, Any], **summary: Any) -> dict[str, Any]:
    """opsbot_policy_report's result: one shadow rule, the decisions given."""
    reported = PolicyReported(
        rules=[RuleSummary(name="night-restarts", mode="shadow", **summary)],
        records=len(recent),
        dropped=0,
        recent=[RuleDecision.model_validate(d) for d in recent],
    )
    return {"changed": False, "report": reported.model_dump(mode="json")}


def every_text(report: dict[str, Any]) -> list[str]:
    """Everything the operator reads of a report: the table, the Markdown, the approval's
    list of refusals."""
    return [
        *fleet.fleet_report_table(report),
        *fleet.fleet_report_markdown(report).split("\n"),
        *fleet.fleet_report_refusals(report),
    ]


def unprintable(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.isprintable()]


# -- a host cannot fake the operator's report ----------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("plan_id", f"{WEB1}\nweb2  {WEB2}  PROPOSED  sha256 0202020202020202...  ok"),
        ("plan_id", f"{WEB1}\n"),
        ("plan_id", "--now"),
        ("sha256", "01" * 32 + "\x1b[2K\x1b[1A"),
        ("sha256", "01" * 8),
        ("state", "PROPOSED\nweb2: no plan waits"),
        ("tool", "restart_unit\x1b[8m"),
        ("unit", "app.service\nweb2: no plan waits"),
    ],
)
def test_an_id_sha256_state_tool_or_unit_opsbot_never_writes_is_not_reviewed(
    field: str, value: str
) -> None:
    """A subverted host answers a plan whose id, sha256, state, tool or unit opsbot never
    makes (a line break and a fake line for web2, terminal escapes, a prefix of a sha256,
    an option): the host is NOT REVIEWED, saying why, nothing of it is there to approve,
    no line the operator reads carries a control character, and web2 is reviewed as it
    said."""
    hostile = plan(WEB1)
    if field in ("tool", "unit"):
        hostile["steps"][0][field] = value
    else:
        hostile[field] = value
    report = fleet.fleet_report(
        {"web1": [hostile], "web2": [plan(WEB2)]},
        rules={"web1": rules_report(), "web2": rules_report()},
    )
    assert list(report["hosts"]) == ["web2"] and list(report["rules"]) == ["web2"]
    assert report["unread"]["web1"].startswith("its answer is not opsbot's: ")
    assert report["hosts"]["web2"][0]["sha256"] == "02" * 32
    text = every_text(report)
    assert unprintable(text) == []
    assert any(line.startswith("web1: NOT REVIEWED, its answer is not opsbot's") for line in text)
    assert "**Not reviewed**: its answer is not opsbot's" in "\n".join(text)


@pytest.mark.parametrize(
    "summary",
    [
        {"approved": "9" * 5000},
        {"approved": -4},
        {"would_approve": True},
        {"ended": {"VERIFIED": "many"}},
        {"refused": ["not", "counts"]},
    ],
)
def test_one_hosts_broken_rule_figures_stop_nothing_else(summary: dict[str, Any]) -> None:
    """A subverted host's policy report whose counts are not counts (a number too long
    for int(), a negative one, a bool, text): that host's rules are "not read" with why,
    and the review of its plans and of web2 goes on."""
    web1 = rules_report()
    web1["report"]["rules"][0].update(summary)
    report = fleet.fleet_report(
        {"web1": [plan(WEB1)], "web2": [plan(WEB2)]},
        rules={"web1": web1, "web2": rules_report(decision(WEB2, "02" * 32))},
    )
    assert list(report["hosts"]) == ["web1", "web2"]
    assert report["rules"]["web1"]["error"].startswith("its policy report is not opsbot's: ")
    assert report["rules"]["web2"]["plans"][WEB2]["outcome"] == "for humans"
    assert unprintable(every_text(report)) == []


def test_a_hosts_answer_lands_under_its_own_name_only() -> None:
    """web1 (subverted) answers web2's plan id and sha256 as its own, and a policy report
    saying rule night-restarts approved that plan: the report keeps web1's word under web1
    (approving it would ask web1, never web2); web2's decision is web2's own report's, its
    refusal and root's reading shown, not web1's "approved"."""
    mimic = plan(WEB2)
    web1_says = rules_report(decision(WEB2, "02" * 32, outcome="approved", rule="night-restarts"))
    report = fleet.fleet_report(
        {"web1": [mimic], "web2": [plan(WEB2)]},
        rules={
            "web1": web1_says,
            "web2": rules_report(decision(WEB2, "02" * 32, refused=[REFUSED], read=[HEALTHY])),
        },
    )
    assert [h["host"] for h in report["groups"][0]["hosts"]] == ["web1", "web2"]
    assert report["rules"]["web1"]["plans"][WEB2]["outcome"] == "approved"
    web2 = report["rules"]["web2"]["plans"][WEB2]
    assert (web2["outcome"], web2["rule"], web2["read"]) == ("for humans", "", [HEALTHY])
    assert fleet.fleet_report_refusals(report)[0] == (
        f"web2  {WEB2}: for humans, the rules refused it"
    )


def test_a_decision_about_another_sha256_is_not_the_reviewed_plans() -> None:
    """A decision record names a plan id and a sha256: one with the reviewed id but
    another sha256 is about other bytes, and never shown as the reviewed plan's; the
    plan is "not recorded", which the operator sees as nothing known."""
    other = decision(WEB1, "ff" * 32, outcome="would approve", rule="night-restarts")
    report = fleet.fleet_report({"web1": [plan(WEB1)]}, rules={"web1": rules_report(other)})
    assert report["rules"]["web1"]["plans"][WEB1]["outcome"] == "not recorded"
    assert f"web1  {WEB1}: no rule decision among those the host sent: nothing known" in (
        fleet.fleet_report_table(report)
    )


# -- a refusal is never approved unseen -------------------------------------------------------


def test_a_plan_the_rules_refused_shows_why_and_what_root_read() -> None:
    """The diagnose user proposes a restart of app.service, which runs and answers: the
    rule refuses it (root reads no failure). The terminal table the review prints, the
    Markdown and fleet-approve.yml's rollout message each say the refusal and root's
    reading under the plan, before any approval."""
    read = [HEALTHY, "db.service is active/running (Result=success), health target db: ok"]
    said = rules_report(decision(WEB1, "01" * 32, refused=[REFUSED], read=read))
    report = fleet.fleet_report({"web1": [plan(WEB1)]}, rules={"web1": said})
    table = fleet.fleet_report_table(report)
    at = table.index(f"web1  {WEB1}: for humans, the rules refused it")
    assert table[at + 1 : at + 4] == [
        fleet.cut(f"web1    refused: {REFUSED}", 100),
        f"web1    root read: {HEALTHY}",
        f"web1    root read: {read[1]}",
    ]
    assert max(len(line) for line in table) <= 100
    markdown = fleet.fleet_report_markdown(report)
    assert f"  - standing rules: {REFUSED}" in markdown
    assert f"  - root read: {HEALTHY}" in markdown
    assert fleet.fleet_report_refusals(report) == table[at : at + 4]


def test_a_plan_a_rule_would_approve_is_not_listed_as_refused() -> None:
    """fleet-approve.yml lists only what the rules left to a human: a plan a rule would
    approve (shadow) is not a refusal, and a host whose rules were not read has none."""
    said = rules_report(decision(WEB1, "01" * 32, outcome="would approve", rule="night-restarts"))
    report = fleet.fleet_report(
        {"web1": [plan(WEB1)], "web2": [plan(WEB2)]},
        rules={"web1": said, "web2": {"failed": True, "msg": "approver down"}},
    )
    assert fleet.fleet_report_refusals(report) == []


# -- nothing a host writes becomes markup, escapes or a template ------------------------------

HOSTILE = (
    "<img src=x onerror=alert(1)> [approve all](https://evil.example/) `rm -rf /` "
    "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \u202etxt.exe | fake | cell &lt;"
)


def hostile_report() -> dict[str, Any]:
    """Every text field a host sends, hostile: the goal (the diagnose user's), evidence,
    the rule's name, its refusal reasons, the decision and root's reading (a subverted
    root's), the pause."""
    plans = [plan(WEB1, goal=HOSTILE, evidence=[HOSTILE])]
    said = rules_report(decision(WEB1, "01" * 32))
    summary = said["report"]["rules"][0]
    summary.update(name=HOSTILE, refused={HOSTILE: 1}, ended={HOSTILE: 1})
    said["report"]["recent"][0].update(refused=[HOSTILE], read=[HOSTILE], outcome=HOSTILE)
    said["report"]["pause"] = {"paused": True, "by": HOSTILE, "at": HOSTILE, "reason": HOSTILE}
    report: dict[str, Any] = fleet.fleet_report({"web1": plans}, rules={"web1": said})
    return report


def test_host_text_is_neither_markdown_nor_html_nor_escapes() -> None:
    """A link, an image with a script, a code span, an OSC 8 hyperlink, a right-to-left
    override and table pipes in every text a host sends: the Markdown shows them as text
    (no tag, no link, no cell of the host's own), the terminal shows them escaped."""
    report = hostile_report()
    text = every_text(report)
    assert unprintable(text) == []
    markdown = fleet.fleet_report_markdown(report)
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown
    assert "[approve all](" not in markdown and "\\[approve all\\](" in markdown
    assert "`rm -rf /`" not in markdown
    assert "&amp;lt;" in markdown
    rows = [line for line in markdown.split("\n") if line.startswith("| ") and "fake" in line]
    assert len(rows) == 2  # the fixes' table and the rules' table, a row each
    assert [len(re.findall(r"(?<!\\)\|", row)) for row in rows] == [5, 7]  # their own cells


def test_host_text_is_never_run_as_a_template_by_ansible() -> None:
    """A goal (or any text) holding Jinja is carried as text through the playbooks' own
    templates (set_fact, to_json, the filters): Ansible 2.19 runs only what the playbook
    wrote. The same text, trusted as the playbook's own, would run: the test could see it."""
    goal = "{{ 'templated' | upper }}{% if true %} RAN{% endif %}"
    report = fleet.fleet_report({"web1": [plan(WEB1, goal=goal)]})
    templar = Templar(loader=DataLoader(), variables={"opsbot_report": report})
    as_json = templar.template(trust_as_template("{{ opsbot_report | to_json }}"))
    assert goal in as_json and "TEMPLATED" not in as_json
    goal_only = templar.template(trust_as_template("{{ opsbot_report.hosts.web1[0].goal }}"))
    assert goal_only == goal
    trusted = Templar(loader=DataLoader(), variables={"goal": trust_as_template(goal)})
    assert trusted.template(trust_as_template("{{ goal }}")) == "TEMPLATED RAN"


# -- the approval takes only an id and a whole sha256 ----------------------------------------


@pytest.mark.parametrize(
    "plan_id", [f"{PLAN_ID}\n", "--now", f"{PLAN_ID} --now", "../../etc/passwd", PLAN_ID.upper()]
)
def test_approve_refuses_what_is_not_a_plan_id(tmp_path: Path, plan_id: str) -> None:
    """A report's plan id is a host's word: one that is not an id as opsbot makes them
    (a trailing line break, an option, a path) is refused before the host's opsbot is run
    at all."""
    plan = detail()
    host = Host(tmp_path, [plan])
    result = host.run("opsbot_approve", plan_id=plan_id, sha256=plan["summary"]["sha256"])
    assert result["failed"] is True
    assert result["msg"] == f"plan_id {plan_id!r} is not a plan id"
    assert host.calls() == []


def test_a_refused_report_is_still_a_report_fleet_approve_reads() -> None:
    """A report with a host NOT REVIEWED keeps the format fleet-approve.yml checks and has
    no entry for that host in ``hosts`` (the only key the approval takes plans from)."""
    report = fleet.fleet_report({"web1": "x", "web2": [plan(WEB2)]})
    assert report["format"] == "opsbot-fleet-report/1"
    assert "web1" not in report["hosts"] and "web1" in report["unread"]
    assert [g["hosts"] for g in report["groups"]] == [
        [{"host": "web2", "plan_id": WEB2, "sha256": "02" * 32}]
    ]


# -- end to end: a host whose every module answer is the attacker's ---------------------------

#: web1's Python, subverted: whatever module Ansible sends, it answers from ANSWERS (by
#: module name), never running it.
FAKE_PYTHON = """\
import json, re, sys
ANSWERS = {answers!r}
module = re.search(r"AnsiballZ_(\\w+)\\.py", " ".join(sys.argv)).group(1)
print(json.dumps(ANSWERS[module]))
"""


@pytest.mark.skipif(not PLAYBOOK.exists(), reason="no ansible-playbook")
def test_a_subverted_host_reaches_no_other_host(tmp_path: Path) -> None:
    """web1's Python answers every module itself: web2's plan id (other bytes) as its own
    plan, a policy report saying a rule approved it, and in every answer facts (another
    opsbot_reviewed_plans, opsbot_cli) and an add_host putting web2 in the rollout with
    another plan. The review keeps web1's word under web1; the approval asks web2 for
    exactly web2's reviewed plan, with its whole sha256, and nothing else: what one host
    says reaches no other. db1's rules refused its plan: the rollout says so, with what
    root read, before approving it."""
    fleet = Fleet(tmp_path)
    web2 = json.loads(fleet.hosts["web2"].state.read_text())["plans"][0]["summary"]
    evil = {"plan_id": "20261201-235959-deadbeef", "sha256": "e" * 64}
    inject = {
        "ansible_facts": {"opsbot_reviewed_plans": [evil], "opsbot_cli": "/bin/false"},
        "add_host": {
            "host_name": "web2",
            "groups": ["opsbot_reviewed"],
            "host_vars": {"opsbot_reviewed_plans": [evil]},
        },
    }
    mimic = dict(plan(IDS["web2"]), sha256="ab" * 32, state="VERIFIED")
    answers = {
        "opsbot_plans": {"changed": False, "plans": [mimic], **inject},
        "opsbot_policy_report": {
            **rules_report(
                decision(IDS["web2"], "ab" * 32, outcome="approved", rule="night-restarts")
            ),
            **inject,
        },
        "opsbot_approve": {"changed": True, "msg": "approved, says web1", **inject},
    }
    db1 = json.loads(fleet.hosts["db1"].state.read_text())
    db1_sha = db1["plans"][0]["summary"]["sha256"]
    refusal = decision(IDS["db1"], db1_sha, refused=[REFUSED], read=[HEALTHY])
    db1["policy_report"] = rules_report(refusal)["report"]
    fleet.hosts["db1"].state.write_text(json.dumps(db1))
    python = tmp_path / "web1-python"
    python.write_text(f"#!{sys.executable}\n" + FAKE_PYTHON.format(answers=answers))
    python.chmod(0o755)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        inventory.read_text().replace(
            f"web1 ansible_connection=local ansible_python_interpreter={sys.executable}",
            f"web1 ansible_connection=local ansible_python_interpreter={python}",
        )
    )
    report = fleet.review()
    assert report["hosts"]["web1"][0]["plan_id"] == IDS["web2"]
    assert report["hosts"]["web2"][0]["sha256"] == web2["sha256"]
    assert report["rules"]["web1"]["plans"][IDS["web2"]]["outcome"] == "approved"
    assert "web2" not in report["rules"] or report["rules"]["web2"].get("error")
    done = fleet.approve("-e", "canary=web1")
    assert "rollout: web1, web2, db1 (canary web1)" in done.stdout, done.stdout
    said = done.stdout.split("left to you by the standing rules")[1]
    assert f"db1  {IDS['db1']}: for humans, the rules refused it" in said
    assert f"db1    root read: {HEALTHY}" in said
    assert "web2  " not in said.split("TASK [")[0]
    assert fleet.hosts["web2"].calls() == [
        ["plans", "--json", "--state", "PROPOSED"],
        ["show", IDS["web2"], "--json"],
        ["policy", "report", "--json"],
        ["show", IDS["web2"], "--json"],
        ["show", IDS["web2"], "--json"],
        ["approve", IDS["web2"], "--sha256", web2["sha256"], "--json"],
        ["plans", "--json"],
        ["show", IDS["web2"], "--json"],
    ]
    assert evil["plan_id"] not in json.dumps([h.calls() for h in fleet.hosts.values()])


def test_a_url_in_host_text_makes_no_link_in_the_markdown() -> None:
    """GitHub's Markdown links a bare URL or a www. name by itself: a goal naming one
    shows it defanged, as incident reports show a URL not to be followed."""
    goal = "restart app, see https://evil.example/login or WWW.evil.example"
    markdown = fleet.fleet_report_markdown(fleet.fleet_report({"web1": [plan(WEB1, goal=goal)]}))
    assert "https://" not in markdown and "WWW.evil" not in markdown
    assert "https\\[:\\]//evil.example/login" in markdown
    assert "WWW\\[.\\]evil.example" in markdown
