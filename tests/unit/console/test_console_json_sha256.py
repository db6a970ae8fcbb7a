"""A script finds a plan's sha256 in the same place whichever verb it asks: ``opsbot plans
--json`` gives each plan its ``plan_id`` and ``sha256`` at the plan's top level, and
``opsbot show ID --json`` has them at its top level too (beside the executor's answer,
whole, which keeps them in ``summary``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli.main import main
from shared_schema import Plan
from testbed.canned_executor import PLAN_ID, canned_executor, detail_of, listing_of, summary_of

PLAN = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)


def json_of(
    argv: list[str], reply: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> Any:
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, reply):
        assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_show_and_plans_put_the_sha256_in_the_same_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same plan through both verbs: ``.sha256`` and ``.plan_id`` of show's answer are
    ``.[0].sha256`` and ``.[0].plan_id`` of the listing, and what the executor sent."""
    listed = json_of(
        ["plans", "--json"], listing_of(summary_of(PLAN)), tmp_path, monkeypatch, capsys
    )
    shown = json_of(["show", PLAN_ID, "--json"], detail_of(PLAN), tmp_path, monkeypatch, capsys)
    [plan] = listed
    assert (shown["plan_id"], shown["sha256"]) == (plan["plan_id"], plan["sha256"])
    assert (shown["plan_id"], shown["sha256"]) == (PLAN_ID, PLAN.fingerprint())
    assert shown["summary"]["sha256"] == shown["sha256"]  # what scripts read until now
