"""The bounded diagnosis loop: the policy proposes, this code decides.

:func:`run_diagnosis` asks the policy for one action per step and hands it to the
dispatcher (dispatch.py), which decides what happens to it. The loop's own rules:

* **Steps.** Every proposal is a step, whoever answers it, up to ``max_steps``. A batch
  of calls (``CallTools``, at most ``MAX_CALLS_PER_STEP``) is one step; calls beyond
  the bound are refused. On the last step the policy is shown no tools: it must finish
  with a plan or a note.
* **Tokens.** When the policy reports tokens and the run has used more than
  ``token_budget``, a tool call is no longer run and the run stops; a plan or a note
  proposed with the last tokens is still taken.
* **Cycles.** Once the dispatcher has withdrawn the tools (a call repeated three times),
  the policy is shown none, and a further tool call stops the run.
* **Observations** are redacted (built-in rules plus ``redact_patterns``), then cut to
  2000 characters. Each step's event says how many redactions were made.
* **Endings.** A note from the policy ends the run with that note; an accepted plan
  with the plan. Any other ending (step limit, token budget, cycle, the policy or the
  executor failing) is a note that says why, lists the evidence gathered (each tool
  called, one line on what it returned) and what is still unknown: never just an error.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import TypeAdapter, ValidationError

from diagnose_svc.actions import (
    Action,
    CallTool,
    CallTools,
    FinalNote,
    Policy,
    SubmitPlan,
    ToolSpec,
    Transcript,
    TriedPlan,
    Turn,
)
from diagnose_svc.errors import PolicyError, UsageError
from diagnose_svc.events import Event, EventSink, FinishedEvent, StartedEvent, StepEvent
from diagnose_svc.limits import EVENT_EXCERPT_LIMIT, MAX_CALLS_PER_STEP, SYMPTOM_LIMIT
from diagnose_svc.record import Recording
from diagnose_svc.redact import Redactor
from diagnose_svc.runtime.dispatch import Accepted, Answer, Dispatcher, Refused, clean
from diagnose_svc.runtime.evidence import Ledger
from diagnose_svc.submitter import Submitter
from diagnose_svc.tools import Tool, ToolContext
from diagnose_svc.verdict import EndedBy, NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings, UnitName, field_errors
from shared_schema.verdict import Cause

log = structlog.get_logger("diagnose_svc.runtime")

NOTE_LIMIT = 4000
_UNIT = TypeAdapter(UnitName)


def new_run_id() -> str:
    """A run id: UTC time and 8 random hex digits (``20261129-213500-1a2b3c4d``)."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def run_diagnosis(
    unit: str,
    symptom: str,
    policy: Policy,
    tools: Mapping[str, Tool],
    submitter: Submitter,
    settings: DiagnoseSettings,
    on_event: EventSink | None = None,
    *,
    run_id: str | None = None,
    context: ToolContext | None = None,
    tried: Sequence[TriedPlan] = (),
    recording: Recording | None = None,
) -> PlanVerdict | NoteVerdict:
    """Diagnose ``unit`` with ``policy`` over ``tools``; submit a plan through ``submitter``.

    ``settings`` is the ``[diagnose]`` section (shared_schema.DiagnoseSettings); ``tried``
    the plans that already ran and did not fix it (a follow-up diagnosis); ``recording``
    gathers what the run saw, for its record (diagnose_svc/record.py). Returns a
    Verdict; raises UsageError only for a unit name that is not one.
    """
    return _Run(
        unit=unit,
        symptom=symptom,
        policy=policy,
        tools=tools,
        submitter=submitter,
        settings=settings,
        on_event=on_event,
        run_id=run_id or new_run_id(),
        context=context or ToolContext(settings=settings),
        tried=tuple(tried),
        recording=recording,
    ).execute()


