"""What root knew of a plan when the standing rules were asked, kept with the rules'
record so that ``opsbot replay --rules`` can ask a rule again and get the answer it
would have given then, never one read from the host now.

plans.standing.decide asks three things of the host, each only when a rule gets that far:
what opsbot's recent plans forbid the plan (``recent``), each unit's history (``history``)
and root's reading of the units (``reading``). :class:`Kept` wraps the approver's three and
remembers each answer given (:meth:`Kept.facts`: shared_schema's RuleFacts, in the
record); :class:`Recorded` answers the same three from such a record, and raises
:class:`NotRecorded` for one that was never asked then: the replay says so, it does not
guess.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from plans.readings import Reading, TargetReading, UnitReading
from plans.standing import UnitHistory, UnreadableHistory
from shared_schema import Plan, PlanState
from shared_schema.approver_socket import (
    MAX_APPROVALS_KEPT,
    RuleFacts,
    TargetRead,
    UnitPast,
    UnitRead,
)

__all__ = ["Kept", "NotRecorded", "Recorded"]

#: Units a record keeps (as the approver's record does: a plan of more units is never
#: replayed), and a line's characters: a record stays far below a reply's bytes.
MAX_UNITS = 16
MAX_LINE = 300
MAX_TARGETS = 8
#: The name of the one rule an approval is counted under when replayed: the limit is the
#: unit's, shared by every rule (plans.standing), so only the times matter.
ANY_RULE = "*"


class NotRecorded(Exception):
    """A rule asked for a fact the record does not hold: that decision cannot be
    replayed. ``what`` says which fact, in words."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Kept:
    """``history``, ``recent`` and ``reading`` as plans.standing.decide asks them, each
    answer kept for the record."""

    def __init__(
        self,
        history: Callable[[str], UnitHistory],
        recent: Callable[[Plan], list[str]],
        reading: Callable[[], Reading],
    ) -> None:
        self._history, self._recent, self._reading = history, recent, reading
        self.pasts: dict[str, UnitPast] = {}
        self.forbidden: list[str] | None = None
        self.read: Reading | None = None

    def history(self, unit: str) -> UnitHistory:
        try:
            past = self._history(unit)
        except UnreadableHistory as exc:
            if len(self.pasts) < MAX_UNITS:
                self.pasts[unit] = UnitPast(unit=unit, unreadable=exc.message[:MAX_LINE])
            raise
        if len(self.pasts) < MAX_UNITS:
            self.pasts[unit] = _past(unit, past)
        return past

    def recent(self, plan: Plan) -> list[str]:
        forbidden = self._recent(plan)
        if self.forbidden is None:
            self.forbidden = list(forbidden)
        return forbidden

    def reading(self) -> Reading:
        read = self._reading()
        self.read = read
        return read

    def facts(self) -> RuleFacts:
        """What was asked, as the record keeps it."""
        reading = None
        if self.read is not None:
            reading = [_unit_read(seen) for seen in list(self.read.units.values())[:MAX_UNITS]]
        recent = None
        if self.forbidden is not None:  # the first is the one a rule is refused with
            recent = [line[:MAX_LINE] for line in self.forbidden[:16]]
        return RuleFacts(recent=recent, history=list(self.pasts.values()), reading=reading)


class Recorded:
    """``history``, ``recent`` and ``reading`` of ``plan`` answered from ``facts`` as
    recorded."""

    def __init__(self, facts: RuleFacts, plan: Plan) -> None:
        self.facts, self.plan = facts, plan
        self.pasts = {past.unit: past for past in facts.history}

    def history(self, unit: str) -> UnitHistory:
        past = self.pasts.get(unit)
        if past is None:
            raise NotRecorded(f"{unit}'s history then")
        if past.unreadable:
            raise UnreadableHistory(past.unreadable)
        last = None
        if past.last_ran is not None and past.last_ended is not None:
            last = (past.last_ran, past.last_ended)
        approved: dict[str, tuple[datetime, ...]] = {}
        if past.approved:
            approved[ANY_RULE] = tuple(past.approved)
        return UnitHistory(past.in_flight, last, approved)

    def recent(self, plan: Plan) -> list[str]:
        if self.facts.recent is None:
            raise NotRecorded("what opsbot's recent plans forbade it then")
        return list(self.facts.recent)

    def reading(self) -> Reading:
        if self.facts.reading is None:
            raise NotRecorded("root's reading of its units then")
        read = {seen.unit: _unit_reading(seen) for seen in self.facts.reading}
        for unit in self.plan.units():
            if unit not in read:
                raise NotRecorded(f"root's reading of {unit} then")
        return Reading(read)


def _past(unit: str, past: UnitHistory) -> UnitPast:
    approved = sorted((at for ats in past.by_rule.values() for at in ats), reverse=True)
    last_ran, last_ended = past.last_ran if past.last_ran is not None else (None, None)
    return UnitPast(
        unit=unit,
        in_flight=past.in_flight,
        last_ran=last_ran,
        last_ended=PlanState(last_ended) if last_ended is not None else None,
        approved=approved[:MAX_APPROVALS_KEPT],
    )


def _unit_read(seen: UnitReading) -> UnitRead:
    return UnitRead(
        unit=seen.unit,
        active_state=seen.active_state[:64],
        sub_state=seen.sub_state[:64],
        result=seen.result[:64],
        invocation_id=seen.invocation_id[:64],
        targets=[
            TargetRead(name=t.name[:64], outcome=t.outcome[:64], error=t.error[:MAX_LINE])
            for t in seen.targets[:MAX_TARGETS]
        ],
        error=seen.error[:MAX_LINE],
    )


def _unit_reading(seen: UnitRead) -> UnitReading:
    return UnitReading(
        seen.unit,
        active_state=seen.active_state,
        sub_state=seen.sub_state,
        result=seen.result,
        invocation_id=seen.invocation_id,
        targets=tuple(TargetReading(t.name, t.outcome, t.error) for t in seen.targets),
        error=seen.error,
    )
