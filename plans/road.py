"""One road to an approval: everything after a door has established who decided and what
they reviewed, done once, the same for every door.

The doors, and what stays theirs:

- root's ``opsbot approve`` (opsbot_cli/approve.py): the terminal review and its "y", or
  ``--sha256``; ``--ttl``; ``--now``;
- a click relayed to root's opsbot-approver (approver_svc/service.py): the link's token,
  the approver's TOTP code and the confirmation beside the link, the link's sha256;
- a standing rule in that approver (approver_svc/rules.py): the rule's evaluation.

Each hands :meth:`Road.approve` a :class:`Request` (the plan id, the sha256 reviewed, who
decided: a :class:`Person` or a :class:`Rule`) and the road does the rest, in this order:

1. the journal witness: the sha256 opsbot-executor.service logged accepting under the id
   (plans.witness), unless the door read it a moment ago for its own review;
2. the live review (plans.decisions.review): the plan's bytes against its sha256, its
   state, a rejection, the sha256 reviewed, the stored sha256 against the witness;
3. every check of :data:`CHECKS`, against the reviewed plan: a check added there (a
   freeze, a cap) refuses at every door, before the door commits anything;
4. the door's own commitment (``commit``: a link's token is spent here, once the plan has
   passed everything but the write);
5. whether an apply runs now, asked before the approval exists (a start asked for while
   one runs merges into it, and that run may never see the new approval);
6. the approval bound to the sha256, written under the apply lock
   (plans.decisions.approve, which checks everything again); where root overrides the
   apply windows on a host whose executor polkit holds, the plan's own polkit grant
   (where root renews without ``--now``, the end of the old one: plans.grants);
7. the apply started, or the window it waits for, in words;
8. the door's journal entry, ``approval.<via>`` (``plan.approved`` is written at step 6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import structlog

from plans.apply_unit import apply_running, start_apply, watched, window_apply
from plans.decisions import Approved, Reviewed, approve, review
from plans.errors import PlanRefused, StoreError
from plans.grants import end_grant, grant_holds
from plans.polkit import (
    RULE_PATH,
    grant_path,
    plan_verbs,
    privilege_mode,
    render_grant,
    write_rule,
)
from plans.records import plan_expiry
from plans.store import PlanStore
from plans.windows import Analyzer, WindowState, systemd_analyze
from plans.witness import Accepted, accepted
from shared_io.paths import Paths
from shared_schema import PlanState
from shared_schema.config import ExecutorPolicy

__all__ = [
    "CHECKS",
    "RoadCheck",
    "Granted",
    "Person",
    "Request",
    "Road",
    "Rule",
    "still_waits",
]

log = structlog.get_logger("opsbot.approval")


@dataclass(frozen=True)
class Person:
    """A person decided: root at the terminal, or an approver whose click root's approver
    checked (token, TOTP code, confirmation)."""

    name: str
    via: Literal["terminal", "web"]


@dataclass(frozen=True)
class Rule:
    """A standing rule of opsbot.toml decided (its name and its sha256): recorded as the
    rule's, never as a person's."""

    name: str
    sha256: str
    via: Literal["rule"] = "rule"


@dataclass(frozen=True)
class Request:
    """What a door established: the plan, the sha256 reviewed (whole, or a prefix of at
    least 12 hex digits), who decided, and how long the approval holds.

    ``renew``: root's terminal only; an APPROVED plan's approval is written again. Every
    other door approves a plan that waits (PROPOSED, not expired) and never rewrites an
    approval made meanwhile. ``override_window``: root's ``--now`` only."""

    plan_id: str
    sha256: str
    by: Person | Rule
    ttl_seconds: int
    now: datetime
    renew: bool = False
    override_window: bool = False
    #: The door's own facts for its journal entry (the web's client address and reason).
    facts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Granted:
    """What the road did: the approval it wrote (and the plan as reviewed), what will
    apply the plan in words, and whether anything will."""

    approved: Approved
    reviewed: Reviewed
    applies: str
    starts: bool


#: A check of the road: refuses (raises a PlanError) what no door may approve.
RoadCheck = Callable[[Request, Reviewed, ExecutorPolicy], None]


def still_waits(request: Request, reviewed: Reviewed, policy: ExecutorPolicy) -> None:
    """A door that does not renew approves only a plan that waits: PROPOSED, and not past
    its ``plan_ttl_seconds``. Renewing an APPROVED plan's approval is root's, at the
    terminal: a click or a rule never rewrites root's approval (its approver, its expiry,
    its ``--now``)."""
    if request.renew:
        return
    record, status = reviewed.record, reviewed.status
    if status.state is PlanState.APPROVED:
        by = f" by {status.approved_by}" if status.approved_by else ""
        raise PlanRefused(
            f"plan {record.plan_id} was approved already{by}; nothing was changed",
            hint=f"root renews an approval with `opsbot approve {record.plan_id}`",
        )
    expires = plan_expiry(record, policy)
    if request.now >= expires:
        raise PlanRefused(
            f"plan {record.plan_id} expired at {expires.isoformat(timespec='seconds')} "
            "(plan_ttl_seconds); nothing was approved",
            hint="diagnose again for a new plan",
        )


#: Every door's approval passes each of these, in order, after the live review and
#: before the door commits anything.
CHECKS: tuple[RoadCheck, ...] = (still_waits,)

#: (busy) -> what will apply the plan, in words, and whether anything will.
StartApply = Callable[[bool], tuple[str, bool]]
#: (the window the plan waits for, now) -> the same, for a plan that waits for it.
WindowApply = Callable[[WindowState, datetime], tuple[str, bool]]


