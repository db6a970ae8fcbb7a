"""The bounded diagnosis loop: the policy proposes, this code decides.

:func:`run_diagnosis` asks the policy for one action per step and decides what happens
to it. The rules, in the order they apply:

* **Steps.** Every proposal is a step, whoever answers it, up to ``max_steps``. On the
  last step the policy is shown no tools: it must finish with a plan or a note.
* **Tokens.** When the policy reports tokens and the run has used more than
  ``token_budget``, a tool call is no longer run and the run stops; a plan or a note
  proposed with the last tokens is still taken.
* **Dispatch.** A write tool's name (``shared_schema.WRITE_TOOLS``) or an unknown name is
  answered with an error observation by the runtime; it still counts as a step.
  Arguments are validated by the tool's model; a tool's error (``ToolError``) is an
  observation too, never an exception out of the loop.
* **Cycles, in stages.** A call identical to an earlier one (same tool, same canonical
  arguments) is not run again: the second is answered with a nudge, the third withdraws
  the tools (the policy is then shown none and must finish; if it still calls a tool the
  run stops).
* **Observations** are redacted (built-in rules plus ``redact_patterns``), then cut to
  2000 characters. Each step's event says how many redactions were made.
* **Plans.** A plan is validated with ``shared_schema.parse_plan`` (field errors go back
  to the policy, decided by the validator); then the readiness rule: every unit the
  plan touches must have been read with ``read_unit_status`` in this run (otherwise the
  policy is told which units lack evidence); then it is submitted. REVISE goes back to
  the policy; REJECT ends the run with a note; only ACCEPT ends it with a plan id.
* **Endings.** A note from the policy ends the run with that note. Any other ending
  (step limit, token budget, cycle, the policy or the executor failing) is a note that
  says why, lists the evidence gathered (each tool called, one line on what it returned)
  and what is still unknown: never just an error.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import structlog
from pydantic import TypeAdapter, ValidationError

from diagnose_svc.actions import (
    Action,
    CallTool,
    FinalNote,
    Policy,
    SubmitPlan,
    ToolSpec,
    Transcript,
    Turn,
)
from diagnose_svc.errors import DiagnoseError, ExecutorError, PolicyError, UsageError
from diagnose_svc.events import Event, EventSink, FinishedEvent, StartedEvent, StepEvent
from diagnose_svc.limits import EVENT_EXCERPT_LIMIT, SYMPTOM_LIMIT
from diagnose_svc.observation import error_text, note_text, output_text
from diagnose_svc.redact import Redactor
from diagnose_svc.submitter import Submitter
from diagnose_svc.tools import Tool, ToolArgs, ToolContext, ToolOutput
from diagnose_svc.verdict import EndedBy, Evidence, NoteVerdict, PlanVerdict
from shared_schema import (
    WRITE_TOOLS,
    Accept,
    DiagnoseSettings,
    Plan,
    Reject,
    UnitName,
    canonical_json,
    field_errors,
    parse_plan,
    sha256_hex,
)
from shared_schema.text import printable

log = structlog.get_logger(__name__)

#: The tool whose successful answer counts as evidence that a unit was looked at.
READINESS_TOOL = "read_unit_status"
NOTE_LIMIT = 4000

DecidedBy = Literal["policy", "runtime", "validator"]
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
) -> PlanVerdict | NoteVerdict:
    """Diagnose ``unit`` with ``policy`` over ``tools``; submit a plan through ``submitter``.

    ``settings`` is the ``[diagnose]`` section (shared_schema.DiagnoseSettings). Returns
    a Verdict; raises UsageError only for a unit name that is not one.
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
    ).execute()


