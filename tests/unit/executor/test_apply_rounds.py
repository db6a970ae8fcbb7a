"""opsbot-apply.service is started by opsbot-apply.path when an approval is written; an
approval written while a run goes on starts no second run (systemd merges the start into
the running one). The run looks again before it ends, so that plan is applied now, not by
the timer a minute later (or never, where the timer is off)."""

from __future__ import annotations

from pathlib import Path

import pytest

import executor_svc.apply_service as apply_service
from plans import Outcome, PlanStore
from shared_io.paths import Paths
from tests.unit.plans.helpers import NOW, approved, plan_of, step, submitted


def test_an_approval_written_during_a_run_is_applied_by_that_run(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root approves a second plan while the run applies the first: the run goes over the
    store again and applies it; with nothing new after that, it ends."""
    config = tmp_path / "opsbot.toml"
    config.write_text('[executor.allow]\nreset_failed_unit = ["app.service"]\n')
    config.chmod(0o644)
    paths = Paths(config, store.root, approvals_dir, tmp_path / "x.sock", tmp_path / "d.sock")
    first = submitted(store, plan_of(step("reset_failed_unit", "app.service")), NOW)
    second = submitted(
        store, plan_of(step("reset_failed_unit", "app.service"), goal="the second"), NOW
    )
    approved(store, approvals_dir, first)
    rounds: list[str] = []

    class Applier:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def apply_all(self) -> list[Outcome]:
            rounds.append("run")
            if len(rounds) == 1:
                approved(store, approvals_dir, second)  # root, meanwhile
            return []

    monkeypatch.setattr(apply_service, "Applier", Applier)
    apply_service.apply_plans(paths, actor="opsbot-executor")
    assert rounds == ["run", "run"]
