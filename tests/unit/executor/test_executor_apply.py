"""Applying plans, the operator's story: nothing runs without a valid approval; an
approved plan runs its steps in order, once; a plan whose world changed goes STALE;
a plan that died half-way is never resumed. Real store and approvals on disk; only the
unit state and the step runner are scripted."""

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from executor_svc.apply import Applier
from plans import ALLOWED, PlanStore, StatusRecord, TransitionRefused, transition, write_approval
from shared_io.run import run
from shared_schema import ExecutorPolicy, PlanState, StepRecord
from tests.unit.plans.helpers import (
    INVOCATION,
    NOW,
    POLICY,
    Clock,
    Systemctl,
    approved,
    dry_run_of,
    edit_record,
    plan_of,
    restart_argv,
    step,
    submitted,
    tree,
    unit_in,
)

S = PlanState


@pytest.fixture
def applier(store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl) -> Applier:
    return Applier(
        store,
        approvals_dir,
        POLICY,
        actor="root",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )


def three_restarts() -> list[str]:
    return ["nginx.service", "app.service", "worker@1.service"]


def test_a_proposed_plan_is_not_run(
    store: PlanStore, applier: Applier, systemctl: Systemctl
) -> None:
    """A plan nobody approved waits; nothing runs and it stays PROPOSED."""
    record = submitted(store, plan_of())
    [outcome] = applier.apply_all()
    assert (outcome.state, outcome.message, outcome.ran) == (
        S.PROPOSED,
        "waiting for approval",
        False,
    )
    assert systemctl.calls == []
    assert store.status(record.plan_id).state is S.PROPOSED


def test_an_approved_plan_runs_its_steps_in_order_and_is_applied(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, clock: Clock
) -> None:
    """With a valid approval, each step runs as its argv, in order; the plan ends
    APPLIED with a record per step (argv, exit status, outcome, times), and the
    approval is consumed."""
    units = three_restarts()
    record = submitted(store, plan_of(*(step("restart_unit", u) for u in units)))
    approved(store, approvals_dir, record)
    clock.advance(120)
    [outcome] = applier.apply_all()
    assert systemctl.calls == [restart_argv(u) for u in units]
    assert (outcome.state, outcome.ran) == (S.APPLIED, True)
    assert outcome.argv == [restart_argv(u) for u in units]
    status = store.status(record.plan_id)
    assert status.state is S.APPLIED
    assert [s.state for s in status.history] == [S.PROPOSED, S.APPROVED, S.APPLYING, S.APPLIED]
    assert status.reason == "3 steps ran"
    assert [(r.index, r.argv, r.exit_status, r.outcome) for r in status.steps] == [
        (i + 1, restart_argv(u), 0, "ok") for i, u in enumerate(units)
    ]
    assert all(r.started_at == r.finished_at == clock() for r in status.steps)
    assert store.is_consumed(record.plan_id)


