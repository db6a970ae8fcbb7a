"""The Policy protocol's side of the runbook: each turn, read the transcript afresh, ask
for the reads still lacking (several at once), or decide; a refused plan, or the same
steps tried before, is handed to a human."""

from __future__ import annotations

from collections.abc import Sequence

from diagnose_svc.actions import (
    Action,
    CallTool,
    CallTools,
    Proposal,
    SubmitPlan,
    ToolSpec,
    Transcript,
)
from diagnose_svc.policies.findings import Findings, read_findings
from diagnose_svc.policies.runbook import decision, reads
from diagnose_svc.policies.runbook.notes import note, restarts_not_fixing
from diagnose_svc.policies.runbook.reads import Read
from shared_schema import DiagnoseSettings
from shared_schema.plan import RESTART_BUDGET, TRIED_BEFORE


class RunbookPolicy:
    """The deterministic policy: a readable decision over the service graph's facts."""

    name = "runbook"

    def __init__(self, settings: DiagnoseSettings) -> None:
        self.settings = settings
        #: The read tools this run offers (remembered: the last step is shown none).
        self.available: set[str] = set()

    # -- the Policy protocol -------------------------------------------------------------

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        found = read_findings(transcript)
        self.available |= {tool.name for tool in tools}
        if found.plan_refused is not None:
            # The runbook has one answer per situation; a refused plan is for a human.
            refused = found.plan_refused
            if RESTART_BUDGET in refused or TRIED_BEFORE in refused:
                about = _refused_unit(transcript, refused)
                return Proposal(restarts_not_fixing(about, refused, transcript))
            kind = "not_allowed" if "may not touch" in refused else "unknown"
            return Proposal(
                note(
                    "The runbook's plan was not taken: "
                    + found.plan_refused
                    + "\nThe runbook has no other plan; a human must decide.",
                    kind=kind,
                    unit=transcript.unit,
                )
            )
        available = {tool.name for tool in tools}
        if available:
            wanted = self.next_reads(transcript.unit, found, available)
            if len(wanted) == 1:
                return Proposal(CallTool(tool=wanted[0].tool, args=wanted[0].args))
            if wanted:
                calls = tuple(CallTool(tool=r.tool, args=r.args) for r in wanted)
                return Proposal(CallTools(calls=calls))
        action = self.decide(transcript.unit, found)
        if isinstance(action, SubmitPlan):
            sequence = tuple((s["tool"], s["args"]["unit"]) for s in action.plan["steps"])
            for tried in transcript.tried:
                if tried.steps == sequence:
                    why = f"the same steps were tried: {tried.line()}"
                    return Proposal(restarts_not_fixing(transcript.unit, why, transcript))
        return Proposal(action)

    # -- what to read (reads.py), what to do (decision.py) -------------------------------

    def next_reads(self, unit: str, found: Findings, available: set[str]) -> list[Read]:
        """The wanted reads not yet made, among the tools available, for one step."""
        return reads.next_reads(self.settings, unit, found, available)

    def decide(self, unit: str, found: Findings) -> Action:
        """The conclusion from the evidence at hand: a plan, or a note for a human."""
        return decision.decide(self.settings, self.available, unit, found)


def _refused_unit(transcript: Transcript, refused: str) -> str:
    """The unit a refusal is about: the first unit of the refused plan its words name
    (a budget spent on a dependency is that dependency's, never the entry's); steps
    tried before are about the unit they act on first."""
    for turn in reversed(transcript.turns):
        if isinstance(turn.action, SubmitPlan):
            units = [s["args"]["unit"] for s in turn.action.plan.get("steps", [])]
            named = [u for u in units if u in refused]
            if not named and TRIED_BEFORE in refused:
                named = units
            return named[0] if named else transcript.unit
    return transcript.unit