@dataclass(frozen=True)
class Road:
    """The road, against one store, approvals directory and policy; what it asks of the
    host (the journal, systemd, polkit) injectable for tests."""

    store: PlanStore
    approvals_dir: Path
    policy: ExecutorPolicy
    start_apply: StartApply
    window_apply: WindowApply
    witness: Callable[[str], Accepted] = accepted
    apply_busy: Callable[[], bool] = apply_running
    analyze: Analyzer = systemd_analyze
    privilege: Callable[[], str] = privilege_mode
    #: Where the grants of ``--now`` go (polkit's rules directory).
    grants_dir: Path = RULE_PATH.parent

    @classmethod
    def on_host(
        cls,
        store: PlanStore,
        paths: Paths,
        policy: ExecutorPolicy,
        *,
        witness: Callable[[str], Accepted] = accepted,
        analyze: Analyzer = systemd_analyze,
    ) -> Road:
        """The road of this host: its opsbot-apply units start the apply where they read
        ``paths``' approvals directory (plans.apply_unit)."""
        return cls(
            store=store,
            approvals_dir=paths.approvals_dir,
            policy=policy,
            start_apply=lambda busy: start_apply(paths, busy),
            window_apply=lambda window, now: window_apply(paths, window, now),
            apply_busy=lambda: watched(paths) and apply_running(),
            witness=witness,
            analyze=analyze,
        )

    def review(self, plan_id: str, witnessed: Accepted | None = None) -> Reviewed:
        """Steps 1 and 2: the plan as root reads it now, if the executor logged it so."""
        return review(
            self.store,
            self.approvals_dir,
            plan_id,
            self.witness(plan_id) if witnessed is None else witnessed,
        )

    def approve(
        self,
        request: Request,
        *,
        commit: Callable[[Reviewed], None] | None = None,
        witnessed: Accepted | None = None,
    ) -> Granted:
        """Steps 1 to 8 (the module's docstring) for ``request``; PlanError (or
        StoreError) says why nothing was approved, or, raised after ``commit``, why the
        approval was not written or the grant not made."""
        plan_id = request.plan_id
        witnessed = self.witness(plan_id) if witnessed is None else witnessed
        reviewed = review(self.store, self.approvals_dir, plan_id, witnessed, request.sha256)
        for check in CHECKS:
            check(request, reviewed, self.policy)
        if commit is not None:
            commit(reviewed)
        busy = self.apply_busy()
        by = request.by
        done = approve(
            self.store,
            self.approvals_dir,
            plan_id,
            sha256_prefix=request.sha256,
            accepted=witnessed,
            approver=by.name if isinstance(by, Person) else "",
            rule=(by.name, by.sha256) if isinstance(by, Rule) else None,
            now=request.now,
            ttl_seconds=request.ttl_seconds,
            windows=self.policy.apply_window,
            override_window=request.override_window,
            analyze=self.analyze,
            renew=request.renew,
        )
        overrides = request.override_window and bool(self.policy.apply_window)
        if overrides:
            self._grant(done)
        elif request.renew:
            self._end_grant(plan_id)
        if done.window.open:
            applies, starts = self.start_apply(busy)
            if overrides:
                applies = f"overrides its apply window (--now): {applies}"
        else:
            applies, starts = self.window_apply(done.window, request.now)
        log.info(
            f"approval.{by.via}",
            plan_id=plan_id,
            sha256=done.record.sha256,
            approver=by.name if isinstance(by, Person) else None,
            approved_by_rule=by.name if isinstance(by, Rule) else None,
            rule_sha256=by.sha256 if isinstance(by, Rule) else None,
            via=by.via,
            expires_at=done.approval.expires_at.isoformat(),
            units=" ".join(done.plan.units()),
            applies=applies,
            **dict(request.facts),
        )
        return Granted(done, reviewed, applies, starts)

    def _grant(self, done: Approved) -> None:
        """``--now`` outside the windows: polkit's rule grants the executor's user its
        verbs only inside them, so root writes this plan's grant until its approval
        expires; it ends with the approval (plans.grants). Not on a host whose executor
        polkit does not hold (there the windows bind opsbot's code only).

        A reject that ran while this approval was being written may have looked for the
        grant before it existed: once written, the grant is removed again unless its
        approval still stands."""
        if self.privilege() != "polkit":
            return
        plan_id, until = done.record.plan_id, done.approval.expires_at
        steps = [(step.tool, step.args.unit) for step in done.plan.steps]
        path = grant_path(plan_id, self.grants_dir)
        try:
            write_rule(render_grant(plan_id, plan_verbs(steps), until), path)
        except OSError as exc:
            raise StoreError(
                f"approved, but the polkit grant {path} could not be written: "
                f"{exc.strerror or exc}; the plan's steps will be refused outside its window",
            ) from exc
        if not grant_holds(self.approvals_dir, plan_id, done.approval.approved_at):
            end_grant(plan_id, self.grants_dir)
            raise PlanRefused(
                f"plan {plan_id} was rejected while it was approved: its polkit grant was "
                "removed again; it will never run",
                hint=f"`opsbot show {plan_id}` says who rejected it",
            )

    def _end_grant(self, plan_id: str) -> None:
        """Root renewed the approval without ``--now``: it waits for the windows now, and
        an earlier ``--now`` grant of the plan goes (plans.grants)."""
        if end_grant(plan_id, self.grants_dir):
            log.info("grant.removed", plan_id=plan_id, reason="renewed without --now")