def _clean(text: str, limit: int) -> str:
    """Free text for an operator's terminal: control characters shown, newlines kept."""
    lines = [printable(line) for line in text.replace("\r\n", "\n").split("\n")]
    cleaned = "\n".join(lines)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _args_digest(args: Any) -> str:
    try:
        return sha256_hex(canonical_json(args))
    except (TypeError, ValueError):
        return sha256_hex(repr(args).encode("utf-8", errors="replace"))


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
    ) -> None:
        try:
            _UNIT.validate_python(unit)
        except ValidationError as exc:
            raise UsageError(
                "; ".join(e.message for e in field_errors(exc)) or f"bad unit name {unit!r}"
            ) from exc
        self.unit = unit
        self.symptom = _clean(symptom, SYMPTOM_LIMIT).replace("\n", " ")
        self.policy = policy
        self.policy_name = str(getattr(policy, "name", type(policy).__name__))
        self.tools = tools
        self.specs: list[ToolSpec] = [tool.spec() for tool in tools.values()]
        self.submitter = submitter
        self.settings = settings
        self.on_event = on_event
        self.run_id = run_id
        self.context = context
        self.redactor = Redactor(settings.redact_patterns)
        self.transcript = Transcript(unit=unit, symptom=self.symptom)
        self.step = 0
        self.tokens = 0
        self.evidence: list[Evidence] = []
        self.calls: Counter[str] = Counter()
        self.first_call: dict[str, int] = {}
        self.tools_withdrawn = False
        # What was looked at, for the readiness rule and the "unknown" list.
        self.units_read: set[str] = set()
        self.journals_read: set[str] = set()
        self.targets_probed: set[str] = set()
        self.pointed_at: dict[str, None] = {}

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
            visible: Sequence[ToolSpec] = [] if self.tools_withdrawn or last_step else self.specs
            try:
                proposal = self.policy.propose(self.transcript, list(visible))
            except PolicyError as exc:
                return self._stopped(
                    "policy_error", f"The policy ({self.policy_name}) failed: {exc}."
                )
            self.step += 1
            step_tokens = max(0, proposal.prompt_tokens) + max(0, proposal.completion_tokens)
            self.tokens += step_tokens
            action = proposal.action

            if isinstance(action, FinalNote):
                text = _clean(action.text, NOTE_LIMIT) or "(the policy finished with an empty note)"
                self._record(action, text, "policy", step_tokens, 0)
                return self._note("final_note", text)

            if isinstance(action, CallTool):
                if self.tokens > budget:
                    why = (
                        f"The token budget of {budget} is used up ({self.tokens} tokens); "
                        f"the call of {action.tool} was not run."
                    )
                    self._answer(action, why, "runtime", step_tokens)
                    return self._stopped("token_budget", why)
                if not visible:
                    if self.tools_withdrawn:
                        why = (
                            "Tools were withdrawn after repeated identical calls, and the "
                            f"policy still called {action.tool}."
                        )
                        self._answer(action, why, "runtime", step_tokens)
                        return self._stopped("cycle", why)
                    why = f"The step limit ({max_steps}) was reached without a conclusion."
                    self._answer(action, why, "runtime", step_tokens)
                    return self._stopped("step_limit", why)
                self._call(action, step_tokens)
            elif isinstance(action, SubmitPlan):
                verdict = self._submit(action, step_tokens)
                if verdict is not None:
                    return verdict
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

    # -- tool calls ----------------------------------------------------------------------

    def _call(self, action: CallTool, step_tokens: int) -> None:
        name = action.tool
        raw: dict[str, Any] = dict(action.args)
        tool = self.tools.get(name)
        parsed: ToolArgs | None = None
        bad_args: DiagnoseError | None = None
        if tool is not None:
            try:
                parsed = tool.parse_args(raw)
            except DiagnoseError as exc:
                bad_args = exc
        shown_args = parsed.model_dump(mode="json") if parsed is not None else raw
        digest = _args_digest(shown_args)
        key = f"{name}\x00{digest}"
        self.calls[key] += 1
        self.first_call.setdefault(key, self.step)
        repeat = self.calls[key]

        if repeat == 2:
            text = (
                f"Not run: {name} was already called with these arguments at step "
                f"{self.first_call[key]}, and its answer is above. Calling it again gives no "
                "new evidence. Call a different tool, submit a plan, or finish with a note."
            )
            self._answer(action, text, "runtime", step_tokens, digest)
        elif repeat >= 3:
            self.tools_withdrawn = True
            text = (
                f"Not run: {name} was called {repeat} times with the same arguments. Tools "
                "are withdrawn: finish now with a plan (submit_plan) or a note (final_note)."
            )
            self._answer(action, text, "runtime", step_tokens, digest)
        elif name in WRITE_TOOLS:
            text = (
                f"Refused: {name} is a write tool, and diagnosis may only read. To change "
                f"something, submit a plan whose steps use {name}; an operator approves it "
                "before the executor runs it."
            )
            self._answer(action, text, "runtime", step_tokens, digest)
        elif tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            text = f"Refused: there is no tool named {name!r}. Available tools: {known}."
            self._answer(action, text, "runtime", step_tokens, digest)
        elif bad_args is not None or parsed is None:
            assert bad_args is not None
            self._tool_error(action, shown_args, bad_args, step_tokens, digest)
        else:
            self._run_tool(action, tool, parsed, shown_args, step_tokens, digest)

    def _run_tool(
        self,
        action: CallTool,
        tool: Tool,
        args: ToolArgs,
        shown_args: dict[str, Any],
        step_tokens: int,
        digest: str,
    ) -> None:
        try:
            output = tool(args, self.context)
        except DiagnoseError as exc:
            self._tool_error(action, shown_args, exc, step_tokens, digest)
            return
        except Exception as exc:  # a bug in a tool must not end the run
            log.exception("diagnose.tool_crashed", tool=tool.name)
            error = DiagnoseError(f"{tool.name} failed unexpectedly: {type(exc).__name__}: {exc}")
            self._tool_error(action, shown_args, error, step_tokens, digest)
            return
        text, redactions = output_text(output, self.redactor)
        self._note_looked_at(tool.name, shown_args, output)
        # The summary is made from the same output: its redactions are not counted again.
        summary, _ = self.redactor.text(printable(output.summary()))
        self._add_evidence(tool.name, shown_args, summary, error=False)
        self._record(action, text, "policy", step_tokens, redactions, digest)

    def _tool_error(
        self,
        action: CallTool,
        shown_args: dict[str, Any],
        error: DiagnoseError,
        step_tokens: int,
        digest: str,
    ) -> None:
        text, redactions = error_text(error.message, error.hint, self.redactor)
        summary, _ = self.redactor.text(printable(f"error: {error.message}"))
        self._add_evidence(action.tool, shown_args, summary, error=True)
        if action.tool == "tail_journal" and isinstance(shown_args.get("unit"), str):
            self.journals_read.add(shown_args["unit"])
        self._record(action, text, "policy", step_tokens, redactions, digest)

    def _note_looked_at(self, tool: str, args: dict[str, Any], output: ToolOutput) -> None:
        unit = args.get("unit")
        if tool == READINESS_TOOL and isinstance(unit, str):
            self.units_read.add(unit)
            named = getattr(output, "unit", None)
            if isinstance(named, str) and named:
                self.units_read.add(named)
        elif tool == "tail_journal" and isinstance(unit, str):
            self.journals_read.add(unit)
        elif tool == "http_get_health" and isinstance(args.get("target"), str):
            self.targets_probed.add(args["target"])
        for related in output.related_units():
            self.pointed_at.setdefault(related, None)

    def _add_evidence(self, tool: str, args: dict[str, Any], summary: str, *, error: bool) -> None:
        shown, _ = self.redactor.value(args)
        self.evidence.append(
            Evidence(step=self.step, tool=tool, args=shown, summary=summary[:300], error=error)
        )

    # -- plans ---------------------------------------------------------------------------

    def _submit(self, action: SubmitPlan, step_tokens: int) -> PlanVerdict | NoteVerdict | None:
        raw: dict[str, Any] = dict(action.plan)
        digest = _args_digest(raw)
        parsed = parse_plan(raw)
        if not isinstance(parsed, Plan):
            problems = "\n".join(f"- {error}" for error in parsed)
            text = (
                "The plan is not valid; nothing was submitted. Fix these and submit again:\n"
                + problems
            )
            self._answer(action, text, "validator", step_tokens, digest)
            return None
        digest = parsed.fingerprint()
        missing = [unit for unit in parsed.units() if unit not in self.units_read]
        if missing:
            text = (
                "Not submitted: no evidence for "
                + ", ".join(missing)
                + ". A plan may only act on units read with read_unit_status in this run; "
                "read them first."
            )
            self._answer(action, text, "runtime", step_tokens, digest)
            return None
        body = parsed.model_dump(mode="json", exclude_none=True)
        try:
            reply = self.submitter.submit(body, self.run_id, self.symptom)
        except ExecutorError as exc:
            why = f"The plan could not be submitted: {exc}."
            self._answer(action, why, "runtime", step_tokens, digest)
            plan_json = canonical_json(body).decode("utf-8")
            return self._stopped("executor_error", f"{why}\nThe plan was: {plan_json}")
        if isinstance(reply, Accept):
            if reply.sha256 != parsed.fingerprint():
                log.warning(
                    "diagnose.fingerprint_mismatch",
                    plan_id=reply.plan_id,
                    ours=parsed.fingerprint(),
                    executors=reply.sha256,
                )
            self._record(action, f"ACCEPT {reply.plan_id}", "policy", step_tokens, 0, digest)
            return PlanVerdict(
                **self._verdict_fields(),
                plan_id=reply.plan_id,
                sha256=reply.sha256,
                plan=parsed,
            )
        if isinstance(reply, Reject):
            reason = _clean(reply.reason, 500)
            self._answer(action, f"REJECT: {reason}", "validator", step_tokens, digest)
            return self._note("plan_rejected", f"The executor rejected the plan: {reason}")
        problems = "\n".join(f"- {error}" for error in reply.errors)
        text = f"The executor asked for a revision (REVISE); nothing was stored:\n{problems}"
        self._answer(action, text, "validator", step_tokens, digest)
        return None

    # -- recording -----------------------------------------------------------------------

    def _answer(
        self,
        action: Action,
        text: str,
        decided_by: DecidedBy,
        step_tokens: int,
        digest: str | None = None,
    ) -> None:
        shown, redactions = note_text(text, self.redactor)
        self._record(action, shown, decided_by, step_tokens, redactions, digest)

    def _record(
        self,
        action: Action,
        observation: str,
        decided_by: DecidedBy,
        step_tokens: int,
        redactions: int,
        digest: str | None = None,
    ) -> None:
        self.transcript.turns.append(
            Turn(
                step=self.step,
                action=action,
                observation=observation,
                decided_by=decided_by,
                tool_call_id=f"call_{self.step}",
            )
        )
        self._emit(
            StepEvent(
                run_id=self.run_id,
                step=self.step,
                decided_by=decided_by,
                action=action.kind,
                tool=action.tool if isinstance(action, CallTool) else None,
                args_sha256=digest,
                result_excerpt=observation[:EVENT_EXCERPT_LIMIT],
                summary=(
                    self.evidence[-1].summary
                    if self.evidence and self.evidence[-1].step == self.step
                    else observation[:200]
                ),
                tokens=step_tokens,
                redactions=redactions,
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
            "evidence": self.evidence,
        }

    def _note(self, ended_by: EndedBy, text: str) -> NoteVerdict:
        return NoteVerdict(**self._verdict_fields(), ended_by=ended_by, text=text)

    def _unknown(self) -> list[str]:
        out: list[str] = []
        if self.unit not in self.units_read:
            out.append(f"the state of {self.unit} (read_unit_status was not called for it)")
        if self.unit not in self.journals_read:
            out.append(f"the journal of {self.unit} (tail_journal was not called for it)")
        for name, target in sorted(self.settings.health.items()):
            if target.unit == self.unit and name not in self.targets_probed:
                out.append(
                    f"health target {name} ({target.url}), served by {self.unit}: not probed"
                )
        for unit in self.pointed_at:
            if unit not in self.units_read and unit != self.unit:
                out.append(f"the state of {unit}, which the evidence points at: not read")
        return out

    def _stopped(self, ended_by: EndedBy, why: str) -> NoteVerdict:
        lines = [why, "", "Evidence gathered:"]
        lines += [f"- {item.line()}" for item in self.evidence] or ["- none: no tool was run"]
        lines += ["", "Unknown:"]
        lines += [f"- {item}" for item in self._unknown()] or [
            "- nothing listed: the evidence above was gathered, but no conclusion was reached"
        ]
        return self._note(ended_by, _clean("\n".join(lines), NOTE_LIMIT))