class _Run:
    def __init__(
        self,
        *,
        unit: str,
        symptom: str,
        policy: Policy,
        tools: Mapping[str, Tool],
        submitter: Submitter,
        settings: DiagnoseSettings,
        on_event: EventSink | None,
        run_id: str,
        context: ToolContext,
        tried: tuple[TriedPlan, ...] = (),
        recording: Recording | None = None,
    ) -> None:
        try:
            _UNIT.validate_python(unit)
        except ValidationError as exc:
            raise UsageError(
                "; ".join(e.message for e in field_errors(exc)) or f"bad unit name {unit!r}"
            ) from exc
        self.unit = unit
        self.symptom = clean(symptom, SYMPTOM_LIMIT).replace("\n", " ")
        self.policy = policy
        self.policy_name = str(getattr(policy, "name", type(policy).__name__))
        self.tools = tools
        self.specs: list[ToolSpec] = [tool.spec() for tool in tools.values()]
        self.settings = settings
        self.on_event = on_event
        self.run_id = run_id
        self.ledger = Ledger(Redactor(settings.redact_patterns))
        self.dispatch = Dispatcher(
            tools=tools,
            context=context,
            redactor=self.ledger.redactor,
            ledger=self.ledger,
            submitter=submitter,
            run_id=run_id,
            symptom=self.symptom,
            unit=unit,
            tried=tried,
            recording=recording,
        )
        self.recording = recording
        self.transcript = Transcript(unit=unit, symptom=self.symptom, tried=tried)
        self.step = 0
        self.tokens = 0

    # -- the loop ------------------------------------------------------------------------

    def execute(self) -> PlanVerdict | NoteVerdict:
        with structlog.contextvars.bound_contextvars(run_id=self.run_id):
            self._emit(
                StartedEvent(
                    run_id=self.run_id,
                    unit=self.unit,
                    symptom=self.symptom,
                    policy=self.policy_name,
                    max_steps=self.settings.max_steps,
                    token_budget=self.settings.token_budget,
                )
            )
            verdict = self._loop()
            if self.recording is not None:
                self.recording.saw(self.transcript.turns, self.policy_name, self.tools)
            self._emit(
                FinishedEvent(
                    run_id=self.run_id,
                    kind=verdict.kind,
                    ended_by=verdict.ended_by,
                    steps_used=verdict.steps_used,
                    tokens=verdict.tokens,
                    plan_id=verdict.plan_id if isinstance(verdict, PlanVerdict) else None,
                    sha256=verdict.sha256 if isinstance(verdict, PlanVerdict) else None,
                )
            )
            return verdict

    def _loop(self) -> PlanVerdict | NoteVerdict:
        max_steps = self.settings.max_steps
        budget = self.settings.token_budget
        while True:
            last_step = self.step + 1 >= max_steps
            withdrawn = self.dispatch.tools_withdrawn
            visible: Sequence[ToolSpec] = [] if withdrawn or last_step else self.specs
            try:
                proposal = self.policy.propose(self.transcript, list(visible))
            except PolicyError as exc:
                self.step += 1  # the policy was asked: that was a step, answered by an error
                return self._stopped(
                    "policy_error", f"The policy ({self.policy_name}) failed: {exc}."
                )
            self.step += 1
            step_tokens = max(0, proposal.prompt_tokens) + max(0, proposal.completion_tokens)
            self.tokens += step_tokens
            action = proposal.action

            if isinstance(action, FinalNote):
                text = clean(action.text, NOTE_LIMIT) or "(the policy finished with an empty note)"
                self._record(action, Answer(text, "policy"), step_tokens)
                return self._note("final_note", text, _cause(action.cause))

            if isinstance(action, CallTool | CallTools):
                calls = [action] if isinstance(action, CallTool) else list(action.calls)
                first = calls[0] if calls else CallTool(tool="(none)", args={})
                if self.tokens > budget:
                    why = (
                        f"The token budget of {budget} is used up ({self.tokens} tokens); "
                        f"the call of {first.tool} was not run."
                    )
                    self._record(first, self.dispatch.said(why, "runtime"), step_tokens)
                    return self._stopped("token_budget", why)
                if not visible:
                    if withdrawn:
                        why = (
                            "Tools were withdrawn after repeated identical calls, and the "
                            f"policy still called {first.tool}."
                        )
                        self._record(first, self.dispatch.said(why, "runtime"), step_tokens)
                        return self._stopped("cycle", why)
                    why = f"The step limit ({max_steps}) was reached without a conclusion."
                    self._record(first, self.dispatch.said(why, "runtime"), step_tokens)
                    return self._stopped("step_limit", why)
                self._calls(calls, step_tokens)
            elif isinstance(action, SubmitPlan):
                answer, ending = self.dispatch.submit(action)
                self._record(action, answer, step_tokens)
                if isinstance(ending, Accepted):
                    return PlanVerdict(
                        **self._verdict_fields(),
                        plan_id=ending.reply.plan_id,
                        sha256=ending.reply.sha256,
                        plan=ending.plan,
                    )
                if isinstance(ending, Refused):
                    if ending.ended_by == "plan_rejected":
                        return self._note(ending.ended_by, ending.why)
                    return self._stopped(ending.ended_by, ending.why)
            else:  # pragma: no cover - Action is a closed union
                raise TypeError(f"unknown action {action!r}")

            if self.tokens > budget:
                return self._stopped(
                    "token_budget",
                    f"The token budget of {budget} is used up ({self.tokens} tokens).",
                )
            if self.step >= max_steps:
                return self._stopped(
                    "step_limit", f"The step limit ({max_steps}) was reached without a conclusion."
                )

    def _calls(self, calls: list[CallTool], step_tokens: int) -> None:
        """One step's tool calls: each dispatched and recorded; the step's tokens are
        counted once, on its first call."""
        if not calls:
            empty = CallTool(tool="(none)", args={})
            self._record(
                empty,
                self.dispatch.said("Not run: the batch held no call.", "runtime"),
                step_tokens,
            )
            return
        answers = self.dispatch.call_many(calls[:MAX_CALLS_PER_STEP], self.step)
        for index, call in enumerate(calls):
            tokens = step_tokens if index == 0 else 0
            if index >= MAX_CALLS_PER_STEP:
                why = (
                    f"Not run: a step may carry at most {MAX_CALLS_PER_STEP} calls; call "
                    f"{call.tool} again in the next step if it is still needed."
                )
                self._record(call, self.dispatch.said(why, "runtime"), tokens)
                continue
            self._record(call, answers[index], tokens)

    # -- recording -----------------------------------------------------------------------

    def _record(self, action: Action, answer: Answer, step_tokens: int) -> None:
        self.transcript.turns.append(
            Turn(
                step=self.step,
                action=action,
                observation=answer.observation,
                decided_by=answer.decided_by,
                tool_call_id=f"call_{self.step}",
            )
        )
        self._emit(
            StepEvent(
                run_id=self.run_id,
                step=self.step,
                decided_by=answer.decided_by,
                action=action.kind,
                tool=action.tool if isinstance(action, CallTool) else None,
                args_sha256=answer.digest,
                result_excerpt=answer.observation[:EVENT_EXCERPT_LIMIT],
                summary=answer.summary if answer.summary is not None else answer.observation[:200],
                tokens=step_tokens,
                redactions=answer.redactions,
            )
        )

    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)
        fields = event.model_dump(mode="json")
        name = fields.pop("event")
        log.info(name, **fields)

    # -- endings -------------------------------------------------------------------------

    def _verdict_fields(self) -> dict[str, Any]:
        """What every verdict says about the run, however it ended."""
        return {
            "run_id": self.run_id,
            "unit": self.unit,
            "steps_used": self.step,
            "tokens": self.tokens,
            "evidence": self.ledger.evidence,
        }

    def _note(self, ended_by: EndedBy, text: str, cause: Cause | None = None) -> NoteVerdict:
        if cause is None and ended_by != "final_note":
            cause = Cause(kind="unknown", unit=self.unit, fact=text.splitlines()[0][:300])
        return NoteVerdict(**self._verdict_fields(), ended_by=ended_by, text=text, cause=cause)

    def _stopped(self, ended_by: EndedBy, why: str) -> NoteVerdict:
        lines = [why, "", "Evidence gathered:"]
        lines += [f"- {item.line()}" for item in self.ledger.evidence] or [
            "- none: no tool was run"
        ]
        lines += ["", "Unknown:"]
        lines += [
            f"- {item}" for item in self.ledger.unknown(self.unit, self.settings, self.tools)
        ] or ["- nothing listed: the evidence above was gathered, but no conclusion was reached"]
        return self._note(ended_by, clean("\n".join(lines), NOTE_LIMIT))


def _cause(raw: Any) -> Cause | None:
    """The policy's cause, if it is one (shared_schema.verdict.Cause); else none."""
    if raw is None:
        return None
    try:
        cause = Cause.model_validate(dict(raw))
    except (ValidationError, TypeError, ValueError):
        log.info("diagnose.cause_dropped", cause=str(raw)[:200])
        return None
    return cause.model_copy(update={"fact": clean(cause.fact, 500).replace("\n", " ")})
