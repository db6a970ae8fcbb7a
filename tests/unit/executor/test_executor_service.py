"""What the executor answers, by who asks: diagnosis may submit (and gets REVISE with
errors it can act on), operators may look, nobody else may do anything."""

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from executor_svc.peer import ALLOWED_OPS, Peer, Role
from executor_svc.service import ExecutorService
from plans import PlanStore, StatusRecord
from shared_schema import (
    Accept,
    ListPlans,
    PlanDetail,
    PlanList,
    PlanState,
    Reject,
    Revise,
    ShowPlan,
    SubmitPlan,
)
from tests.unit.plans.helpers import NOW, POLICY, edit_record, plan_of, restart_argv, step

DIAGNOSE = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
OPERATOR = Peer(pid=5151, uid=1000, gid=1000, user="alice", role=Role.OPERATOR)
ROOT = Peer(pid=1, uid=0, gid=0, user="root", role=Role.ROOT)
STRANGER = Peer(pid=6666, uid=1001, gid=1001, user="mallory", role=Role.NOBODY)


@pytest.fixture
def service(store: PlanStore, tmp_path: Path) -> ExecutorService:
    return ExecutorService(store, POLICY, lambda: NOW, tmp_path / "approvals")


def submit(plan: dict[str, Any] | None = None) -> SubmitPlan:
    return SubmitPlan(
        plan=plan if plan is not None else plan_of().model_dump(mode="json"),
        run_id="run-7",
        symptom="nginx.service exited with status 1",
    )


def test_diagnosis_submits_a_valid_plan_and_it_is_stored(
    service: ExecutorService, store: PlanStore
) -> None:
    """ACCEPT carries the plan id and fingerprint, and the plan is on disk by then, with
    who submitted it (from the kernel) and the run it came from."""
    reply = service.handle(submit(), DIAGNOSE)
    assert isinstance(reply, Accept)
    assert reply.sha256 == plan_of().fingerprint()
    assert not reply.duplicate
    record = store.load(reply.plan_id)
    assert store.verified_plan(record) == plan_of()
    assert (record.submitted_by.uid, record.submitted_by.user, record.submitted_by.pid) == (
        998,
        "opsbot-diagnose",
        4242,
    )
    assert record.submitted_by.run_id == "run-7"
    assert record.submitted_by.symptom == "nginx.service exited with status 1"


def test_the_same_plan_submitted_twice_is_accepted_as_a_duplicate(service: ExecutorService) -> None:
    """A retried submit gets the first plan's id back, marked duplicate."""
    first = service.handle(submit(), DIAGNOSE)
    again = service.handle(submit(), DIAGNOSE)
    assert isinstance(first, Accept) and isinstance(again, Accept)
    assert (again.plan_id, again.duplicate) == (first.plan_id, True)


def test_an_invalid_plan_gets_revise_with_field_errors(
    service: ExecutorService, store: PlanStore
) -> None:
    """A plan the schema refuses comes back as REVISE listing each problem at its path;
    nothing is stored."""
    reply = service.handle(
        submit({"goal": "", "steps": [{"tool": "restart_unit", "args": {"unit": "-x.service"}}]}),
        DIAGNOSE,
    )
    assert isinstance(reply, Revise)
    assert [(e.path, e.message) for e in reply.errors] == [
        ("goal", "must not be empty or only whitespace"),
        ("steps.0.args.unit", "unit name must not start with '-'"),
    ]
    assert store.ids() == []


def test_a_unit_outside_the_allowlist_gets_revise_naming_the_allowed_units(
    service: ExecutorService, store: PlanStore
) -> None:
    """A plan to restart a unit the policy does not list comes back as REVISE at that
    step's unit, naming the units that tool may touch, so the model can choose again."""
    plan = plan_of(step("restart_unit", "nginx.service"), step("restart_unit", "redis.service"))
    reply = service.handle(submit(plan.model_dump(mode="json")), DIAGNOSE)
    assert isinstance(reply, Revise)
    assert [(e.path, e.message) for e in reply.errors] == [
        (
            "steps.1.args.unit",
            "restart_unit may not touch redis.service; allowed: nginx.service, app.service, "
            "worker@1.service",
        )
    ]
    assert store.ids() == []


def test_a_unit_added_to_the_allowlist_is_taken_at_the_next_submit_without_a_restart(
    store: PlanStore, tmp_path: Path
) -> None:
    """The operator adds redis.service to the allowlist and saves the file: the running
    executor's next answer to the same plan is ACCEPT (the policy is asked for before
    each request, not kept from the start)."""
    policies = [POLICY]
    service = ExecutorService(
        store, POLICY, lambda: NOW, tmp_path / "approvals", policies=lambda: policies[-1]
    )
    plan = plan_of(step("restart_unit", "nginx.service"), step("restart_unit", "redis.service"))
    assert isinstance(service.handle(submit(plan.model_dump(mode="json")), DIAGNOSE), Revise)
    allow = {tool: [*units, "redis.service"] for tool, units in POLICY.allow.items()}
    policies.append(POLICY.model_copy(update={"allow": allow}))
    assert isinstance(service.handle(submit(plan.model_dump(mode="json")), DIAGNOSE), Accept)


def test_a_denylisted_unit_gets_revise_saying_opsbot_never_touches_it(
    service: ExecutorService,
) -> None:
    """Stopping sshd is refused whatever the allowlist says, and the model is told why."""
    reply = service.handle(
        submit(plan_of(step("stop_unit", "sshd.service")).model_dump(mode="json")), DIAGNOSE
    )
    assert isinstance(reply, Revise)
    assert reply.errors[0].message == (
        "sshd.service is on the built-in denylist (ssh*); opsbot never touches it"
    )


