"""``opsbot mcp``'s list_plans lists as its description says, newest first: the executor
answers oldest first (as ``opsbot plans`` prints), and an agent that reads the first lines
must find the plan just proposed there, not the oldest one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from opsbot_cli.mcp_server import tools
from shared_io.paths import Paths
from shared_schema import Plan, PlanState
from testbed.canned_executor import canned_executor, listing_of, summary_of

NOW = datetime.now(UTC).replace(microsecond=0)
PLAN = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)
OLDEST, MIDDLE, NEWEST = (
    "20261201-100000-00000001",
    "20261201-110000-00000002",
    "20261201-120000-00000003",
)


def test_list_plans_lists_the_newest_plan_first(tmp_path: Path) -> None:
    """Three plans, proposed three days, five hours and one hour ago, as the executor
    lists them (oldest first): the tool's text says "newest first" and lists the plan of
    an hour ago first, the one of three days ago last."""
    listing = listing_of(
        summary_of(PLAN, PlanState.PROPOSED, OLDEST, NOW - timedelta(days=3)),
        summary_of(PLAN, PlanState.FAILED, MIDDLE, NOW - timedelta(hours=5)),
        summary_of(PLAN, PlanState.APPROVED, NEWEST, NOW - timedelta(hours=1)),
    )
    sock = tmp_path / "executor.sock"
    paths = Paths.from_env({"OPSBOT_SOCKET": str(sock)})
    with canned_executor(sock, listing):
        text = tools.list_plans(paths, [], 20)
    lines = text.splitlines()
    assert lines[0] == "3 plans (newest first):", text
    listed = [line.split()[0] for line in lines[1:] if line.startswith("  2026")]
    assert listed == [NEWEST, MIDDLE, OLDEST], text
