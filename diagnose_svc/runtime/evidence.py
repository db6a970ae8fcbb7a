"""What a run has looked at: the evidence list of its verdict, and the ledger that the
readiness rule and a note's "unknown" list are made from.

Every tool call that was run adds one :class:`Evidence` line (the tool, its arguments,
one line on what it returned or the error). A call also leaves a :class:`Look` (a kind
of evidence about a subject, as the tool's argument model declares it): ``tried`` when
the call was made, ``answered`` when it returned. Units an output points at (a failed
dependency, the unit behind a health target) are kept in the order they came up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnose_svc.redact import Redactor
from diagnose_svc.tools import EVIDENCE_WORDS, EvidenceKind, Tool, ToolArgs, ToolOutput
from diagnose_svc.verdict import Evidence
from shared_schema import DiagnoseSettings

SUMMARY_LIMIT = 300


@dataclass(frozen=True)
class Look:
    kind: EvidenceKind
    subject: str


@dataclass
class Ledger:
    """The evidence of one run (see the module docstring)."""

    redactor: Redactor
    evidence: list[Evidence] = field(default_factory=list)
    tried: set[Look] = field(default_factory=set)
    answered: set[Look] = field(default_factory=set)
    pointed_at: dict[str, None] = field(default_factory=dict)
    #: Health targets that failed at some look of this run, with the unit each is served
    #: by ("" for none): the symptom a plan carries is made of these.
    failing_health: dict[str, str] = field(default_factory=dict)
    #: systemd's Result= of each unit, as the first look of this run read it: how the
    #: unit's last run ended, the kind of cause a plan's symptom carries.
    results: dict[str, str] = field(default_factory=dict)

    def _add(self, step: int, tool: str, args: dict[str, Any], summary: str, error: bool) -> None:
        shown, _ = self.redactor.value(args)
        self.evidence.append(
            Evidence(step=step, tool=tool, args=shown, summary=summary[:SUMMARY_LIMIT], error=error)
        )

    def answer(
        self,
        step: int,
        tool: str,
        args: ToolArgs,
        shown_args: dict[str, Any],
        output: ToolOutput,
        summary: str,
    ) -> None:
        """A call that returned ``output``."""
        subject = args.subject()
        if args.gives is not None and subject is not None:
            for name in (subject, *output.established()):
                self.tried.add(Look(args.gives, name))
                self.answered.add(Look(args.gives, name))
        for unit in output.related_units():
            self.pointed_at.setdefault(unit, None)
        failing = output.failing_target()
        if failing:
            self.failing_health.setdefault(*failing)
        result = output.unit_result()
        if result:
            self.results.setdefault(*result)
        self._add(step, tool, shown_args, summary, error=False)

    def error(
        self,
        step: int,
        tool: str,
        args: ToolArgs | None,
        shown_args: dict[str, Any],
        summary: str,
    ) -> None:
        """A call that was made and failed (``args`` None: its arguments did not validate)."""
        subject = args.subject() if args is not None else None
        if args is not None and args.gives is not None and subject is not None:
            self.tried.add(Look(args.gives, subject))
        self._add(step, tool, shown_args, summary, error=True)

    def lacking_state(self, units: list[str]) -> list[str]:
        """Which of ``units`` no call has read the state of (the readiness rule)."""
        return [unit for unit in units if Look("state", unit) not in self.answered]

    def unknown(
        self, unit: str, settings: DiagnoseSettings, tools: Mapping[str, Tool]
    ) -> list[str]:
        """What a note should say is still unknown about ``unit`` and what it points at."""

        def giving(kind: EvidenceKind) -> str:
            names = sorted(name for name, tool in tools.items() if tool.gives == kind)
            return " or ".join(names) or "no tool of this run reads it"

        out: list[str] = []
        kinds: tuple[EvidenceKind, ...] = ("state", "journal")
        for kind in kinds:
            if Look(kind, unit) not in self.tried:
                out.append(f"{EVIDENCE_WORDS[kind]} {unit} ({giving(kind)} was not called for it)")
        for name, target in sorted(settings.health.items()):
            if target.unit == unit and Look("health", name) not in self.tried:
                out.append(
                    f"{EVIDENCE_WORDS['health']} {name} ({target.url}), served by {unit}: "
                    "not probed"
                )
        for other in self.pointed_at:
            if other != unit and Look("state", other) not in self.answered:
                out.append(
                    f"{EVIDENCE_WORDS['state']} {other}, which the evidence points at: not read"
                )
        return out
