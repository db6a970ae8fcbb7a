"""``opsbot mcp --check`` says whether plan_story may read the journal, and how to grant
it: plan_story reads the journal as ``opsbot audit`` does (root, or group
systemd-journal), a group no install step gives an operator. The other three tools work
without it, so it is said, never an error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.mcp_server import journal_story
from shared_schema import Plan, PlanState
from testbed.canned_executor import canned_executor, listing_of, summary_of
from testbed.skips import skip_unless

PLAN = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)


def test_an_operator_outside_the_journal_group_is_told_the_command_that_grants_it() -> None:
    """olivia, in opsbot-operators only: plan_story cannot read her story, and the line
    names the group and the exact usermod for her; in systemd-journal too, or as root,
    it can."""
    ok, line = journal_story(1001, ["olivia", "opsbot-operators"], "olivia")
    assert not ok
    assert "plan_story needs group systemd-journal" in line
    assert "`sudo usermod -aG systemd-journal olivia`" in line
    assert journal_story(1001, ["opsbot-operators", "systemd-journal"], "olivia")[0]
    assert journal_story(0, ["root"], "root")[0]


def test_check_says_whether_plan_story_reads_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root (these tests' user), --check's last line says plan_story reads the journal,
    and --json carries it as ``plan_story``."""
    pytest.importorskip("mcp", reason="the MCP SDK (opsbot[mcp]) is not installed")
    skip_unless(os.geteuid() == 0, "root's line; run the tests as root")
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, listing_of(summary_of(PLAN, PlanState.PROPOSED))):
        assert main(["mcp", "--check"]) == 0
        said = capsys.readouterr().out.splitlines()
        assert main(["mcp", "--check", "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
    assert said[-1] == "plan_story reads the journal as root", said
    assert found["plan_story"] is True, found
