"""What happens to one action of the policy: the runtime decides, the policy only asks.

* **A tool call.** A call identical to an earlier one (same tool, same canonical
  arguments) is not run again: the second is answered with a nudge, the third withdraws
  the tools. A write tool's name (``shared_schema.WRITE_TOOLS``) or an unknown name is
  refused. Arguments are validated by the tool's model; a tool's error (any
  ``OpsbotError``) is an observation, never an exception out of the loop. Only then does
  the tool run, and its output is redacted and cut before the policy sees it.
* **A plan.** Validated with ``shared_schema.parse_plan`` (field errors go back to the
  policy, decided by the validator); then the readiness rule: every unit the plan touches
  must have had its state read in this run; then submitted. REVISE goes back to the
  policy; REJECT and an executor that cannot be asked end the run; ACCEPT ends it with
  the plan.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from diagnose_svc.actions import CallTool, SubmitPlan, TriedPlan
from diagnose_svc.errors import DiagnoseError, ExecutorError
from diagnose_svc.observation import error_text, note_text, output_data, shown
from diagnose_svc.record import Recording
from diagnose_svc.redact import Redactor
from diagnose_svc.runtime.evidence import SUMMARY_LIMIT, Ledger
from diagnose_svc.submitter import Submitter
from diagnose_svc.tools import Tool, ToolArgs, ToolContext, ToolOutput
from shared_io.errors import OpsbotError
from shared_schema import WRITE_TOOLS, Accept, Plan, Reject, canonical_json, parse_plan, sha256_hex
from shared_schema.plan import SYSTEMD_RESULTS
from shared_schema.text import printable

log = structlog.get_logger("diagnose_svc.runtime")

DecidedBy = Literal["policy", "runtime", "validator"]


@dataclass(frozen=True)
class _Pending:
    """A call that passed every check and may run."""

    tool: Tool
    args: ToolArgs
    shown_args: dict[str, Any]
    digest: str


def _asked(pending: list[_Pending]) -> dict[str, tuple[str, ...]]:
    """The units the calls of one step ask about, by tool."""
    asked: dict[str, list[str]] = {}
    for p in pending:
        unit = getattr(p.args, "unit", None)
        if isinstance(unit, str):
            asked.setdefault(p.tool.name, []).append(unit)
    return {tool: tuple(units) for tool, units in asked.items()}


def _outcome(pending: _Pending, context: ToolContext) -> ToolOutput | BaseException:
    try:
        return pending.tool(pending.args, context)
    except Exception as exc:
        return exc


@dataclass(frozen=True)
class Answer:
    """What the policy is shown for one action, and who decided it."""

    observation: str
    decided_by: DecidedBy
    redactions: int = 0
    digest: str | None = None
    #: One line on what a tool found (its evidence line), when a tool was run.
    summary: str | None = None


@dataclass(frozen=True)
class Accepted:
    """The executor took the plan."""

    reply: Accept
    plan: Plan


@dataclass(frozen=True)
class Refused:
    """The run must end without a plan: ``ended_by`` and why."""

    ended_by: Literal["plan_rejected", "executor_error"]
    why: str


def args_digest(args: Any) -> str:
    try:
        return sha256_hex(canonical_json(args))
    except (TypeError, ValueError):
        return sha256_hex(repr(args).encode("utf-8", errors="replace"))


def clean(text: str, limit: int) -> str:
    """Free text for an operator's terminal: control characters shown, newlines kept."""
    lines = [printable(line) for line in text.replace("\r\n", "\n").split("\n")]
    cleaned = "\n".join(lines)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


