"""What waits for an apply (plans.apply_queue), the look ``opsbot apply`` takes before it
starts opsbot-apply.service: it never says "nothing approved" while an approved plan
waits, it holds to the store's reading and to the gate's decision for every state, and
what it cannot read counts as work for the apply."""

import os
from pathlib import Path

import pytest

from executor_svc.apply import Applier
from plans import (
    APPLY_ACTS_ON,
    WAITS_FOR_APPROVAL,
    Interrupted,
    PlanStore,
    Run,
    StatusRecord,
    decide,
    outcome_json,
    waiting,
    write_approval,
)
from shared_schema import PlanState

from .helpers import (
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    plan_of,
    restart_argv,
    step,
    submitted,
    unit_in,
)


def test_an_approved_plan_is_for_the_apply_and_the_apply_still_runs_it(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl
) -> None:
    """Root approved a plan: the look says the apply has work (``opsbot apply`` starts
    the unit), and the apply itself, with every check, runs its step."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    now = waiting(store.root)
    assert not now.nothing_approved
    assert now.for_apply == (record.plan_id,) and now.proposed == ()
    applier = Applier(
        store,
        approvals_dir,
        POLICY,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )
    [outcome] = applier.apply_all()
    assert (outcome.plan_id, outcome.state, outcome.ran) == (record.plan_id, "APPLIED", True)
    assert systemctl.calls == [restart_argv("nginx.service")]


def test_nothing_approved_lists_what_waits_for_approval_and_leaves_final_plans_out(
    store: PlanStore,
) -> None:
    """Only PROPOSED and final plans: nothing approved, each PROPOSED plan waiting for
    approval in the apply's own words, oldest first; an empty store waits for nothing."""
    assert waiting(store.root).nothing_approved
    assert waiting(store.root / "nowhere").nothing_approved  # no store yet: no plan
    first = submitted(store, plan_of(goal="first"))
    done = submitted(store, plan_of(step("restart_unit", "app.service"), goal="done"))
    set_state(store, done.plan_id, PlanState.VERIFIED)
    second = submitted(store, plan_of(goal="second"), at=NOW.replace(minute=40))
    now = waiting(store.root)
    assert now.nothing_approved and now.for_apply == ()
    assert now.proposed == (first.plan_id, second.plan_id)
    assert [outcome_json(o) for o in now.outcomes()] == [
        {"plan_id": p, "state": "PROPOSED", "message": WAITS_FOR_APPROVAL, "argv": [], "ran": False}
        for p in (first.plan_id, second.plan_id)
    ]


@pytest.mark.parametrize("state", list(PlanState))
def test_the_look_holds_to_the_gate_for_every_state(
    store: PlanStore, approvals_dir: Path, state: PlanState
) -> None:
    """For a plan in each state, with a valid approval beside it: where the gate would
    run the plan, or end one an apply left, the look has it for the apply; it has a plan
    for the apply exactly in the states the apply acts on (APPROVED, APPLYING)."""
    record = submitted(store, plan_of())
    write_approval(approvals_dir, record, "alice", NOW, 3600)
    set_state(store, record.plan_id, state)
    decision = decide(
        store,
        record,
        store.status(record.plan_id, record),
        approvals_dir=approvals_dir,
        policy=POLICY,
        now=NOW,
    )
    now = waiting(store.root)
    if isinstance(decision, Run | Interrupted):
        assert now.for_apply == (record.plan_id,)
    assert (record.plan_id in now.for_apply) == (state in APPLY_ACTS_ON)
    assert (record.plan_id in now.proposed) == (state is PlanState.PROPOSED)


@pytest.mark.parametrize(
    "status",
    [b"{not json", b'["APPROVED"]', b'{"state": "SOMETHING"}', b'{"state": ["PROPOSED"]}', b"{}"],
)
def test_a_status_it_cannot_read_is_work_for_the_apply(store: PlanStore, status: bytes) -> None:
    """A status that is no JSON object with a known state is not taken for PROPOSED or
    final: the apply is started, to judge it with every check."""
    record = submitted(store, plan_of())
    (store.status_dir / f"{record.plan_id}.json").write_bytes(status)
    assert waiting(store.root).for_apply == (record.plan_id,)


def test_a_status_that_is_a_link_or_no_file_is_work_for_the_apply(
    store: PlanStore, tmp_path: Path
) -> None:
    """What the executor's uid could plant at a status's name (a symlink to a final
    status, a FIFO that would hold a reader) is not followed or waited on: work."""
    linked = submitted(store, plan_of(goal="linked"))
    final = tmp_path / "final.json"
    final.write_text('{"state": "VERIFIED"}')
    os.symlink(final, store.status_dir / f"{linked.plan_id}.json")
    fifo = submitted(store, plan_of(goal="fifo"))
    os.mkfifo(store.status_dir / f"{fifo.plan_id}.json")
    assert set(waiting(store.root).for_apply) == {linked.plan_id, fifo.plan_id}


def test_it_lists_the_plans_the_store_lists(store: PlanStore) -> None:
    """The same ids as PlanStore.ids: temp files, other names and bad ids are no plans."""
    record = submitted(store, plan_of())
    for name in (".tmp-abc", "20261129-213500-1a2b3c4d.json.tmp", "notes.json", "x.json"):
        (store.plans / name).write_text("{}")
    (store.plans / "20261129-2135-1a2b.json").write_text("{}")
    now = waiting(store.root)
    assert [*now.for_apply, *now.proposed] == store.ids() == [record.plan_id]


def set_state(store: PlanStore, plan_id: str, state: PlanState) -> None:
    """The plan's status file saying ``state`` (written as the store writes it)."""
    status = store.status(plan_id)
    store.save_status(StatusRecord(plan_id=plan_id, state=state, history=status.history))
