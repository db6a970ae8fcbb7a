"""An incident, the executor's side: a plan that ran and did not cure its symptom may be
followed by another for the same symptom; the executor checks the plan it follows, sets
the incident itself, and refuses a plan past the cap."""

from pathlib import Path
from typing import Any

import pytest

from executor_svc.apply import Applier
from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from plans import INCIDENT_CAP, PlanStore, members
from shared_schema import Accept, Plan, PlanState, Revise, SubmitPlan
from tests.unit.executor.test_executor_verification import Units, report
from tests.unit.plans.helpers import POLICY, Clock, Systemctl, approved, step, unit_in

DIAGNOSE = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
WEB_503 = {"unit": "web.service", "health": ["web"]}


@pytest.fixture
def service(store: PlanStore, approvals_dir: Path, clock: Clock) -> ExecutorService:
    return ExecutorService(store, POLICY, clock, approvals_dir, read_units=Units(clock))


def proposal(
    unit: str, follows: str | None = None, symptom: Any = WEB_503, *more: str
) -> SubmitPlan:
    plan = Plan.model_validate(
        {
            "goal": f"bring {unit} back",
            "steps": [step("restart_unit", u) for u in (unit, *more)],
            "symptom": symptom,
            "follows": follows,
        }
    )
    return SubmitPlan(plan=plan.model_dump(mode="json", exclude_none=True), run_id="r", symptom="")


def apply_all(store: PlanStore, approvals_dir: Path, clock: Clock) -> None:
    """The apply unit's run: every approved plan's steps, each unit found failed."""
    Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=Systemctl(),
    ).apply_all()


def ran_and_did_not_cure(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock, sent: SubmitPlan
) -> str:
    """``sent`` accepted, approved, applied, and reported UNRESOLVED: its id."""
    accepted = service.handle(sent, DIAGNOSE)
    assert isinstance(accepted, Accept), accepted
    approved(store, approvals_dir, store.load(accepted.plan_id), clock())
    apply_all(store, approvals_dir, clock)
    clock.advance(11)
    service.handle(report(accepted.plan_id, accepted.sha256, "unresolved"), DIAGNOSE)
    assert store.status(accepted.plan_id).state is PlanState.UNRESOLVED
    return accepted.plan_id


def test_a_follow_up_joins_the_incident_of_the_plan_it_follows(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx did not cure web's 503; the follow-up (restart app, same
    symptom, follows the first) is accepted into the first plan's incident, which the
    executor set, not the diagnosis."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    second = service.handle(proposal("app.service", follows=first), DIAGNOSE)
    assert isinstance(second, Accept)
    assert store.load(second.plan_id).incident == first
    assert store.load(first).incident is None  # the first plan's id is the incident's
    assert members(store, first) == [first, second.plan_id]


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("not unresolved", "is PROPOSED, not UNRESOLVED"),
        ("other symptom", "a follow-up carries the same symptom"),
        ("unknown plan", "cannot be followed"),
    ],
)
def test_a_follow_up_of_a_plan_that_cannot_have_one_gets_revise(
    service: ExecutorService,
    store: PlanStore,
    approvals_dir: Path,
    clock: Clock,
    how: str,
    words: str,
) -> None:
    """A subverted diagnosis cannot borrow another incident's story: following a plan
    that did not end UNRESOLVED, carrying another symptom, or naming no plan of the
    executor's is REVISE at ``follows``, and nothing is stored."""
    if how == "not unresolved":
        pending = service.handle(proposal("nginx.service"), DIAGNOSE)
        assert isinstance(pending, Accept)
        sent = proposal("app.service", follows=pending.plan_id)
    elif how == "other symptom":
        first = ran_and_did_not_cure(
            service, store, approvals_dir, clock, proposal("nginx.service")
        )
        sent = proposal("app.service", follows=first, symptom={"unit": "db.service", "health": []})
    else:
        sent = proposal("app.service", follows="20261129-213500-0000beef")
    before = store.ids()
    answer = service.handle(sent, DIAGNOSE)
    assert isinstance(answer, Revise)
    assert answer.errors[0].path == "follows" and words in answer.errors[0].message
    assert store.ids() == before


def test_a_fourth_plan_in_one_incident_is_refused_for_a_human(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Three plans for web's 503 ran and none cured it: a fourth is REVISE naming the
    cap, so the diagnosis ends in a note for a human."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    second = ran_and_did_not_cure(
        service, store, approvals_dir, clock, proposal("app.service", follows=first)
    )
    third = ran_and_did_not_cure(
        service, store, approvals_dir, clock, proposal("worker@1.service", follows=second)
    )
    # (Steps no plan ran yet: not refused as tried before, but as the fourth.)
    fourth = service.handle(proposal("nginx.service", third, WEB_503, "app.service"), DIAGNOSE)
    assert isinstance(fourth, Revise)
    message = fourth.errors[0].message
    assert message.startswith(f"{INCIDENT_CAP}: incident {first} has had 3 plans (limit 3")


# -- "tried before" belongs to its incident --------------------------------------------------


