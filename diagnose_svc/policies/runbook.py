"""The embedded runbook: a deterministic, offline policy, and the default one.

It works from evidence, never from unit names: it reads the unit's state, the health
targets the configuration says the unit serves, its journal and its hard dependencies,
and proposes what an experienced operator would. Each turn it reads the transcript
afresh, asks for the next piece of evidence it lacks (:meth:`RunbookPolicy.next_read`),
and when it has what it needs, or is shown no tools, decides (:meth:`decide`).

What it reads, in order:

1. ``read_unit_status`` of the unit.
2. If the unit runs: its health targets (``[diagnose.health.X] unit=`` the unit). If one
   answers 502/503/504 (a proxy whose upstream is away), or the symptom names another
   target, those other targets (first the ones served by units this unit depends on);
   for the first that fails, the state and journal of the unit that serves it.
3. Its journal, then the state and journal of failed or inactive Requires=/BindsTo=
   dependencies (for a unit that is down: the dependencies first).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from diagnose_svc.actions import (
    Action,
    CallTool,
    FinalNote,
    Proposal,
    SubmitPlan,
    ToolSpec,
    Transcript,
)
from diagnose_svc.policies.findings import Findings, call_key, read_findings
from diagnose_svc.policies.journal_causes import (
    quote,
    reload_failure,
    repeated_failure,
    repeated_own_line,
    start_limit_line,
    unfixable_cause,
)
from diagnose_svc.tools import HealthResult, UnitStatus
from shared_schema import DiagnoseSettings, HealthTarget, denied_reason
from shared_schema.text import printable

#: Journal lines asked for: one start attempt's story, within the observation limit.
JOURNAL_LINES = 30
#: The unit's own output asked for after a start limit: a few attempts' last words.
OWN_LINES = 10
#: Health targets probed per group (own, others), and hard dependencies followed.
MAX_TARGETS = 2
MAX_DEPENDENCIES = 2

RUNNING = ("active", "reloading")


@dataclass(frozen=True)
class Read:
    """A tool call the runbook wants, and why."""

    tool: str
    args: dict[str, Any]
    why: str

    @property
    def key(self) -> str:
        return call_key(self.tool, self.args)


def _status(unit: str, why: str) -> Read:
    return Read("read_unit_status", {"unit": unit}, why)


def _journal(unit: str, why: str) -> Read:
    return Read("tail_journal", {"unit": unit, "lines": JOURNAL_LINES}, why)


def _health(target: str, why: str) -> Read:
    return Read("http_get_health", {"target": target}, why)


def _cut(text: str, limit: int) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _expect(status: UnitStatus) -> dict[str, Any]:
    """The precondition for acting on a unit: the state it is in now."""
    if status.active_state == "active" and status.invocation_id:
        return {"active_state": ["active"], "invocation_id": status.invocation_id}
    return {"active_state": [status.active_state]}


def _step(tool: str, unit: str, expect: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"tool": tool, "args": {"unit": unit}, "expect": expect, "reason": _cut(reason, 500)}


def _since(status: UnitStatus) -> str:
    moment = status.active_enter_timestamp
    return f" since {moment:%Y-%m-%d %H:%M:%S} UTC" if moment else ""


def _failure(status: UnitStatus) -> str:
    """Result= and how the main process ended, e.g. "Result=signal; main process was killed"."""
    words = f"Result={status.result}"
    exit_words = status.main_exit()
    return f"{words}; {exit_words}" if exit_words else words


def _note(text: str) -> FinalNote:
    return FinalNote(text=text)


def _plan(goal: str, steps: list[dict[str, Any]]) -> SubmitPlan:
    return SubmitPlan(plan={"goal": _cut(goal, 200), "steps": steps})


class RunbookPolicy:
    """The deterministic policy: a readable decision function over parsed evidence."""

    name = "runbook"

    def __init__(self, settings: DiagnoseSettings) -> None:
        self.settings = settings

    # -- the Policy protocol -------------------------------------------------------------

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        found = read_findings(transcript)
        if found.plan_refused is not None:
            # The runbook has one answer per situation; a refused plan is for a human.
            return Proposal(
                _note(
                    "The runbook's plan was not taken: "
                    + found.plan_refused
                    + "\nThe runbook has no other plan; a human must decide."
                )
            )
        available = {tool.name for tool in tools}
        if available:
            read = self.next_read(transcript.unit, transcript.symptom, found, available)
            if read is not None:
                return Proposal(CallTool(tool=read.tool, args=read.args, thought=read.why))
        return Proposal(self.decide(transcript.unit, transcript.symptom, found))

    # -- what to read --------------------------------------------------------------------

    def next_read(
        self, unit: str, symptom: str, found: Findings, available: set[str]
    ) -> Read | None:
        """The first wanted read not yet made, among the tools available."""
        for read in self._wanted(unit, symptom, found):
            if read.key not in found.asked and read.tool in available:
                return read
        return None

    def _own_targets(self, unit: str) -> list[str]:
        return [n for n, t in sorted(self.settings.health.items()) if t.unit == unit]

    def _other_targets(
        self, unit: str, status: UnitStatus, gateway: bool, symptom: str
    ) -> list[str]:
        """Targets served by other units worth probing: upstreams after a gateway error
        (those of units this one depends on first), and targets the symptom names."""
        others = [(n, t) for n, t in sorted(self.settings.health.items()) if t.unit != unit]
        chosen: list[str] = []
        if gateway:
            depends_on = set(status.requires + status.binds_to + status.wants + status.after)
            chosen += [n for n, t in others if t.unit in depends_on]
            chosen += [n for n, t in others if t.unit not in depends_on and t.unit]
        chosen += [n for n, t in others if _named_in(symptom, n, t)]
        return list(dict.fromkeys(chosen))[:MAX_TARGETS]

    def _wanted(self, unit: str, symptom: str, found: Findings) -> Iterator[Read]:
        yield _status(unit, f"what systemd knows about {unit}")
        status = found.status.get(unit)
        if status is None or status.load_state != "loaded" or status.need_daemon_reload:
            return  # decided from the state alone (or from the error reading it)
        hard_deps = [d.unit for d in status.unhealthy_dependencies][:MAX_DEPENDENCIES]
        if status.active_state in RUNNING:
            own = self._own_targets(unit)[:MAX_TARGETS]
            for target in own:
                yield _health(target, f"does {unit} answer on {target}?")
            gateway = any((h := found.health.get(t)) is not None and h.gateway_error for t in own)
            for target in self._other_targets(unit, status, gateway, symptom):
                yield _health(target, f"is what serves {target} answering?")
                result = found.health.get(target)
                if result is not None and result.outcome != "ok" and result.unit:
                    yield _status(result.unit, f"{target} fails: what state is {result.unit} in?")
                    yield _journal(result.unit, f"why is {result.unit} not serving {target}?")
                    return  # the first failing upstream is where to act
            yield _journal(unit, f"reload failures or errors of {unit}")
            for dep in hard_deps:
                yield _status(dep, f"{unit} requires {dep}, which is not active")
                yield _journal(dep, f"why is {dep} not active?")
        else:
            for dep in hard_deps:
                yield _status(dep, f"{unit} requires {dep}, which is not active")
                yield _journal(dep, f"why is {dep} not active?")
            yield _journal(unit, f"why is {unit} {status.active_state}?")
            tail = found.journal.get(unit)
            if tail is not None and start_limit_line(tail) is not None:
                yield Read(
                    "tail_journal",
                    {"unit": unit, "lines": OWN_LINES, "own_output_only": True},
                    f"{unit} hit its start limit: what did each attempt say?",
                )

    # -- what to do ----------------------------------------------------------------------

    def decide(self, unit: str, symptom: str, found: Findings) -> Action:
        """The conclusion from the evidence at hand: a plan, or a note for a human."""
        status = found.status.get(unit)
        if status is None:
            error = found.status_error.get(unit, "read_unit_status was not run")
            return _note(
                f"Could not read the state of {unit}: {error}. Nothing can be proposed "
                f"without it; check the unit name (systemctl status {unit})."
            )
        # Rule: a masked unit cannot be started by anyone until it is unmasked, and
        # unmasking is a decision about the system's intent, not a repair.
        # Rule: a unit file that does not load, or changed on disk, must be fixed or
        # reloaded by a human first (daemon-reload is not a plan step).
        unloaded = self._unloaded(unit, status)
        if unloaded is not None:
            return unloaded
        if status.active_state in RUNNING:
            return self._decide_running(unit, symptom, status, found)
        if status.active_state in ("activating", "deactivating"):
            return self._decide_in_transition(unit, status, found)
        return self._decide_down(unit, status, found)

    def _unloaded(self, unit: str, status: UnitStatus) -> FinalNote | None:
        if status.load_state == "masked":
            return _note(
                f"{unit} is masked (LoadState=masked, UnitFileState={status.unit_file_state}): "
                "systemd refuses to start it, so no restart can help. If it should run, a "
                f"human must unmask it (systemctl unmask {unit}) and then start it."
            )
        if status.load_state != "loaded":
            error = f": {status.load_error}" if status.load_error else ""
            return _note(
                f"{unit} is not loaded (LoadState={status.load_state}{error}). Its unit file "
                f"({status.fragment_path or 'no fragment'}) must be fixed by a human, followed "
                "by systemctl daemon-reload; no restart can help before that."
            )
        if status.need_daemon_reload:
            return _note(
                f"The unit file of {unit} changed on disk since systemd loaded it "
                "(NeedDaemonReload=yes). A human must review the change and run systemctl "
                "daemon-reload first; acting on it now would use the old definition."
            )
        return None

    def _bring_up(
        self, unit: str, status: UnitStatus, found: Findings, *, dependency: bool, why: str = ""
    ) -> list[dict[str, Any]] | FinalNote:
        """The steps that bring a failed or inactive unit back, or a note why not.

        ``why`` (how the evidence led to this unit) starts the first step's reason.
        """
        steps = self._bring_up_steps(unit, status, found, dependency=dependency)
        if why and not isinstance(steps, FinalNote):
            first = steps[0]
            steps[0] = {**first, "reason": _cut(f"{why} {first['reason']}", 500)}
        return steps

    def _bring_up_steps(
        self, unit: str, status: UnitStatus, found: Findings, *, dependency: bool
    ) -> list[dict[str, Any]] | FinalNote:
        unloaded = self._unloaded(unit, status)
        if unloaded is not None:
            return unloaded
        denied = denied_reason(unit)
        if denied is not None:
            return _note(
                f"{unit} is {status.active_state} ({_failure(status)}), but opsbot never acts "
                f"on it (built-in denylist entry {denied!r}). A human must look at it."
            )
        tail = found.journal.get(unit)
        if tail is None and unit not in found.journal_error:
            return _note(
                f"{unit} is {status.active_state} ({_failure(status)}), but its journal could "
                "not be read within the steps available, so a configuration or setup error "
                "cannot be ruled out. Look at journalctl -u " + unit + " before restarting it."
            )
        unread = "" if tail is not None else " (its journal could not be read)"
        # Rule: the journal shows a cause a restart cannot fix (configuration error,
        # missing program or file, permission denied, port in use, setup failure): say
        # what a human must do, quoting the decisive line. Never restart into it.
        cause = unfixable_cause(tail) if tail is not None else None
        if cause is not None:
            return _note(
                f"{unit} is {status.active_state} ({_failure(status)}), and its journal shows "
                f"why: {quote(cause.line)}. {cause.advice} A restart alone would fail the "
                "same way, so no plan is proposed."
            )
        limit_line = start_limit_line(tail) if tail is not None else None
        # Rule: the start limit was hit because every attempt died saying the same thing:
        # the failure is deterministic (a bad setting or environment), and another start
        # would only repeat it. Quote the line; a human must fix what it names.
        own = found.own_journal.get(unit)
        repeated = repeated_failure(tail) if tail is not None else None
        if repeated is None and own is not None:
            repeated = repeated_own_line(own)
        if limit_line is not None and repeated is not None:
            return _note(
                f"{unit} is {status.active_state} ({_failure(status)}, "
                f"NRestarts={status.n_restarts}): systemd gave up restarting it "
                f"({quote(limit_line)}), and each attempt died with the same error: "
                f"{quote(repeated)}. Restarting cannot help until what that line names is "
                f"fixed (the unit's environment, drop-ins or configuration: systemctl cat "
                f"{unit}); then run systemctl reset-failed {unit} and start it."
            )
        # Rule: the start limit was hit and nothing in the journal says the cause
        # remains: clear the failed state (which resets the limit), then start.
        if status.result == "start-limit-hit" or limit_line is not None:
            seen = (
                f"journal: {quote(limit_line)}"
                if limit_line is not None
                else "Result=start-limit-hit"
            )
            return [
                _step(
                    "reset_failed_unit",
                    unit,
                    _expect(status),
                    f"{unit} hit its start limit ({seen}); the journal shows no cause a "
                    f"restart cannot fix{unread}. Clearing the failed state resets the limit.",
                ),
                _step(
                    "start_unit",
                    unit,
                    {"active_state": ["inactive", "failed"]},
                    f"Start {unit} again once its start limit is reset "
                    f"(NRestarts={status.n_restarts}).",
                ),
            ]
        if status.active_state == "failed":
            # Rule: a crashed or killed unit, with no unfixable cause in its journal, is
            # restarted. A dependency is *started*: restarting it would also restart the
            # units that require it, and change what their own steps expect.
            tool = "start_unit" if dependency else "restart_unit"
            return [
                _step(
                    tool,
                    unit,
                    _expect(status),
                    f"{unit} is failed ({_failure(status)}, NRestarts={status.n_restarts}); "
                    f"its journal shows no configuration or setup error{unread}, so starting "
                    "it again should bring it back.",
                )
            ]
        # Rule: an inactive (dead) unit is started; a clean stop may have been deliberate,
        # which the operator approving the plan knows.
        clean = (
            " It stopped cleanly (Result=success): check it was not stopped on purpose."
            if status.result == "success"
            else ""
        )
        return [
            _step(
                "start_unit",
                unit,
                _expect(status),
                f"{unit} is {status.active_state}/{status.sub_state} ({_failure(status)}); its "
                f"journal shows no configuration or setup error{unread}.{clean}",
            )
        ]

    def _dependencies_first(
        self, unit: str, status: UnitStatus, found: Findings
    ) -> list[dict[str, Any]] | FinalNote:
        """Steps that bring up each failed/inactive Requires=/BindsTo= dependency."""
        steps: list[dict[str, Any]] = []
        for dep in status.unhealthy_dependencies[:MAX_DEPENDENCIES]:
            dep_status = found.status.get(dep.unit)
            if dep_status is None:
                return _note(
                    f"{unit} {dep.relation} {dep.unit}, which is {dep.active_state}, but the "
                    f"state of {dep.unit} could not be read; look at systemctl status {dep.unit}."
                )
            if dep_status.active_state in RUNNING:
                continue  # it came back meanwhile
            dep_steps = self._bring_up(
                dep.unit,
                dep_status,
                found,
                dependency=True,
                why=f"{unit} {dep.relation}={dep.unit}.",
            )
            if isinstance(dep_steps, FinalNote):
                return _note(f"{unit} {dep.relation}={dep.unit}, which is down. " + dep_steps.text)
            steps += dep_steps
        return steps

    def _decide_down(self, unit: str, status: UnitStatus, found: Findings) -> Action:
        # Rule: a Requires=/BindsTo= dependency that is failed or inactive is brought up
        # first, then the unit itself, in that order.
        steps = self._dependencies_first(unit, status, found)
        if isinstance(steps, FinalNote):
            return steps
        own = self._bring_up(unit, status, found, dependency=False)
        if isinstance(own, FinalNote):
            return own
        deps = list(dict.fromkeys(s["args"]["unit"] for s in steps))
        if deps:
            goal = f"Start {', '.join(deps)}, which {unit} requires, then {unit}"
        else:
            goal = _goal(unit, status, own)
        return _plan(goal, steps + own)

    def _decide_in_transition(self, unit: str, status: UnitStatus, found: Findings) -> Action:
        tail = found.journal.get(unit)
        cause = unfixable_cause(tail) if tail is not None else None
        if cause is not None:
            return _note(
                f"{unit} is {status.active_state}/{status.sub_state} (NRestarts="
                f"{status.n_restarts}), and its journal shows why it keeps failing: "
                f"{quote(cause.line)}. {cause.advice}"
            )
        # Rule: systemd is already starting, stopping or restarting it; a plan made now
        # would race that. Look again when it settles.
        return _note(
            f"{unit} is {status.active_state}/{status.sub_state} (NRestarts={status.n_restarts}"
            f", {_failure(status)}): systemd is acting on it right now. No plan is proposed; "
            "diagnose again once it settles."
        )

    def _decide_running(
        self, unit: str, symptom: str, status: UnitStatus, found: Findings
    ) -> Action:
        tail = found.journal.get(unit)
        # Rule: a running unit whose reload failed keeps its old configuration; a restart
        # would load the broken one and take it down. Quote the error; never restart.
        failed_reload = reload_failure(tail) if tail is not None else None
        if failed_reload is not None:
            assert tail is not None
            cause = unfixable_cause(tail)
            why = f" The error: {quote(cause.line)}." if cause is not None else ""
            return _note(
                f"{unit} is running{_since(status)}, but its last reload failed: "
                f"{quote(failed_reload)}.{why} It still runs the previous configuration. A "
                "human must fix the configuration and reload again; no restart is proposed, "
                "since with the configuration as it is a restart would take it down."
            )
        # Rule: a running unit with a failed/inactive hard dependency: bring the
        # dependency up first, then restart the unit so that it uses it.
        if status.unhealthy_dependencies:
            steps = self._dependencies_first(unit, status, found)
            if isinstance(steps, FinalNote):
                return steps
            if steps:
                deps = ", ".join(dict.fromkeys(s["args"]["unit"] for s in steps))
                restart = _step(
                    "restart_unit",
                    unit,
                    _expect(status),
                    f"{unit} runs{_since(status)} while {deps}, which it requires, is down; "
                    "restart it once they are up.",
                )
                return _plan(
                    f"Start {deps}, then restart {unit} which requires it", steps + [restart]
                )
        own = [found.health[t] for t in self._own_targets(unit) if t in found.health]
        # Rule: running but not answering in time: the process is hung. Restart it,
        # pinned to this invocation so a restart that happened meanwhile makes it stale.
        hung = [h for h in own if h.outcome == "timeout"]
        if hung:
            if tail is None and unit not in found.journal_error:
                return _note(
                    f"{unit} is running but health target {hung[0].target} timed out; its "
                    "journal could not be read within the steps available, so a failed reload "
                    "cannot be ruled out. Look at journalctl -u " + unit + " before restarting."
                )
            return _plan(
                f"Restart hung {unit}",
                [
                    _step(
                        "restart_unit",
                        unit,
                        _expect(status),
                        f"{unit} is active/{status.sub_state}{_since(status)} (invocation "
                        f"{status.invocation_id[:12]}), but health target {hung[0].target} "
                        f"gave no answer ({hung[0].error}): the process is alive but hung.",
                    )
                ],
            )
        # Rule: a proxy answering 502/503/504, or a target the symptom names that fails:
        # act on the unit that serves the failing upstream target.
        gateway = [h for h in own if h.gateway_error]
        upstream = self._decide_upstream(unit, symptom, status, found, gateway)
        if upstream is not None:
            return upstream
        # Rule: running but refusing connections, or answering with an unexpected status:
        # a restart is not what the evidence asks for; say what was seen.
        for result in own:
            if result.outcome in ("connection_refused", "connection_error"):
                return _note(
                    f"{unit} is running{_since(status)}, but health target {result.target} "
                    f"({result.url}) refuses connections: {result.error}. Check that {unit} "
                    "listens where the target expects; no restart is proposed."
                )
            if result.outcome == "unexpected_status":
                body = _cut(result.body_excerpt, 160)
                return _note(
                    f"{unit} is running{_since(status)}, but health target {result.target} "
                    f"answered {result.status} (expected {result.expected_status}): "
                    f'"{body}". Its journal tells more; no restart is proposed.'
                )
        healthy = ", ".join(f"{h.target} answered {h.status} in {h.latency_ms} ms" for h in own)
        health_words = (
            f"health target {healthy}"
            if own
            else "no health target is configured for it, so only systemd's view was checked"
        )
        # Rule: recovered: running and healthy, but systemd had to restart it.
        if status.n_restarts > 0:
            return _note(
                f"{unit} has recovered: systemd restarted it {status.n_restarts} times "
                f"(NRestarts={status.n_restarts}) and it is active{_since(status)}; "
                f"{health_words}. No change is warranted; its journal tells why it crashed."
            )
        # Rule: healthy: nothing to do.
        return _note(
            f"{unit} is active/{status.sub_state}{_since(status)}; {health_words}. "
            "No change is warranted."
        )

    def _decide_upstream(
        self,
        unit: str,
        symptom: str,
        status: UnitStatus,
        found: Findings,
        gateway: list[HealthResult],
    ) -> Action | None:
        others = self._other_targets(unit, status, bool(gateway), symptom)
        for target in others:
            result = found.health.get(target)
            if result is None or result.outcome == "ok" or not result.unit:
                continue
            served_by = result.unit
            seen = (
                f"{gateway[0].target} ({unit}) answers {gateway[0].status} and " if gateway else ""
            )
            seen += f"health target {target} ({served_by}) {_health_words(result)}"
            upstream = found.status.get(served_by)
            if upstream is None:
                return _note(f"{seen}, but the state of {served_by} could not be read.")
            if upstream.active_state in RUNNING:
                hung = result.outcome == "timeout"
                tail = found.journal.get(served_by)
                failed_reload = reload_failure(tail) if tail is not None else None
                if hung and tail is not None and failed_reload is None:
                    return _plan(
                        f"Restart hung {served_by}, upstream of {unit}",
                        [
                            _step(
                                "restart_unit",
                                served_by,
                                _expect(upstream),
                                f"{seen}: {served_by} is active{_since(upstream)} but hung.",
                            )
                        ],
                    )
                return _note(
                    f"{seen}; {served_by} is {upstream.active_state}/{upstream.sub_state}. "
                    + (
                        f"Its last reload failed: {quote(failed_reload)}. "
                        if failed_reload is not None
                        else ""
                    )
                    + "No restart is proposed; look at its journal."
                )
            steps = self._bring_up(served_by, upstream, found, dependency=False, why=f"{seen}.")
            if isinstance(steps, FinalNote):
                return _note(f"{seen}. " + steps.text)
            return _plan(f"{_goal(served_by, upstream, steps)}, the upstream of {unit}", steps)
        if gateway:
            first = gateway[0]
            checked = ", ".join(
                f"{t} {_health_words(found.health[t])}" for t in others if t in found.health
            )
            if checked:
                return _note(
                    f"{unit} is running, but health target {first.target} answers "
                    f"{first.status}, while the upstream targets answer ({checked}). Check "
                    f"the upstream configuration of {unit}; no restart is proposed."
                )
            return _note(
                f"{unit} is running, but health target {first.target} answers {first.status}: "
                "what it proxies to does not answer, and no health target is configured for "
                "the unit behind it. Add one ([diagnose.health.<name>] with unit=) so that "
                "diagnosis can follow it; no restart of the proxy is proposed."
            )
        return None


def _goal(unit: str, status: UnitStatus, steps: list[dict[str, Any]]) -> str:
    """The goal of a plan that brings one unit back with ``steps``."""
    if steps[0]["tool"] == "reset_failed_unit":
        return f"Clear the start limit of {unit} and start it"
    if steps[-1]["tool"] == "restart_unit":
        return f"Restart {status.active_state} {unit}"
    return f"Start {status.active_state} {unit}"


def _health_words(result: HealthResult) -> str:
    if result.outcome in ("ok", "unexpected_status"):
        return f"answers {result.status}"
    return {"timeout": "times out", "connection_refused": "refuses connections"}.get(
        result.outcome, "cannot be reached"
    )


def _named_in(symptom: str, name: str, target: HealthTarget) -> bool:
    """Whether the symptom names a health target, or the unit that serves it."""
    if not symptom:
        return False
    if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", symptom, re.IGNORECASE):
        return True
    return target.unit is not None and target.unit in symptom
