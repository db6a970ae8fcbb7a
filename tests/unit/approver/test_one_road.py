"""One road to an approval (plans.road): root's ``opsbot approve``, a click relayed to
root's approver and a standing rule each establish who decided and what was reviewed,
then take the same road. A check added to the road (here a change freeze) refuses at all
three doors, before any of them commits anything: no approval file, the plan still
PROPOSED, the link not spent, the rule's record saying why."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from approver_svc import tokens
from opsbot_cli.main import main
from opsbot_cli.say import unfold
from plans import PlanRefused, PlanStore, Request, Reviewed, approval_path, road
from shared_schema import ExecutorPolicy, OpsbotConfig, PlanState
from shared_schema.approver_socket import ApplyRules, Decided, Refused, RulesApplied
from shared_schema.config import ApproverSettings
from tests.unit.approver.bench import Bench, bench
from tests.unit.console.scripted_journal import ScriptedJournal, install
from tests.unit.plans.helpers import NOW, POLICY, plan_of, step, submitted

pytestmark = pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="root's approvals: the test must run as root"
)

FREEZE = "a change freeze holds until Monday: nothing is approved"


def freeze(request: Request, reviewed: Reviewed, policy: ExecutorPolicy) -> None:
    """A check one might add to the road: nothing is approved, by anyone."""
    raise PlanRefused(FREEZE, hint="ask the release manager")


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(road, "CHECKS", (*road.CHECKS, freeze))


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


def config() -> OpsbotConfig:
    """alice may click; a rule restarts nginx.service when diagnosis found it failed."""
    return OpsbotConfig.model_validate(
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
                        "max_per_unit": 3,
                        "period": "24h",
                    }
                ]
            },
        }
    )


@pytest.fixture
def desk(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir, config=config()) as running:
        yield running


def a_failed_nginx_restart(b: Bench, at_minutes: int = 0) -> str:
    """Diagnosis found nginx.service failed and proposes its restart (a rule may take it)."""
    plan = plan_of(step("restart_unit", "nginx.service", expect={"active_state": ["failed"]}))
    record = submitted(b.store, plan, NOW + timedelta(minutes=at_minutes))
    return b.submit(record).plan_id


def an_app_restart(b: Bench) -> str:
    """A restart no rule reaches: only a person approves it."""
    return b.submit(submitted(b.store, plan_of(step("restart_unit", "app.service")))).plan_id


def still_waits(b: Bench, plan_id: str) -> None:
    assert not approval_path(b.approvals_dir, plan_id).exists()
    assert b.store.status(plan_id).state is PlanState.PROPOSED


def test_a_check_on_the_road_refuses_a_rule_s_approval(desk: Bench, frozen: None) -> None:
    """The rule would approve nginx's restart; the freeze on the road refuses it: the
    rule's record says so (outcome failed, the freeze's words), nothing is written."""
    plan_id = a_failed_nginx_restart(desk)
    reply = desk.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied), reply
    [decided] = reply.decided
    assert decided.outcome == "failed"
    assert FREEZE in decided.refused[0]
    still_waits(desk, plan_id)
    assert desk.applies_started == []


def test_a_check_on_the_road_refuses_a_click_and_leaves_its_link_unspent(
    desk: Bench, frozen: None
) -> None:
    """alice clicks approve with her right code: refused with the freeze's words; the
    link is not used up (it decided nothing), nothing is written."""
    plan_id = an_app_restart(desk)
    link = desk.links(plan_id)[("alice", "approve")]
    reply = desk.decide(link.token, desk.code())
    assert isinstance(reply, Refused), reply
    assert reply.kind == "plan" and reply.reason.startswith(FREEZE), reply
    still_waits(desk, plan_id)
    state = desk.service.state.load()
    assert state.tokens[tokens.digest(link.token)].used_at is None


def test_a_check_on_the_road_refuses_root_at_the_terminal(
    tmp_path: Path,
    store: PlanStore,
    approvals_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    frozen: None,
) -> None:
    """`sudo opsbot approve ID --sha256 ...`: exit 5, the freeze's words and its hint."""
    conf = tmp_path / "opsbot.toml"
    conf.write_text('[executor.allow]\nrestart_unit = ["app.service"]\n')
    for name, value in {
        "OPSBOT_STATE_DIR": str(store.root),
        "OPSBOT_APPROVALS_DIR": str(approvals_dir),
        "OPSBOT_CONFIG": str(conf),
        "OPSBOT_NO_JOURNAL": "1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    journal: ScriptedJournal = install(monkeypatch)
    record = submitted(store, plan_of(step("restart_unit", "app.service")))
    journal.accepted(record)
    assert main(["approve", record.plan_id, "--sha256", record.sha256[:16]]) == 5
    said = " ".join(unfold(capsys.readouterr().err))
    assert FREEZE in said and "ask the release manager" in said
    assert not approval_path(approvals_dir, record.plan_id).exists()
    assert store.status(record.plan_id).state is PlanState.PROPOSED


def test_without_the_check_each_door_approves(desk: Bench) -> None:
    """The same plans, the road as it is: the rule approves nginx's restart and alice's
    click approves the other, so the refusals above are the freeze's alone."""
    ruled = a_failed_nginx_restart(desk)
    reply = desk.as_root(ApplyRules())
    assert isinstance(reply, RulesApplied) and reply.decided[0].outcome == "approved", reply
    assert desk.store.status(ruled).state is PlanState.APPROVED
    clicked = an_app_restart(desk)
    link = desk.links(clicked)[("alice", "approve")]
    assert isinstance(desk.decide(link.token, desk.code()), Decided)
    assert desk.store.status(clicked).state is PlanState.APPROVED