def ran_and_cured(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock, sent: SubmitPlan
) -> str:
    """``sent`` accepted, approved, applied, and reported VERIFIED: its id."""
    accepted = service.handle(sent, DIAGNOSE)
    assert isinstance(accepted, Accept), accepted
    approved(store, approvals_dir, store.load(accepted.plan_id), clock())
    apply_all(store, approvals_dir, clock)
    clock.advance(11)
    symptom = store.verified_plan(store.load(accepted.plan_id)).symptom
    verdict = report(accepted.plan_id, accepted.sha256, "verified").model_copy(
        update={"targets": list(symptom.health) if symptom else []}
    )
    service.handle(verdict, DIAGNOSE)
    assert store.status(accepted.plan_id).state is PlanState.VERIFIED
    return accepted.plan_id


def test_within_an_incident_the_steps_that_did_not_help_are_refused(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx did not cure web's 503: the incident's follow-up may not restart
    nginx again (REVISE: tried before, naming the plan that did)."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    again = service.handle(proposal("nginx.service", follows=first), DIAGNOSE)
    assert isinstance(again, Revise), again
    assert f"tried before: plan {first} ran these very steps" in again.errors[0].message


def test_after_its_incident_ended_verified_a_new_failure_may_have_the_same_fix(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx did not cure web's 503, restarting app (the follow-up) did: the
    incident ended VERIFIED. Minutes later nginx fails for a new reason: a new diagnosis
    may restart it (a new incident), and the plan is accepted."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    ran_and_cured(service, store, approvals_dir, clock, proposal("app.service", follows=first))
    clock.advance(60)
    answer = service.handle(proposal("nginx.service"), DIAGNOSE)
    assert isinstance(answer, Accept), answer


def test_until_its_units_were_seen_healthy_a_new_incident_may_not_repeat_the_steps(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx did not cure web's 503 and nothing since shows it cured: a new
    diagnosis proposing that same restart is refused (tried before), also when a plan
    of another incident, on another unit, ended VERIFIED meanwhile."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    ran_and_cured(
        service,
        store,
        approvals_dir,
        clock,
        proposal("app.service", symptom={"unit": "app.service"}),
    )
    answer = service.handle(proposal("nginx.service"), DIAGNOSE)
    assert isinstance(answer, Revise), answer
    assert f"tried before: plan {first}" in answer.errors[0].message


def test_a_verified_fix_of_the_same_unit_lifts_what_an_earlier_incident_tried(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx and app together did not cure web's 503; later a plan of another
    incident restarted nginx and ended VERIFIED (nginx seen healthy): the first plan's
    steps may be proposed again for a new failure."""
    ran_and_did_not_cure(
        service,
        store,
        approvals_dir,
        clock,
        proposal("nginx.service", None, WEB_503, "app.service"),
    )
    ran_and_cured(
        service,
        store,
        approvals_dir,
        clock,
        proposal("nginx.service", symptom={"unit": "nginx.service"}),
    )
    clock.advance(60)
    answer = service.handle(proposal("nginx.service", None, WEB_503, "app.service"), DIAGNOSE)
    assert isinstance(answer, Accept), answer


def test_within_its_incident_a_fix_is_refused_even_after_another_incident_cured_its_unit(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Restarting nginx did not cure web's 503 (incident A). Meanwhile another incident's
    plan restarting nginx and app ended VERIFIED (nginx seen healthy). The follow-up of A
    may still not restart nginx again: within its own incident those steps did not help."""
    first = ran_and_did_not_cure(service, store, approvals_dir, clock, proposal("nginx.service"))
    other = {"unit": "api.service", "health": ["api"]}
    ran_and_cured(
        service, store, approvals_dir, clock, proposal("nginx.service", None, other, "app.service")
    )
    again = service.handle(proposal("nginx.service", follows=first), DIAGNOSE)
    assert isinstance(again, Revise), again
    assert f"tried before: plan {first}" in again.errors[0].message


def test_an_older_unresolved_plan_of_its_own_incident_is_found_behind_a_newer_cured_one(
    service: ExecutorService, store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """Two incidents restart nginx at once (web's 503, A; api's, B) and neither cures.
    B's follow-up (restart app) ends VERIFIED. A's follow-up may still not restart nginx:
    B's plan, the newer, is excused by its cure, but A's own is behind it and counts."""
    other = {"unit": "api.service", "health": ["api"]}
    sent = [proposal("nginx.service"), proposal("nginx.service", None, other)]
    accepted = []
    for s in sent:  # A a second before B: the ids (and the scan) put B after A
        accepted.append(service.handle(s, DIAGNOSE))
        clock.advance(1)
    assert all(isinstance(a, Accept) for a in accepted), accepted
    first, second = (a.plan_id for a in accepted if isinstance(a, Accept))
    for plan_id in (first, second):
        approved(store, approvals_dir, store.load(plan_id), clock())
    apply_all(store, approvals_dir, clock)
    clock.advance(11)
    for a in accepted:
        assert isinstance(a, Accept)
        service.handle(report(a.plan_id, a.sha256, "unresolved"), DIAGNOSE)
        assert store.status(a.plan_id).state is PlanState.UNRESOLVED
    ran_and_cured(service, store, approvals_dir, clock, proposal("app.service", second, other))
    again = service.handle(proposal("nginx.service", follows=first), DIAGNOSE)
    assert isinstance(again, Revise), again
    assert f"tried before: plan {first}" in again.errors[0].message