@pytest.mark.parametrize("request_", [ListPlans(), ShowPlan(plan_id="20261129-213500-1a2b3c4d")])
def test_diagnosis_may_not_list_or_show_plans(
    service: ExecutorService, request_: ListPlans | ShowPlan
) -> None:
    """The diagnose user submits and nothing else: list and show are refused by name."""
    reply = service.handle(request_, DIAGNOSE)
    assert reply == Reject(reason=f"opsbot-diagnose (diagnose) may not {request_.op}")


def test_an_operator_may_not_submit(service: ExecutorService, store: PlanStore) -> None:
    """Operators review and approve plans; they do not inject them through the socket."""
    assert service.handle(submit(), OPERATOR) == Reject(reason="alice (operator) may not submit")
    assert store.ids() == []


@pytest.mark.parametrize(
    "request_", [submit(), ListPlans(), ShowPlan(plan_id="20261129-213500-1a2b3c4d")]
)
def test_nobody_else_may_do_anything(
    service: ExecutorService, request_: SubmitPlan | ListPlans | ShowPlan
) -> None:
    """A user who is neither root, the diagnose user nor an operator is refused every
    request."""
    reply = service.handle(request_, STRANGER)
    assert reply == Reject(reason=f"mallory (nobody) may not {request_.op}")
    assert ALLOWED_OPS[Role.NOBODY] == frozenset()


def test_an_operator_lists_plans_with_state_and_units(
    service: ExecutorService, store: PlanStore
) -> None:
    """``opsbot plans``: every plan with its state, goal, units and the latest reason."""
    first = service.handle(submit(), DIAGNOSE)
    second = service.handle(
        submit(
            plan_of(step("reset_failed_unit", "app.service"), goal="clear app").model_dump(
                mode="json"
            )
        ),
        DIAGNOSE,
    )
    assert isinstance(first, Accept) and isinstance(second, Accept)
    store.save_status(StatusRecord(plan_id=second.plan_id, state=PlanState.REJECTED))
    reply = service.handle(ListPlans(), OPERATOR)
    assert isinstance(reply, PlanList)
    summaries = {p.plan_id: p for p in reply.plans}
    assert (summaries[first.plan_id].state, summaries[first.plan_id].units) == (
        PlanState.PROPOSED,
        ["nginx.service"],
    )
    assert (summaries[second.plan_id].state, summaries[second.plan_id].goal) == (
        PlanState.REJECTED,
        "clear app",
    )


def test_an_operator_sees_a_plan_as_the_argv_each_step_will_run(service: ExecutorService) -> None:
    """``opsbot show``: the plan, each step's argv and its history."""
    accepted = service.handle(submit(), DIAGNOSE)
    assert isinstance(accepted, Accept)
    reply = service.handle(ShowPlan(plan_id=accepted.plan_id), OPERATOR)
    assert isinstance(reply, PlanDetail)
    assert reply.plan == plan_of()
    assert reply.argv == [restart_argv("nginx.service")]
    assert reply.summary.submitted_by == "opsbot-diagnose"
    assert [h["state"] for h in reply.history] == ["PROPOSED"]


def test_showing_an_unknown_plan_is_rejected_with_a_reason(service: ExecutorService) -> None:
    """A well-formed id with no plan is a REJECT saying so."""
    assert service.handle(ShowPlan(plan_id="20261129-213500-1a2b3c4d"), ROOT) == Reject(
        reason="no plan 20261129-213500-1a2b3c4d"
    )


def test_a_tampered_plan_is_never_shown_as_if_it_were_fine(
    service: ExecutorService, store: PlanStore
) -> None:
    """A stored plan whose bytes no longer match its fingerprint is not shown (the
    operator might approve what they see); the listing marks it unreadable."""
    accepted = service.handle(submit(), DIAGNOSE)
    assert isinstance(accepted, Accept)
    record = store.load(accepted.plan_id)
    edit_record(store, accepted.plan_id, plan=record.plan.replace("nginx", "sshd"))
    assert service.handle(ShowPlan(plan_id=accepted.plan_id), ROOT) == Reject(
        reason=f"plan {accepted.plan_id} was modified after it was stored; not shown"
    )
    listing = service.handle(ListPlans(), ROOT)
    assert isinstance(listing, PlanList)
    assert [(p.goal, p.units) for p in listing.plans] == [("(unreadable plan)", [])]


def test_root_may_do_everything(service: ExecutorService) -> None:
    """Root submits, lists and shows."""
    accepted = service.handle(submit(), ROOT)
    assert isinstance(accepted, Accept)
    assert isinstance(service.handle(ListPlans(), ROOT), PlanList)
    assert isinstance(service.handle(ShowPlan(plan_id=accepted.plan_id), ROOT), PlanDetail)


def test_submitting_a_plan_logs_plan_accepted_with_its_id_and_fingerprint(tmp_path: Path) -> None:
    """When a plan is accepted, the event ``plan.accepted`` carries the plan id and
    sha256 the reply gave, and the steps as argv."""
    store = PlanStore(tmp_path)
    store.ensure()
    service = ExecutorService(store, POLICY, lambda: NOW, tmp_path / "approvals")
    diagnose = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
    with capture_logs() as events:
        reply = service.submit(SubmitPlan(plan=plan_of().model_dump(mode="json")), diagnose)
    assert isinstance(reply, Accept)
    [accepted] = [e for e in events if e["event"] == "plan.accepted"]
    assert accepted["plan_id"] == reply.plan_id
    assert accepted["sha256"] == reply.sha256 == plan_of().fingerprint()
    assert accepted["duplicate"] is False
    assert accepted["log_level"] == "info"
    assert accepted["steps"] == "systemctl restart --no-ask-password -- nginx.service"
