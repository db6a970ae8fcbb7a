"""What waits for an apply, read without building a model: whether ``opsbot apply`` has a
plan to hand to opsbot-apply.service, and which plans wait for approval.

The gate (plans.gate.decide) runs a plan only from APPROVED (with an approval that passes
every check) and ends one an apply left APPLYING; from PROPOSED it can only say the plan
waits for approval (or, past ``plan_ttl_seconds``, mark it EXPIRED: the timer's next run
does that), and a final plan it skips. So where no stored plan is APPROVED or APPLYING,
no approval waits for a plan an apply could run, and ``opsbot apply`` says so without
starting the unit. Read this way, it errs only towards starting the unit: a status it
cannot read, or a state it does not know, counts as work, for the apply to judge with
every check. It reads the store's own files (``plans/<id>.json`` names, the ``state`` of
``status/<id>.json``, PROPOSED where there is none, as PlanStore.status reads it;
tests/unit/plans/test_apply_queue.py holds it to the store and to the gate): a directory
listing and one small read a plan, with no model built.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from plans.outcomes import Outcome
from shared_io.errors import StoreError
from shared_io.files import read_bounded
from shared_schema.names import is_valid_plan_id
from shared_schema.states import PlanState

__all__ = ["APPLY_ACTS_ON", "WAITS_FOR_APPROVAL", "Waiting", "waiting"]

#: The states in which the apply does more than say that a plan waits: it runs an
#: APPROVED plan (plans.gate.Run), and ends one an apply left APPLYING (Interrupted).
APPLY_ACTS_ON = frozenset({PlanState.APPROVED, PlanState.APPLYING})
#: What the apply says of a PROPOSED plan (plans.gate.AwaitApproval), and so does this.
WAITS_FOR_APPROVAL = "waiting for approval"


@dataclass(frozen=True)
class Waiting:
    """What the store holds for an apply now, by plan id, oldest first."""

    #: APPROVED or APPLYING, or a status that could not be read: the apply judges them.
    for_apply: tuple[str, ...]
    #: PROPOSED: they wait for approval, and an apply would only say so.
    proposed: tuple[str, ...]

    @property
    def nothing_approved(self) -> bool:
        """No plan an apply could run or end: starting opsbot-apply.service would run
        nothing."""
        return not self.for_apply

    def outcomes(self) -> list[Outcome]:
        """What an apply would say of each plan here when nothing is approved: each
        PROPOSED plan waits for approval (its argv is ``opsbot show ID``'s)."""
        return [Outcome(p, PlanState.PROPOSED, WAITS_FOR_APPROVAL) for p in self.proposed]


def waiting(state_dir: Path) -> Waiting:
    """What waits in the plan store under ``state_dir`` (OSError where its plans cannot
    be listed)."""
    for_apply: list[str] = []
    proposed: list[str] = []
    for plan_id in _stored_ids(state_dir / "plans"):
        state = _state(state_dir / "status" / f"{plan_id}.json")
        if state is PlanState.PROPOSED:
            proposed.append(plan_id)
        elif state is None or state in APPLY_ACTS_ON:
            for_apply.append(plan_id)
    return Waiting(tuple(for_apply), tuple(proposed))


def _stored_ids(plans_dir: Path) -> list[str]:
    """The ids PlanStore.ids lists: every ``<id>.json`` of a valid id, oldest first."""
    try:
        names = os.listdir(plans_dir)
    except FileNotFoundError:
        return []
    return sorted(n[:-5] for n in names if n.endswith(".json") and is_valid_plan_id(n[:-5]))


def _state(path: Path) -> PlanState | None:
    """The state a status file says: PROPOSED where there is none; None where it cannot
    be read (not a plain file, too large, not JSON, no state opsbot knows)."""
    try:
        data = read_bounded(path)
    except FileNotFoundError:
        return PlanState.PROPOSED
    except (OSError, StoreError):
        return None
    try:
        said = json.loads(data)
    except ValueError:
        return None
    state = said.get("state") if isinstance(said, dict) else None
    try:
        return PlanState(state) if isinstance(state, str) else None
    except ValueError:
        return None