class Dispatcher:
    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        context: ToolContext,
        redactor: Redactor,
        ledger: Ledger,
        submitter: Submitter,
        run_id: str,
        symptom: str,
        unit: str = "",
        tried: tuple[TriedPlan, ...] = (),
        recording: Recording | None = None,
    ) -> None:
        self.unit = unit
        #: Where each tool's answer and each submit's reply are kept for a replay.
        self.recording = recording
        self.tried = tried
        self.tools = tools
        self.context = context
        self.redactor = redactor
        self.ledger = ledger
        self.submitter = submitter
        self.run_id = run_id
        self.symptom = symptom
        self.calls: Counter[str] = Counter()
        self.first_call: dict[str, int] = {}
        #: Set once a call was repeated a third time: the policy must finish.
        self.tools_withdrawn = False

    def said(self, text: str, decided_by: DecidedBy, digest: str | None = None) -> Answer:
        """An answer in the runtime's or the validator's words, redacted and cut."""
        shown, redactions = note_text(text, self.redactor)
        return Answer(shown, decided_by, redactions, digest)

    # -- tool calls ----------------------------------------------------------------------

    def call(self, action: CallTool, step: int) -> Answer:
        """Answer one tool call (see the module docstring)."""
        return self.call_many([action], step)[0]

    def call_many(self, actions: list[CallTool], step: int) -> list[Answer]:
        """Answer the calls of one step, in order. The calls that may run, run at once,
        each in a thread of its own (read tools are independent and only read): a step of
        six health probes takes as long as the slowest, not as long as all six. A step is
        one moment: what two of its calls read alike (the socket dump) is read once."""
        checked = [self._check(action, step) for action in actions]
        pending = [c for c in checked if isinstance(c, _Pending)]
        outcomes: dict[int, ToolOutput | BaseException] = {}
        # What several calls read alike is read once.
        context = self.context.step(asked=_asked(pending))
        if len(pending) == 1:
            outcomes[id(pending[0])] = _outcome(pending[0], context)
        elif pending:
            with ThreadPoolExecutor(max_workers=len(pending)) as pool:
                futures = {
                    id(p): pool.submit(contextvars.copy_context().run, _outcome, p, context)
                    for p in pending
                }
                outcomes = {key: future.result() for key, future in futures.items()}
        return [
            c if isinstance(c, Answer) else self._finish(c, outcomes[id(c)], step) for c in checked
        ]

    def _check(self, action: CallTool, step: int) -> Answer | _Pending:
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
        digest = args_digest(shown_args)
        key = f"{name}\x00{digest}"
        self.calls[key] += 1
        self.first_call.setdefault(key, step)
        repeat = self.calls[key]

        if repeat == 2:
            return self.said(
                f"Not run: {name} was already called with these arguments at step "
                f"{self.first_call[key]}, and its answer is above. Calling it again gives no "
                "new evidence. Call a different tool, submit a plan, or finish with a note.",
                "runtime",
                digest,
            )
        if repeat >= 3:
            self.tools_withdrawn = True
            return self.said(
                f"Not run: {name} was called {repeat} times with the same arguments. Tools "
                "are withdrawn: finish now with a plan (submit_plan) or a note (final_note).",
                "runtime",
                digest,
            )
        if name in WRITE_TOOLS:
            return self.said(
                f"Refused: {name} is a write tool, and diagnosis may only read. To change "
                f"something, submit a plan whose steps use {name}; an operator approves it "
                "before the executor runs it.",
                "runtime",
                digest,
            )
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return self.said(
                f"Refused: there is no tool named {name!r}. Available tools: {known}.",
                "runtime",
                digest,
            )
        if parsed is None:
            assert bad_args is not None
            return self._tool_error(tool.name, None, shown_args, bad_args, step, digest)
        return _Pending(tool, parsed, shown_args, digest)

    def _finish(self, pending: _Pending, outcome: ToolOutput | BaseException, step: int) -> Answer:
        tool, args, shown_args, digest = (
            pending.tool,
            pending.args,
            pending.shown_args,
            pending.digest,
        )
        if isinstance(outcome, BaseException) and not isinstance(outcome, OpsbotError):
            # A bug in a tool must not end the run.
            log.error("diagnose.tool_crashed", tool=tool.name, error=repr(outcome))
            outcome = DiagnoseError(
                f"{tool.name} failed unexpectedly: {type(outcome).__name__}: {outcome}"
            )
        if isinstance(outcome, OpsbotError):
            if self.recording is not None:
                message, _ = self.redactor.text(outcome.message)
                hint = self.redactor.text(outcome.hint)[0] if outcome.hint else None
                self.recording.failed(tool.name, digest, shown_args, message, hint)
            return self._tool_error(tool.name, args, shown_args, outcome, step, digest)
        data, redactions = output_data(outcome, self.redactor)
        if self.recording is not None:
            self.recording.answered(tool.name, digest, shown_args, data)
        text = shown(data)
        # The summary is made from the same output: its redactions are not counted again.
        summary, _ = self.redactor.text(printable(outcome.summary()))
        self.ledger.answer(step, tool.name, args, shown_args, outcome, summary)
        return Answer(text, "policy", redactions, digest, summary[:SUMMARY_LIMIT])

    def _tool_error(
        self,
        name: str,
        args: ToolArgs | None,
        shown_args: dict[str, Any],
        error: OpsbotError,
        step: int,
        digest: str,
    ) -> Answer:
        text, redactions = error_text(error.message, error.hint, self.redactor)
        summary, _ = self.redactor.text(printable(f"error: {error.message}"))
        self.ledger.error(step, name, args, shown_args, summary)
        return Answer(text, "policy", redactions, digest, summary[:SUMMARY_LIMIT])

    # -- plans ---------------------------------------------------------------------------

    def marks(self, plan: Mapping[str, Any]) -> dict[str, Any]:
        """What code, not the policy, writes into every plan: the symptom it is meant to
        cure (the unit asked about and the health targets that failed in this run,
        served by that unit, by a unit the plan acts on, or by none: a target of a unit
        failing on its own elsewhere is not this symptom; a follow-up's, the one of the
        plan it follows; with systemd's Result= of the unit as this run first read it) and,
        for a follow-up, ``follows``. Whatever the policy wrote
        there is replaced."""
        if self.tried and self.tried[-1].symptom is not None:
            last = self.tried[-1]
            return {"symptom": dict(last.symptom or {}), "follows": last.plan_id}
        steps = plan.get("steps")
        acted = {self.unit, ""}
        for step in steps if isinstance(steps, list) else []:
            args = step.get("args") if isinstance(step, dict) else None
            if isinstance(args, dict) and isinstance(args.get("unit"), str):
                acted.add(args["unit"])
        failing = self.ledger.failing_health
        health = sorted(t for t, unit in failing.items() if unit in acted)[:16]
        symptom: dict[str, Any] | None = None
        if self.unit:
            symptom = {"unit": self.unit, "health": health}
            result = self.ledger.results.get(self.unit)
            if result in SYSTEMD_RESULTS:
                symptom["result"] = result
        # (A plan tried before symptoms were carried opens an incident of its own.)
        return {"symptom": symptom, "follows": None}

    def submit(self, action: SubmitPlan) -> tuple[Answer, Accepted | Refused | None]:
        """Validate, check readiness and submit ``action``'s plan. The answer, and how the
        run ends because of it (None: it goes on)."""
        raw: dict[str, Any] = {**action.plan, **self.marks(action.plan)}
        parsed = parse_plan(raw)
        if not isinstance(parsed, Plan):
            problems = "\n".join(f"- {error}" for error in parsed)
            text = (
                "The plan is not valid; nothing was submitted. Fix these and submit again:\n"
                + problems
            )
            return self.said(text, "validator", args_digest(raw)), None
        digest = parsed.fingerprint()
        missing = self.ledger.lacking_state(parsed.units())
        if missing:
            readers = " or ".join(sorted(n for n, t in self.tools.items() if t.gives == "state"))
            text = (
                "Not submitted: no evidence for "
                + ", ".join(missing)
                + f". A plan may only act on units read with {readers or 'a state tool'} in "
                "this run; read them first."
            )
            return self.said(text, "runtime", digest), None
        try:
            # The verdict's first two evidence lines go with it, for the approval page.
            seen = [item.line() for item in self.ledger.evidence[:2]]
            reply = self.submitter.submit(parsed, self.run_id, self.symptom, seen)
            if self.recording is not None:
                self.recording.replied(digest, reply.model_dump(mode="json"))
        except ExecutorError as exc:
            if self.recording is not None:
                self.recording.replied(digest, None, error=exc.message)
            why = f"The plan could not be submitted: {exc}."
            plan_json = parsed.canonical().decode("utf-8")
            return self.said(why, "runtime", digest), Refused(
                "executor_error", f"{why}\nThe plan was: {plan_json}"
            )
        if isinstance(reply, Accept):
            if reply.sha256 != digest:
                log.warning(
                    "diagnose.fingerprint_mismatch",
                    plan_id=reply.plan_id,
                    ours=digest,
                    executors=reply.sha256,
                )
            return Answer(f"ACCEPT {reply.plan_id}", "policy", 0, digest), Accepted(reply, parsed)
        if isinstance(reply, Reject):
            reason = clean(reply.reason, 500)
            return self.said(f"REJECT: {reason}", "validator", digest), Refused(
                "plan_rejected", f"The executor rejected the plan: {reason}"
            )
        problems = "\n".join(f"- {error}" for error in reply.errors)
        text = f"The executor asked for a revision (REVISE); nothing was stored:\n{problems}"
        return self.said(text, "validator", digest), None
