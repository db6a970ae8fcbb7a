"""A flood of plans against the standing rules' batch (approver_svc/rules.py): each run
asks about MAX_PER_RUN plans, and the plans some rule may approve are asked about first,
so that plans no rule reaches (their tools or units are none of a rule's) never keep a
fault a rule would fix waiting behind them; they get their records in turns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from approver_svc.rules import MAX_PER_RUN
from plans import PlanStore
from shared_schema import OpsbotConfig, PlanState
from shared_schema.approver_socket import ApplyRules, RuleDecision, RulesApplied
from shared_schema.config import ApproverSettings
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import POLICY, plan_of, step, submitted

pytestmark = pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="root's requests: the test must run as root"
)

#: The precondition diagnosis writes for a unit it found failed (a rule needs one).
DOWN = {"active_state": ["failed"]}


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def enforcing(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    """Root's approver with one enforce rule: restarts of nginx, at most one a day."""
    config = OpsbotConfig.model_validate(
        {
            "executor": POLICY.model_dump(mode="json"),
            "approvers": {"alice": ApproverSettings().model_dump()},
            "approve": {
                "rule": [
                    {
                        "name": "nginx-restarts",
                        "mode": "enforce",
                        "tools": ["restart_unit"],
                        "units": ["nginx.service"],
                        "max_per_unit": 1,
                        "period": "24h",
                    }
                ]
            },
        }
    )
    with bench(tmp_path, store, approvals_dir, config=config) as running:
        yield running


def rules(b: Bench) -> list[RuleDecision]:
    """What one run of the rules decided (opsbot-rules.service's request)."""
    reply = b.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied), reply
    return reply.decided


def test_a_flood_no_rule_reaches_does_not_keep_a_fault_a_rule_fixes_waiting(
    enforcing: Bench,
) -> None:
    """The diagnose user submits twice a batch of plans no rule reaches (restarts of
    another allowed unit, stops of nginx), then nginx fails and diagnosis submits its
    restart: the very next run of the rules approves it. The flood is recorded for
    humans, MAX_PER_RUN plans a run, oldest first."""
    b = enforcing
    flood = []
    for n in range(MAX_PER_RUN):
        other = plan_of(step("restart_unit", "app.service", expect=DOWN), goal=f"junk {n}")
        stop = plan_of(step("stop_unit", "nginx.service", expect=DOWN), goal=f"junk stop {n}")
        flood += [b.submit(submitted(b.store, plan, b.clock())) for plan in (other, stop)]
        b.clock.advance(1)
    fault = b.submit(
        submitted(b.store, plan_of(step("restart_unit", "nginx.service", expect=DOWN)), b.clock())
    )

    first = rules(b)
    assert [d.plan_id for d in first if d.outcome == "approved"] == [fault.plan_id], first
    assert b.store.status(fault.plan_id).state is PlanState.APPROVED
    assert len(first) == MAX_PER_RUN
    oldest_first = sorted(r.plan_id for r in flood)
    assert [d.plan_id for d in first[1:]] == oldest_first[: MAX_PER_RUN - 1]
    assert {d.outcome for d in first[1:]} == {"for humans"}

    second, third = rules(b), rules(b)
    recorded = [d.plan_id for d in first[1:] + second + third]
    assert recorded == oldest_first, "each plan of the flood once, in turn"