def test_stop_on_error_stops_at_the_first_failing_step(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """When step 2 fails, step 3 is not run: it is recorded "not-run" and the plan is
    FAILED, the reason naming the step, its argv and its output."""
    units = three_restarts()
    systemctl.exit_status["app.service"] = 1
    record = submitted(store, plan_of(*(step("restart_unit", u) for u in units)))
    approved(store, approvals_dir, record)
    [outcome] = applier.apply_all()
    assert systemctl.calls == [restart_argv("nginx.service"), restart_argv("app.service")]
    status = store.status(record.plan_id)
    assert outcome.state is status.state is S.FAILED
    assert [(r.outcome, r.exit_status) for r in status.steps] == [
        ("ok", 0),
        ("failed", 1),
        ("not-run", None),
    ]
    assert status.steps[1].output == "Job for app.service failed.\n"
    assert status.reason == (
        "step 2 (systemctl restart --no-ask-password -- app.service) failed: "
        "Job for app.service failed."
    )


def test_without_stop_on_error_every_step_runs(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """With stop_on_error false, a failing step does not stop the others; the plan is
    still FAILED because one step failed."""
    units = three_restarts()
    systemctl.exit_status["app.service"] = 3
    record = submitted(
        store, plan_of(*(step("restart_unit", u) for u in units), stop_on_error=False)
    )
    approved(store, approvals_dir, record)
    [outcome] = applier.apply_all()
    assert systemctl.calls == [restart_argv(u) for u in units]
    status = store.status(record.plan_id)
    assert outcome.state is status.state is S.FAILED
    assert [r.outcome for r in status.steps] == ["ok", "failed", "ok"]


def test_the_applied_reason_counts_its_steps_in_words(
    store: PlanStore, approvals_dir: Path, applier: Applier, clock: Clock
) -> None:
    """The reason an APPLIED plan carries (what `opsbot show` and the phone's status page
    say) counts its steps as a person would: "1 step ran", never "1 step(s) ran"."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    clock.advance(120)
    applier.apply_all()
    assert store.status(record.plan_id).reason == "1 step ran"


def test_a_step_that_times_out_is_recorded_as_timeout(
    store: PlanStore, approvals_dir: Path, clock: Clock
) -> None:
    """A step the runner gave up on is recorded "timeout" with the runner's error."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    applier = Applier(
        store,
        approvals_dir,
        POLICY,
        actor="root",
        now=clock,
        run_step=lambda argv, timeout: run(["sleep", "5"], timeout=0.2),
    )
    [outcome] = applier.apply_all()
    [record_] = store.status(record.plan_id).steps
    assert outcome.state is S.FAILED
    assert (record_.outcome, record_.exit_status, record_.output) == (
        "timeout",
        None,
        "timed out after 0.2s",
    )


def test_a_precondition_that_no_longer_holds_makes_the_plan_stale_and_runs_nothing(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """The plan was made for a failed nginx; nginx has since recovered. The plan goes
    STALE, saying what it found, and no step runs (not even the first)."""
    record = submitted(
        store,
        plan_of(
            step("reset_failed_unit", "app.service"),
            step("restart_unit", "nginx.service", expect={"active_state": ["failed"]}),
        ),
    )
    approved(store, approvals_dir, record)
    applier.read_state = unit_in("active", "running")
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.state is S.STALE
    assert outcome.message == (
        "step 2: nginx.service is active/running (load: loaded); the plan expected active "
        "state failed"
    )
    assert store.status(record.plan_id).state is S.STALE


def test_a_unit_restarted_since_diagnosis_makes_the_plan_stale(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """A plan pinned to the invocation diagnosis saw goes STALE if the unit has been
    restarted since (a new InvocationID)."""
    record = submitted(
        store, plan_of(step("restart_unit", "nginx.service", expect={"invocation_id": INVOCATION}))
    )
    approved(store, approvals_dir, record)
    applier.read_state = unit_in("failed", invocation="f" * 32)
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.state is S.STALE
    assert "was restarted since diagnosis" in outcome.message


def test_a_plan_todays_policy_no_longer_allows_is_stale_and_runs_nothing(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl
) -> None:
    """The operator removed nginx from the allowlist after approving: the plan goes
    STALE naming what policy refuses, and nothing runs."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    narrower = ExecutorPolicy(allow={"restart_unit": ["app.service"]})
    applier = Applier(store, approvals_dir, narrower, "root", clock, unit_in("failed"), systemctl)
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.state is S.STALE
    assert outcome.message == (
        "today's policy refuses it: steps.0.args.unit: restart_unit may not touch "
        "nginx.service; allowed: app.service"
    )


def test_a_plan_that_died_while_applying_is_interrupted_and_never_run_again(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, clock: Clock
) -> None:
    """An apply was killed half-way (the plan is APPLYING, a step "running"). The next
    apply marks it INTERRUPTED, the running step failed; it never runs again, not even
    after someone writes a fresh approval."""
    record = submitted(
        store, plan_of(step("restart_unit", "nginx.service"), step("restart_unit", "app.service"))
    )
    approved(store, approvals_dir, record)
    status = store.status(record.plan_id)
    applying = transition(status, S.APPLYING, by="root", at=NOW)
    store.save_status(
        applying.model_copy(
            update={
                "steps": [
                    StepRecord(
                        index=1,
                        tool="restart_unit",
                        argv=restart_argv("nginx.service"),
                        outcome="running",
                        started_at=NOW,
                    ),
                    StepRecord(
                        index=2,
                        tool="restart_unit",
                        argv=restart_argv("app.service"),
                        outcome="not-run",
                    ),
                ]
            }
        )
    )
    [outcome] = applier.apply_all()
    assert outcome.state is S.INTERRUPTED
    assert "never resumed" in outcome.message
    status = store.status(record.plan_id)
    assert status.state is S.INTERRUPTED
    assert [r.outcome for r in status.steps] == ["failed", "not-run"]
    assert status.steps[0].output.endswith("[apply died]")

    clock.advance(60)
    write_approval(approvals_dir, record, "alice", clock(), 3600)
    assert applier.apply_all() == []
    assert systemctl.calls == []
    assert store.status(record.plan_id).state is S.INTERRUPTED


def test_an_applied_plan_is_not_run_again_by_a_new_approval(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, clock: Clock
) -> None:
    """Replay: after a plan was applied, writing a new approval file for it (or the old
    one again) runs nothing."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    applier.apply_all()
    assert len(systemctl.calls) == 1
    clock.advance(60)
    write_approval(approvals_dir, record, "alice", clock(), 3600)
    assert applier.apply_all() == []
    assert len(systemctl.calls) == 1
    assert store.status(record.plan_id).state is S.APPLIED


def test_an_approved_plan_whose_approval_was_consumed_is_not_run(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """If an earlier apply consumed the approval but died before recording it, the
    approval cannot be used again: nothing runs, and the plan says why."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    assert store.consume(record.plan_id, "0" * 64, "root", NOW)
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.message == "not run: approval was already used by an earlier apply"
    status = store.status(record.plan_id)
    assert (status.state, status.refusal) == (
        S.APPROVED,
        "approval was already used by an earlier apply",
    )


def test_an_expired_approval_expires_the_plan(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, clock: Clock
) -> None:
    """An approval that ran out before the apply makes the plan EXPIRED; nothing runs."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record, ttl=600)
    clock.advance(601)
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.state is S.EXPIRED
    assert outcome.message.startswith("approval expired at ")
    assert store.status(record.plan_id).state is S.EXPIRED


def test_a_plan_older_than_plan_ttl_expires(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, clock: Clock
) -> None:
    """A plan approved just now but submitted longer ago than plan_ttl_seconds is
    EXPIRED, not run: the diagnosis it came from is too old to trust."""
    record = submitted(store, plan_of())
    clock.advance(POLICY.plan_ttl_seconds + 1)
    approved(store, approvals_dir, record, at=clock())
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.state is S.EXPIRED
    assert outcome.message == "older than plan_ttl_seconds=86400"


def test_a_plan_edited_after_approval_is_not_run(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """The stored plan was edited after approval: it is refused as modified, nothing
    runs, the plan stays APPROVED with the refusal recorded."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    edit_record(store, record.plan_id, plan=record.plan.replace("nginx", "sshd"))
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.message.startswith("not run: plan ")
    assert "modified after it was stored" in outcome.message
    status = store.status(record.plan_id)
    assert status.state is S.APPROVED
    assert "modified after it was stored" in status.refusal


def test_an_unapproved_plan_marked_approved_is_not_run(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """A status file saying APPROVED is not an approval: without the approval file,
    nothing runs."""
    record = submitted(store, plan_of())
    store.save_status(StatusRecord(plan_id=record.plan_id, state=S.APPROVED))
    [outcome] = applier.apply_all()
    assert systemctl.calls == []
    assert outcome.message == "not run: no approval"


def test_a_dry_run_runs_nothing_and_writes_nothing(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl, tmp_path: Path
) -> None:
    """``opsbot apply --dry-run`` says what would run, runs nothing and changes no file
    (no status, no consumed approval, no lock file, no mtime)."""
    ready = submitted(store, plan_of())
    approved(store, approvals_dir, ready)
    waiting = submitted(store, plan_of(step("restart_unit", "app.service")))
    before = tree(tmp_path)
    outcomes = {o.plan_id: o for o in dry_run_of(applier)}
    assert tree(tmp_path) == before
    assert systemctl.calls == []
    assert outcomes[ready.plan_id].message == "would run 1 step (dry run: nothing was run)"
    assert outcomes[ready.plan_id].argv == [restart_argv("nginx.service")]
    assert outcomes[waiting.plan_id].message == "would not run: not approved"
    assert not store.is_consumed(ready.plan_id)


def test_a_dry_run_does_not_promise_to_run_a_plan_that_has_expired(
    store: PlanStore, approvals_dir: Path, applier: Applier, clock: Clock
) -> None:
    """A dry run must not say "would run" for a plan older than plan_ttl_seconds: the
    real apply would expire it."""
    record = submitted(store, plan_of())
    clock.advance(POLICY.plan_ttl_seconds + 1)
    approved(store, approvals_dir, record, at=clock())
    [outcome] = dry_run_of(applier)
    assert outcome.message.startswith("would become EXPIRED")
    assert "plan_ttl_seconds" in outcome.message
    [real] = applier.apply_all()
    assert real.state is S.EXPIRED


def test_a_dry_run_checks_preconditions_as_the_apply_would(
    store: PlanStore, approvals_dir: Path, applier: Applier, systemctl: Systemctl
) -> None:
    """The unit recovered by itself after the plan was approved: the dry run says the
    plan would go STALE, naming the precondition in words beside the live state, and the
    real apply straight after does exactly that (issue 13: the dry run said "would run")."""
    record = submitted(
        store,
        plan_of(step("restart_unit", "nginx.service", expect={"active_state": ["failed"]})),
    )
    approved(store, approvals_dir, record)
    applier.read_state = unit_in("active", "running")
    [dry] = dry_run_of(applier)
    assert dry.message == (
        "would become STALE: step 1: nginx.service is active/running (load: loaded); the "
        "plan expected active state failed"
    )
    [step_preview] = dry.preview
    assert [c.line() for c in step_preview.checks] == [
        "nginx.service is failed now (live: active): NO"
    ]
    assert step_preview.does == "restart nginx.service: stop the unit and start it again"
    assert store.status(record.plan_id).state is S.APPROVED  # the dry run changed nothing
    [real] = applier.apply_all()
    assert real.state is S.STALE
    assert systemctl.calls == []


def test_a_dry_run_says_yes_to_each_precondition_that_holds(
    store: PlanStore, approvals_dir: Path, applier: Applier
) -> None:
    """Still failed: the dry run would run the step, and says so of its precondition."""
    record = submitted(
        store,
        plan_of(step("restart_unit", "nginx.service", expect={"active_state": ["failed"]})),
    )
    approved(store, approvals_dir, record)
    [dry] = dry_run_of(applier)
    assert dry.message.startswith("would run 1 step ")
    assert [c.line() for c in dry.preview[0].checks] == [
        "nginx.service is failed now (live: failed): yes"
    ]


def test_two_racing_applies_run_the_steps_exactly_once(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl
) -> None:
    """The timer and the path unit start two applies at once (two processes, each with
    its own store object): the approved plan's steps run once in total."""
    record = submitted(
        store, plan_of(step("restart_unit", "nginx.service"), step("start_unit", "app.service"))
    )
    approved(store, approvals_dir, record)
    barrier = threading.Barrier(2)
    outcomes = []

    def apply() -> None:
        racer = Applier(
            PlanStore(store.root),
            approvals_dir,
            POLICY,
            "root",
            clock,
            unit_in("failed"),
            systemctl,
        )
        barrier.wait()
        outcomes.append(racer.apply_all())

    threads = [threading.Thread(target=apply) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(systemctl.calls) == 2
    assert sorted(len(o) for o in outcomes) == [0, 1]
    assert store.status(record.plan_id).state is S.APPLIED


def test_each_plan_in_one_apply_is_logged_with_its_own_fingerprint(
    store: PlanStore, approvals_dir: Path, applier: Applier, clock: Clock
) -> None:
    """Log events carry the plan_id and sha256 of the plan they are about: an error
    about a second, unreadable plan must not carry the first plan's fingerprint."""
    first = submitted(store, plan_of())
    second = submitted(
        store, plan_of(step("restart_unit", "app.service")), at=NOW + timedelta(seconds=1)
    )
    (store.plans / f"{second.plan_id}.json").write_text("{}")
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        applier.apply_all()
    [error] = [e for e in events if e["event"] == "apply.error"]
    assert error["plan_id"] == second.plan_id
    assert error.get("sha256") in (None, second.sha256)
    assert first.sha256 != second.sha256
    assert structlog.contextvars.get_contextvars().get("sha256") is None


def test_each_transition_of_an_apply_is_logged(
    store: PlanStore, approvals_dir: Path, applier: Applier
) -> None:
    """The journal tells the story: approval consumed, applying, each step started and
    finished with its argv and exit status, applied."""
    record = submitted(store, plan_of())
    approved(store, approvals_dir, record)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        applier.apply_all()
    assert [e["event"] for e in events] == [
        "approval.consumed",
        "plan.applying",
        "step.started",
        "step.finished",
        "plan.applied",
    ]
    assert {e["plan_id"] for e in events} == {record.plan_id}
    assert {e["sha256"] for e in events} == {record.sha256}
    finished = events[3]
    assert (finished["step"], finished["argv"], finished["exit_status"], finished["outcome"]) == (
        1,
        restart_argv("nginx.service"),
        0,
        "ok",
    )


# -- the state machine ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.APPLIED, S.APPLYING),
        (S.PROPOSED, S.APPLYING),
        (S.PROPOSED, S.APPLIED),
        (S.APPROVED, S.APPLIED),
        (S.INTERRUPTED, S.APPLYING),
        (S.FAILED, S.APPROVED),
        (S.EXPIRED, S.APPROVED),
        (S.STALE, S.APPROVED),
        (S.REJECTED, S.APPROVED),
    ],
)
def test_transitions_outside_the_table_are_refused(old: PlanState, new: PlanState) -> None:
    """No way around approval (PROPOSED straight to APPLYING), no re-running (APPLIED or
    INTERRUPTED back to APPLYING), no resurrection of a final plan."""
    status = StatusRecord(plan_id="20261129-213500-1a2b3c4d", state=old)
    with pytest.raises(TransitionRefused) as caught:
        transition(status, new, by="root", at=NOW)
    assert caught.value.message == f"plan 20261129-213500-1a2b3c4d is {old}; it cannot become {new}"


def test_final_states_have_no_way_out() -> None:
    """Every final state is a dead end in the table, except APPLIED, whose only ways out
    are the verification's two verdicts: no step runs from any final state."""
    assert set(ALLOWED) == {S.PROPOSED, S.APPROVED, S.APPLYING, S.APPLIED}
    assert all(not state.is_final for state in ALLOWED if state is not S.APPLIED)
    assert ALLOWED[S.APPLIED] == {S.VERIFIED, S.UNRESOLVED}
    assert all(not ALLOWED.get(s) for s in (S.VERIFIED, S.UNRESOLVED))


def test_a_transition_records_who_when_and_why_and_clears_the_refusal() -> None:
    """A transition appends to the history and clears an earlier refusal reason."""
    status = StatusRecord(
        plan_id="20261129-213500-1a2b3c4d", state=S.APPROVED, refusal="no approval"
    )
    moved = transition(status, S.STALE, by="root", at=NOW, reason="unit recovered")
    assert (moved.state, moved.refusal, moved.reason) == (S.STALE, "", "unit recovered")
    assert [(t.state, t.by, t.at) for t in moved.history] == [(S.STALE, "root", NOW)]


def test_an_approval_written_while_a_run_goes_on_is_applied_by_that_run(
    store: PlanStore, approvals_dir: Path, clock: Clock, systemctl: Systemctl
) -> None:
    """Root approves a plan while the apply is busy with another one it has already passed
    over (opsbot-apply.path cannot start the unit again while it runs): the same run looks
    at the approvals again and applies it, rather than leaving it to the timer a minute
    later. On a fleet, that minute was every host's."""
    early = submitted(store, plan_of(step("restart_unit", "app.service")), at=NOW)
    late = submitted(
        store, plan_of(step("restart_unit", "nginx.service")), at=NOW + timedelta(seconds=1)
    )
    approved(store, approvals_dir, late)

    def run_step(argv: list[str], timeout: float) -> Any:
        if argv[-1] == "nginx.service":  # meanwhile, root approves the other plan
            approved(store, approvals_dir, early)
        return systemctl(argv, timeout)

    applier = Applier(
        store,
        approvals_dir,
        POLICY,
        actor="root",
        now=clock,
        read_state=unit_in("failed"),
        run_step=run_step,
    )
    clock.advance(120)
    outcomes = applier.apply_all()
    assert {o.plan_id: o.state for o in outcomes} == {
        early.plan_id: S.APPLIED,
        late.plan_id: S.APPLIED,
    }
    assert systemctl.calls == [restart_argv("nginx.service"), restart_argv("app.service")]
