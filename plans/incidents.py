"""Incidents: one symptom and the plans made to cure it, in order.

A plan whose verification ended UNRESOLVED starts one follow-up diagnosis; the plan it
proposes says ``follows: PLAN_ID``. The executor accepts such a plan only when that
plan ran and ended UNRESOLVED within the verification horizon and carries the same
symptom; it then sets the incident itself (the first plan's id), so that a subverted
diagnose process cannot attach a plan to another incident and borrow its story; and it
refuses a plan past ``[executor] max_plans_per_incident`` (REVISE: the diagnosis ends in
a note for a human). The restart budget applies as to any plan.

    incident, errors = follow_up(plan, store, policy, now)
    members(store, incident)           # the incident's plan ids, oldest first
"""

from __future__ import annotations

from datetime import datetime

from plans.errors import PlanError
from plans.records import PlanRecord
from plans.store import PlanStore
from plans.verification import VERIFY_HORIZON
from shared_schema import ExecutorPolicy, FieldError, Plan, PlanState

__all__ = ["INCIDENT_CAP", "follow_up", "members"]

#: How the executor's refusal of a plan past the cap begins (a policy that reads it
#: knows a human must look).
INCIDENT_CAP = "incident has had its plans"


def members(store: PlanStore, incident: str) -> list[str]:
    """The ids of the plans of ``incident``, oldest first: the first plan and every plan
    the executor put in it (none is older than the first)."""
    found = []
    for plan_id in store.ids():
        if plan_id < incident:
            continue
        try:
            record = store.load(plan_id)
        except PlanError:
            continue
        if record.incident_id == incident:
            found.append(plan_id)
    return found


def follow_up(
    plan: Plan, store: PlanStore, policy: ExecutorPolicy, now: datetime
) -> tuple[str | None, list[FieldError]]:
    """The incident ``plan`` joins (None: it starts its own) and why it may not."""
    if plan.follows is None:
        return None, []

    def refused(message: str) -> tuple[None, list[FieldError]]:
        return None, [FieldError(path="follows", message=message)]

    try:
        record: PlanRecord = store.load(plan.follows)
        status = store.status(plan.follows, record)
        earlier = store.verified_plan(record)
    except PlanError as exc:
        return refused(f"plan {plan.follows} cannot be followed: {exc.message}")
    if status.state is not PlanState.UNRESOLVED:
        return refused(
            f"plan {plan.follows} is {status.state}, not UNRESOLVED: only a plan that ran "
            "and did not cure its symptom has a follow-up"
        )
    ended = status.history[-1].at if status.history else record.submitted_at
    if now - ended > VERIFY_HORIZON:
        return refused(
            f"plan {plan.follows} ended UNRESOLVED more than "
            f"{VERIFY_HORIZON.total_seconds() / 3600:g} h ago: diagnose the symptom afresh"
        )
    if earlier.symptom != plan.symptom:
        return refused(
            f"the plan's symptom is not the one plan {plan.follows} was meant to cure: a "
            "follow-up carries the same symptom"
        )
    incident = record.incident_id
    plans = members(store, incident)
    if len(plans) >= policy.max_plans_per_incident:
        return None, [
            FieldError(
                path="follows",
                message=f"{INCIDENT_CAP}: incident {incident} has had {len(plans)} plans "
                f"(limit {policy.max_plans_per_incident}: [executor] "
                "max_plans_per_incident) and its symptom is still there: a human must look",
            )
        ]
    return incident, []
