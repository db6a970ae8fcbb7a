"""An edit of /etc/opsbot/opsbot.toml takes effect as README says, on a real systemd:
the operator adds a unit to the allowlist, runs README's reload lines, and the next
diagnosis and the next plan use it; a broken edit leaves the file read before in force,
the journal and check-config name the error, and the daemons go on answering."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, opsbot, restart_plan, submit
from testbed.readme import block, commands

CONFIG = "/etc/opsbot/opsbot.toml"
#: Installed by the bench, running, and in no allowlist of TEST_CONFIG.
NEW = "demo-other.service"
WIDER = TEST_CONFIG.replace(
    'restart_unit = ["demo-web.service", "demo-db.service"]',
    f'restart_unit = ["demo-web.service", "demo-db.service", "{NEW}"]',
)
DAEMONS = ("opsbot-executor.service", "opsbot-diagnose.service", "opsbot-web.service")
#: A link the page relays to the approver (which knows no such token): it starts the page.
LINK = "http://127.0.0.1:8750/p/" + "A" * 22


def reload_as_readme_says(ct: BootedSystemd) -> list[subprocess.CompletedProcess[str]]:
    """README's reload-commands block, line by line, as root."""
    return [ct.run(argv, check=False) for argv in commands(block("reload-commands"))]


def running(ct: BootedSystemd) -> str:
    """The daemons and the approval page running (each is socket-activated; the daemons
    exit when idle): the page's main pid."""
    opsbot(ct, "plans")
    opsbot(ct, "diagnose", "demo-web", user="olivia")
    ct.run(["curl", "-s", "-o", "/dev/null", "--max-time", "10", LINK], check=False)
    for unit in DAEMONS:
        state = ct.systemctl("show", "-P", "ActiveState", unit).stdout.strip()
        assert state == "active", f"{unit} is {state}"
    return page_pid(ct)


def page_pid(ct: BootedSystemd) -> str:
    return ct.systemctl("show", "-P", "MainPID", "opsbot-web.service").stdout.strip()


@pytest.fixture
def restored(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The tests' config again afterwards, taken as README says."""
    try:
        yield opsbot
    finally:
        opsbot.write_file(CONFIG, TEST_CONFIG)
        reload_as_readme_says(opsbot)


def test_a_unit_added_to_the_allowlist_is_diagnosed_and_planned_after_the_reload(
    restored: BootedSystemd,
) -> None:
    """With both daemons and the approval page running on the old file, demo-other is out
    of the diagnosis's scope and a plan for it is sent back; after the edit and README's
    reload lines, check-config says every running daemon, the page too (reloaded, not
    restarted), has this file, and the next diagnosis and the next plan for demo-other go
    through."""
    ct = restored
    page = running(ct)
    before = opsbot(ct, "diagnose", NEW, user="olivia", check=False)
    assert before.returncode == 5, before.stderr
    assert submit(ct, restart_plan(NEW))["verdict"] == "REVISE"
    ct.write_file(CONFIG, WIDER)
    reloaded = reload_as_readme_says(ct)
    assert all(done.returncode == 0 for done in reloaded), reloaded
    checked = json.loads(opsbot(ct, "check-config", "--json").stdout)
    seen = {daemon["unit"]: daemon["status"] for daemon in checked["running"]}
    assert seen["opsbot-executor.service"] == "current", checked["running"]
    assert seen["opsbot-diagnose.service"] == "current", checked["running"]
    assert seen["opsbot-web.service"] == "current", checked["running"]
    assert page_pid(ct) == page, "the page was restarted, not reloaded"
    assert "running daemons:" in reloaded[-1].stdout, reloaded[-1].stdout
    after = opsbot(ct, "diagnose", NEW, user="olivia", check=False)
    assert after.returncode in (0, 3, 4), after.stderr  # a verdict, not a refusal
    assert f"diagnosing {NEW}" in after.stdout
    reply = submit(ct, restart_plan(NEW, goal="the allowlist was widened"))
    assert reply["verdict"] == "ACCEPT", reply
    opsbot(ct, "reject", str(reply["plan_id"]), "--reason", "test over")


def test_a_broken_edit_keeps_the_file_read_before_and_says_why(restored: BootedSystemd) -> None:
    """A key typo saved while the daemons run: after README's reload lines the executor
    still accepts a plan the old file allows, its journal names the key, and check-config
    fails naming the file, line and key; the page goes on serving the file read before,
    and says so in its status and journal; the fixed file is taken again."""
    ct = restored
    page = running(ct)
    since = ct.run(["date", "+%Y-%m-%d %H:%M:%S"]).stdout.strip()
    ct.write_file(CONFIG, TEST_CONFIG.replace("settle_seconds = 3", "setle_seconds = 3"))
    reloaded = reload_as_readme_says(ct)
    assert reloaded[0].returncode == 0, reloaded[0]
    checked = reloaded[-1]
    assert checked.returncode == 78 and "setle_seconds" in checked.stderr, checked.stderr
    reply = submit(ct, restart_plan("demo-web.service", goal="the old file is still in force"))
    assert reply["verdict"] == "ACCEPT", reply
    journal = ct.journal("-u", "opsbot-executor.service", "--since", since, "-o", "cat")
    assert "config.reload_failed" in journal and "setle_seconds" in journal, journal[-2000:]
    assert page_pid(ct) == page, "the page stopped on a broken file"
    web = ct.journal("-u", "opsbot-web.service", "--since", since, "-o", "cat")
    assert "config.reload_failed" in web and "setle_seconds" in web, web[-2000:]
    status = ct.systemctl("show", "-P", "StatusText", "opsbot-web.service").stdout
    assert "(a newer file did not load)" in status, status
    opsbot(ct, "reject", str(reply["plan_id"]), "--reason", "test over")
    ct.write_file(CONFIG, TEST_CONFIG)
    assert reload_as_readme_says(ct)[-1].returncode in (0, 1)
