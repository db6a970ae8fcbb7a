"""The embedded runbook: a deterministic, offline policy, and the default one.

It reasons the way an experienced operator does, over the service graph, from systemd's
facts; never from unit names, ports or scenarios. Each turn it reads the transcript
afresh (findings.py), asks for the reads it still lacks, several at once (one step), and
when it has what it needs, or is shown no tools, decides.

What it reads, breadth first:

1. The unit asked about, the failed units, and every configured health target at once.
2. Everything that looks failing and is in scope (the unit's dependencies, at any depth,
   and, when a health target fails, the units behind the failing targets): its state;
   and with it, for a unit that is down, its journal, its unit file (and the files it
   names), its filesystems and who holds its port; for a unit that runs but fails its
   health check, its processes, journal and unit file.
3. What the leads of those journals call for (a port another line says is in use), and
   the dependencies of what is failing that are not read yet.

How it decides:

* **The root** is the deepest failing unit whose own dependencies are healthy. Of those,
  one with a fault of its own (down, its process stopped, its health target not
  answering) comes before one that only relays an upstream's error (a proxy's 502).
* **Its failure mode, from facts**: masked, unit file broken, a full filesystem, a file it
  needs missing or unreadable by its user, its port held by another process, a setting
  its own output calls invalid that its unit file really sets, a start check that failed
  with nothing it checks changed since, a reload that failed: each is a note for a
  human, naming the cause and the fact. Otherwise a unit that is down is started again
  (its start limit cleared first if systemd gave up), with what BindsTo= stopped with it
  after it; one that runs but is stopped or does not answer is restarted, pinned to its
  invocation; one that answers errors because a file it was started with changed since
  is reloaded.
* **Untrusted text decides nothing.** A unit's own output is a lead a read tool must
  confirm: an injected line cannot turn a plan into a note or a note into a plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from diagnose_svc.actions import (
    Action,
    CallTool,
    CallTools,
    FinalNote,
    Proposal,
    SubmitPlan,
    ToolSpec,
    Transcript,
)
from diagnose_svc.limits import MAX_CALLS_PER_STEP
from diagnose_svc.policies import leads
from diagnose_svc.policies.findings import Findings, call_key, read_findings
from diagnose_svc.tools import HealthResult, JournalTail, UnitStatus
from shared_schema import DiagnoseSettings, denied_reason
from shared_schema.plan import RESTART_BUDGET, TRIED_BEFORE
from shared_schema.text import printable

#: Journal lines asked for: a few attempts' story, within the observation limit.
JOURNAL_LINES = 40
RUNNING = ("active", "reloading")
DOWN = ("failed", "inactive")
#: A program that exits with an error within this many seconds of its start failed
#: starting (it read something it cannot use); one that ran longer failed running.
START_GRACE = 5.0
#: How many of its own last lines before it failed starting may name its cause.
LAST_WORDS = 3
#: A dependent that went down within this many seconds after a unit it depends on
#: stopped was stopped with it (systemd's default stop timeout is 90 s).
STOPPED_WITH = 90.0
#: Dependencies read per failing unit at most (fan-out wider than this is rare).
MAX_DEPENDENCIES = 4


@dataclass(frozen=True)
class Read:
    """A tool call the runbook wants."""

    tool: str
    args: dict[str, Any]

    @property
    def key(self) -> str:
        return call_key(self.tool, self.args)


@dataclass(frozen=True)
class Human:
    """A cause only a human can fix: its kind, the unit, the fact that shows it, and what
    to do."""

    kind: str
    unit: str
    fact: str
    advice: str


@dataclass(frozen=True)
class Fix:
    steps: list[dict[str, Any]]
    goal: str


def _cut(text: str, limit: int) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _step(tool: str, unit: str, expect: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"tool": tool, "args": {"unit": unit}, "expect": expect, "reason": _cut(reason, 500)}


def _pinned(status: UnitStatus) -> dict[str, Any]:
    """The precondition for acting on a running unit: this very invocation of it."""
    expect: dict[str, Any] = {"active_state": ["active"]}
    if status.invocation_id:
        expect["invocation_id"] = status.invocation_id
    return expect


def _ended(status: UnitStatus) -> str:
    """How its last run ended, in facts: Result= and the main process's exit."""
    words = f"Result={status.result}"
    exit_words = status.main_exit()
    return f"{words}; {exit_words}" if exit_words else words


class View:
    """The service graph as the findings show it: states, health, processes, files."""

    def __init__(self, settings: DiagnoseSettings, found: Findings, entry: str) -> None:
        self.settings = settings
        self.found = found
        self.entry = entry

    # -- the graph ------------------------------------------------------------------------

    def status(self, unit: str) -> UnitStatus | None:
        return self.found.status.get(unit)

    def targets_of(self, unit: str) -> list[str]:
        return sorted(n for n, t in self.settings.health.items() if t.unit == unit)

    def port_of(self, unit: str) -> int | None:
        for name in self.targets_of(unit):
            port = urlsplit(str(self.settings.health[name].url)).port
            if port is not None:
                return port
        return None

    def health(self, unit: str) -> list[HealthResult]:
        return [self.found.health[t] for t in self.targets_of(unit) if t in self.found.health]

    def deps(self, unit: str) -> list[str]:
        """What ``unit`` depends on: its BindsTo=, Requires= and Wants=, and any service
        it is ordered After= that systemd reports failed (ordering alone is no need).
        Units opsbot never acts on (systemd's own) are left out unless they failed."""
        status = self.status(unit)
        if status is None:
            return []
        named = [*status.binds_to, *status.requires, *status.wants]
        named = [u for u in named if denied_reason(u) is None]
        named += [d.unit for d in status.unhealthy_dependencies]
        return [u for u in dict.fromkeys(named) if u != unit and _service_like(u)]

    def unhealthy_deps(self, unit: str) -> list[str]:
        status = self.status(unit)
        return [d.unit for d in status.unhealthy_dependencies] if status else []

    def closure(self, unit: str, limit: int = 24) -> list[str]:
        """``unit`` and everything it depends on, as far as states were read."""
        seen: dict[str, None] = {unit: None}
        todo = [unit]
        while todo and len(seen) < limit:
            for dep in self.deps(todo.pop(0)):
                if dep not in seen and (
                    dep in self.found.status or dep in self.unhealthy_deps_all()
                ):
                    seen[dep] = None
                    todo.append(dep)
        return list(seen)

    def unhealthy_deps_all(self) -> set[str]:
        return {d for u in self.found.status for d in self.unhealthy_deps(u)}

    def failing_targets(self) -> list[HealthResult]:
        return [h for h in self.found.health.values() if h.outcome != "ok"]

    def scope(self) -> list[str]:
        """The units this diagnosis is about: the entry's dependencies, and, when health
        fails anywhere among them, the units behind every failing health target (a
        proxy's upstream is not a systemd dependency of the proxy)."""
        units = self.closure(self.entry)
        if any(self.health_failing(u) for u in units) or self.failing(self.entry):
            for result in self.failing_targets():
                if result.unit:
                    units += [u for u in self.closure(result.unit) if u not in units]
        return units

    # -- what is wrong with a unit --------------------------------------------------------

    def health_failing(self, unit: str) -> list[HealthResult]:
        return [h for h in self.health(unit) if h.outcome != "ok"]

    def running(self, unit: str) -> bool:
        status = self.status(unit)
        return status is not None and status.active_state in RUNNING

    def process_stuck(self, unit: str) -> str | None:
        state = self.found.process.get(unit)
        if state is None:
            return None
        for p in state.processes:
            if p.visible and p.state in ("T", "t", "Z"):
                return f"its {p.role} process {p.pid} ({p.comm}) is {p.state_words}"
        return None

    def reload_failed(self, unit: str) -> str | None:
        status = self.status(unit)
        if status is not None and status.reload_result not in ("success", ""):
            return f"ReloadResult={status.reload_result}"
        tail = self.found.journal.get(unit)
        line = leads.reload_failed(tail) if tail is not None else None
        return f'systemd: "{_cut(line.message, 160)}"' if line is not None else None

    def failing(self, unit: str) -> str | None:
        """Why ``unit`` counts as failing, in facts; None when it does not."""
        status = self.status(unit)
        if status is None:
            return None
        if status.load_state != "loaded":
            return f"LoadState={status.load_state}"
        if status.active_state == "failed":
            return f"failed ({_ended(status)})"
        if status.active_state == "inactive":
            return f"inactive ({_ended(status)})"
        if status.active_state in ("activating", "deactivating"):
            return f"{status.active_state}/{status.sub_state}"
        stuck = self.process_stuck(unit)
        if stuck:
            return stuck
        bad = self.health_failing(unit)
        if bad:
            return "; ".join(f"health target {h.target} {_health_words(h)}" for h in bad)
        failed_reload = self.reload_failed(unit)
        if failed_reload:
            return f"its last reload failed ({failed_reload})"
        return None

    def hard_fault(self, unit: str) -> bool:
        """A fault systemd or /proc shows: down, not loaded, stuck, a failed reload."""
        if not self.running(unit):
            return True
        return bool(self.process_stuck(unit) or self.reload_failed(unit))

    def silent(self, unit: str) -> bool:
        """Its health target does not answer at all (times out, refuses), as against
        answering an error it relays from upstream."""
        return any(h.outcome not in ("ok", "unexpected_status") for h in self.health(unit))

    def candidates(self) -> list[str]:
        """The deepest failing units in scope whose own dependencies are healthy: where
        the fault may be (each is read for how it fails)."""
        scope = self.scope()
        failing = [u for u in scope if self.failing(u)]
        unread = [u for u in self.unhealthy_deps_all() if u in scope and u not in self.found.status]
        failing += unread
        return [u for u in failing if not any(d in failing for d in self.deps(u))]

    def roots(self) -> list[str]:
        """The candidates the fault is in. Those with a fault systemd or /proc shows come
        first; then those that do not answer at all (several of them, when nothing shows
        which waits on which: decide() hands those to a human); then those that only
        answer errors (a relay's 502 is not its own fault while another does not answer)."""
        candidates = self.candidates()
        unread = [u for u in candidates if u not in self.found.status]
        hard = [u for u in candidates if u in unread or self.hard_fault(u)]
        if hard:
            return hard
        silent = [u for u in candidates if self.silent(u)]
        return silent or candidates

    def dependents(self, unit: str) -> list[str]:
        """The units that depend on ``unit`` so that systemd stops them with it: its
        BoundBy= and RequiredBy=, and any unit read whose BindsTo= or Requires= names it
        (systemd forgets the reverse edges of a dependent it unloaded once inactive), of
        those opsbot may act on."""
        status = self.status(unit)
        if status is None:
            return []
        named = [*status.bound_by, *status.required_by]
        named += [u for u, s in self.found.status.items() if unit in (*s.binds_to, *s.requires)]
        return [
            u
            for u in dict.fromkeys(named)
            if u != unit and _service_like(u) and denied_reason(u) is None
        ]

    def taken_down(self, unit: str) -> list[str]:
        """The units systemd stopped because ``unit`` stopped, as far as they were read:
        each depends on the one before it (BindsTo=, Requires=) and is down now; and it
        went down within STOPPED_WITH seconds after that one stopped being active, or,
        when systemd has unloaded it since (an inactive unit keeps no timestamps), it
        stopped cleanly (Result=success) and ``unit`` crashed since (NRestarts>0)."""
        first = self.status(unit)
        if first is None:
            return []
        out: list[str] = []
        todo = [unit]
        while todo and len(out) < 24:
            parent = self.status(todo.pop(0))
            if parent is None:
                continue
            for dep in self.dependents(parent.unit):
                status = self.status(dep)
                if status is None or dep in out or dep == unit:
                    continue
                if status.load_state != "loaded" or status.active_state not in DOWN:
                    continue
                went, left = status.inactive_enter_timestamp, parent.active_exit_timestamp
                if went is not None and left is not None:
                    with_it = -1.0 <= (went - left).total_seconds() <= STOPPED_WITH
                else:
                    with_it = went is None and status.result == "success" and first.n_restarts > 0
                if with_it:
                    out.append(dep)
                    todo.append(dep)
        return out

    def dependents_down(self, root: str, roots: Sequence[str]) -> list[str]:
        """Units in scope that are down because of ``root`` (they depend on it, at any
        depth), dependencies first: they must start again after it."""
        down = []
        for unit in self.scope():
            status = self.status(unit)
            if unit in roots or status is None:
                continue
            if status.active_state not in DOWN and status.active_state != "deactivating":
                continue
            if status.load_state != "loaded" or root not in self.closure(unit):
                continue
            down.append(unit)
        down += [u for u in self.taken_down(root) if u not in down and u not in roots]
        return self.start_order(down)

    def start_order(self, units: list[str]) -> list[str]:
        """``units`` so that each comes after those of them it depends on."""
        placed: list[str] = []
        todo = list(units)
        while todo:
            ready = [u for u in todo if not any(d in todo for d in self.closure(u)[1:])]
            nxt = ready[0] if ready else todo[0]
            placed.append(nxt)
            todo.remove(nxt)
        return placed


def _service_like(unit: str) -> bool:
    return unit.endswith((".service", ".socket", ".timer", ".mount", ".path"))


def _health_words(result: HealthResult) -> str:
    if result.outcome == "ok":
        return f"answers {result.status}"
    if result.outcome == "unexpected_status":
        return f"answers {result.status} (expected {result.expected_status})"
    return {
        "timeout": "does not answer (timed out)",
        "connection_refused": "refuses connections",
    }.get(result.outcome, "cannot be reached")


def _note(text: str, cause: Human | None = None, kind: str = "", unit: str = "") -> FinalNote:
    if cause is not None:
        body: dict[str, Any] = {
            "kind": cause.kind,
            "unit": cause.unit,
            "fact": _cut(cause.fact, 480),
        }
    else:
        body = {"kind": kind, "unit": unit or None, "fact": _cut(text.split(". ")[0], 480)}
    return FinalNote(text=text, cause=body)


def _restarts_not_fixing(unit: str, why: str, transcript: Transcript) -> FinalNote:
    """What the runbook would do again did not fix it: a human must find why."""
    tried = "".join(f" {t.line()}." for t in transcript.tried)
    fact = _cut(why, 480)
    text = (
        f"{unit}: restarting is not fixing it: {why}.{tried} No plan is proposed: a human "
        f"must find why it does not stay up (journalctl -u {unit}, systemctl status {unit})."
    )
    return FinalNote(
        text=_cut(text, 3900), cause={"kind": "restarts_not_fixing", "unit": unit, "fact": fact}
    )


def _plan(goal: str, steps: list[dict[str, Any]]) -> SubmitPlan:
    return SubmitPlan(plan={"goal": _cut(goal, 200), "steps": steps})


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
                return Proposal(_restarts_not_fixing(transcript.unit, refused, transcript))
            kind = "not_allowed" if "may not touch" in refused else "unknown"
            return Proposal(
                _note(
                    "The runbook's plan was not taken: "
                    + found.plan_refused
                    + "\nThe runbook has no other plan; a human must decide.",
                    kind=kind,
                    unit=transcript.unit,
                )
            )
        available = {tool.name for tool in tools}
        if available:
            reads = self.next_reads(transcript.unit, found, available)
            if len(reads) == 1:
                return Proposal(CallTool(tool=reads[0].tool, args=reads[0].args))
            if reads:
                calls = tuple(CallTool(tool=r.tool, args=r.args) for r in reads)
                return Proposal(CallTools(calls=calls))
        action = self.decide(transcript.unit, found)
        if isinstance(action, SubmitPlan):
            sequence = tuple((s["tool"], s["args"]["unit"]) for s in action.plan["steps"])
            for tried in transcript.tried:
                if tried.steps == sequence:
                    why = f"the same steps were tried: {tried.line()}"
                    return Proposal(_restarts_not_fixing(transcript.unit, why, transcript))
        return Proposal(action)

    # -- what to read --------------------------------------------------------------------

    def next_reads(self, unit: str, found: Findings, available: set[str]) -> list[Read]:
        """The wanted reads not yet made, among the tools available, for one step."""
        picked: dict[str, Read] = {}
        for read in self._wanted(unit, found):
            if read.key in found.asked or read.tool not in available or read.key in picked:
                continue
            picked[read.key] = read
            if len(picked) >= MAX_CALLS_PER_STEP:
                break
        return list(picked.values())

    def _wanted(self, entry: str, found: Findings) -> Iterator[Read]:
        view = View(self.settings, found, entry)
        yield Read("read_unit_status", {"unit": entry})
        yield Read("list_failed_units", {})
        own = view.targets_of(entry)
        for name in own + sorted(n for n in self.settings.health if n not in own):
            yield Read("http_get_health", {"target": name})
        status = view.status(entry)
        if status is None or status.load_state != "loaded":
            return  # decided from the state alone (or from the error reading it)
        # The graph first: the state of everything that may be failing, in scope, and of
        # what it depends on.
        suspects: dict[str, None] = {}
        for unit in view.scope():
            if view.failing(unit) or unit in view.unhealthy_deps_all():
                suspects[unit] = None
        for result in view.failing_targets():
            if result.unit:
                suspects[result.unit] = None
        related = set(view.scope()) | set(suspects)
        for failed in found.failed_units():
            if failed in related or any(failed in view.deps(u) for u in related):
                suspects[failed] = None
        for unit in view.deps(entry)[:MAX_DEPENDENCIES]:
            yield Read("read_unit_status", {"unit": unit})
        for unit in suspects:
            yield Read("read_unit_status", {"unit": unit})
        for unit in suspects:
            for dep in view.deps(unit)[:MAX_DEPENDENCIES]:
                yield Read("read_unit_status", {"unit": dep})
        # Then how the root candidates fail: the deepest failing units whose own
        # dependencies are healthy, as far as the graph is known.
        for root in view.candidates():
            if any(d not in found.status for d in view.deps(root)[:MAX_DEPENDENCIES]):
                continue  # what it depends on is read first: the root may be deeper
            yield from self._evidence(view, root)
        # What systemd stopped with the root (or with the unit asked about, when it runs
        # again): the units that depend on it, and theirs, while they are down.
        for unit in view.roots() or [entry]:
            yield from self._taken_down_reads(view, unit)
        for unit in suspects:
            if view.running(unit) and not view.silent(unit):
                for dep in view.deps(unit)[:MAX_DEPENDENCIES]:
                    if view.running(dep):
                        # It relays an error and what it depends on looks fine: is that
                        # dependency's process stopped behind an "active" state?
                        yield Read("read_process_state", {"unit": dep})

    def _taken_down_reads(self, view: View, unit: str) -> Iterator[Read]:
        todo, seen = [unit], {unit}
        while todo:
            for dep in view.dependents(todo.pop(0))[:MAX_DEPENDENCIES]:
                if dep in seen:
                    continue
                seen.add(dep)
                yield Read("read_unit_status", {"unit": dep})
                if dep in view.taken_down(unit):
                    todo.append(dep)

    def _evidence(self, view: View, unit: str) -> Iterator[Read]:
        """The reads that tell how ``unit`` fails, as far as what is known calls for."""
        status = view.status(unit)
        if status is None or status.load_state != "loaded" or not view.failing(unit):
            return
        if status.active_state in RUNNING:
            yield Read("read_process_state", {"unit": unit})
            if view.process_stuck(unit):
                return  # a stopped process is the fact: nothing else decides it
            if not any(h.outcome == "timeout" for h in view.health(unit)):
                yield Read("tail_journal", {"unit": unit, "lines": JOURNAL_LINES})
                yield Read("read_unit_file", {"unit": unit})
            if any(h.outcome == "connection_refused" for h in view.health(unit)):
                yield from self._listeners(view, unit)
            return
        yield Read("tail_journal", {"unit": unit, "lines": JOURNAL_LINES})
        yield Read("read_unit_file", {"unit": unit})
        yield Read("disk_usage", {"unit": unit})
        yield from self._listeners(view, unit)
        if status.result == "oom-kill":
            yield Read("read_memory", {"unit": unit})
        if unit.endswith(".timer"):
            yield Read("read_timer", {"unit": unit})

    def _listeners(self, view: View, unit: str) -> Iterator[Read]:
        """Who holds the ports ``unit`` needs: its health target's, and those its own
        output since it stopped says are in use (a lead list_listeners checks)."""
        status = view.status(unit)
        ports: list[int] = []
        port = view.port_of(unit)
        if port is not None:
            ports.append(port)
        if status is not None:
            ports += _text_ports(view, unit, status)
        for number in dict.fromkeys(ports):
            yield Read("list_listeners", {"port": number})

    # -- what to do ----------------------------------------------------------------------

    def decide(self, unit: str, found: Findings) -> Action:
        """The conclusion from the evidence at hand: a plan, or a note for a human."""
        view = View(self.settings, found, unit)
        status = view.status(unit)
        if status is None:
            error = found.error("read_unit_status", unit) or "read_unit_status was not run"
            return _note(
                f"Could not read the state of {unit}: {error}. Nothing can be proposed "
                f"without it; check the unit name (systemctl status {unit}).",
                kind="unit_file_error" if "not found" in error else "unknown",
                unit=unit,
            )
        roots = view.roots()
        if not roots:
            left = view.taken_down(unit)
            if left:
                return self._start_left_down(view, unit, status, left)
            return self._healthy(view, unit, status)
        silent = [r for r in roots if view.running(r) and not view.hard_fault(r)]
        if len(silent) > 1 and not self.unchecked_any(view, silent):
            return self._human_note(view, unit, self._which_waits(view, silent), roots)
        humans: list[Human] = []
        fixes: list[Fix] = []
        for root in roots:
            missing = self.unchecked(view, root)
            if missing:
                humans.append(
                    Human(
                        "unknown",
                        root,
                        f"{root} is failing ({view.failing(root)}), but "
                        f"{', '.join(missing)} could not be checked within the steps available",
                        f"Look at systemctl status {root} and journalctl -u {root}; diagnose "
                        "again with more steps ([diagnose] max_steps).",
                    )
                )
                continue
            result = self._classify(view, root, roots)
            if isinstance(result, Human):
                humans.append(result)
            else:
                fixes.append(result)
        if humans:
            return self._human_note(view, unit, humans[0], roots)
        steps = [s for fix in fixes for s in fix.steps]
        goal = "; ".join(fix.goal for fix in fixes)
        return _plan(goal, steps)

    def unchecked_any(self, view: View, roots: list[str]) -> bool:
        return any(self.unchecked(view, r) for r in roots)

    def _which_waits(self, view: View, silent: list[str]) -> Human:
        """Several running units do not answer, none of them stopped or stuck, and no
        dependency says which waits on which (a proxy and its upstream with no systemd
        edge between them): restarting the wrong one is the 3 a.m. mistake."""
        words = "; ".join(f"{u}: {view.failing(u)}" for u in silent)
        return Human(
            "unknown",
            silent[0],
            f"{', '.join(silent)} run but do not answer ({words}); none has a stopped "
            "process, and no dependency between them says which waits on which",
            "A human must tell which one is slow (its own logs, or curl each directly); no "
            "restart is proposed, since restarting a proxy for its upstream's fault hides "
            "the fault.",
        )

    def unchecked(self, view: View, root: str) -> list[str]:
        """The reads that would tell how ``root`` fails and that were never made."""
        return sorted(
            {
                read.tool
                for read in self._evidence(view, root)
                if read.key not in view.found.asked and read.tool in self.available
            }
        )

    def _healthy(self, view: View, unit: str, status: UnitStatus) -> FinalNote:
        answered = [h for h in view.found.health.values() if h.outcome == "ok"]
        health = (
            "health target(s) " + ", ".join(f"{h.target} answered {h.status}" for h in answered)
            if answered
            else "no health target is configured for it, so only systemd's view was checked"
        )
        recovered = (
            f" It has recovered: systemd restarted it {status.n_restarts} times "
            f"(NRestarts={status.n_restarts})."
            if status.n_restarts
            else ""
        )
        since = status.active_enter_timestamp
        since_words = f" since {since:%Y-%m-%d %H:%M:%S} UTC" if since else ""
        fact = f"{unit} is {status.active_state}/{status.sub_state}{since_words}; {health}"
        return _note(
            f"{fact}.{recovered} Nothing it depends on is failing. No change is warranted.",
            Human("healthy", unit, fact, ""),
        )

    def _start_left_down(
        self, view: View, unit: str, status: UnitStatus, left: list[str]
    ) -> SubmitPlan:
        """``unit`` runs again (systemd restarted it), but what stopped with it did not
        start again: start those, dependencies first."""
        ordered = view.start_order(left)
        steps = [
            _step(
                "start_unit",
                dep,
                {"active_state": ["inactive", "failed"]},
                f"{dep} depends on {unit} and went down with it; {unit} is "
                f"{status.active_state} again (NRestarts={status.n_restarts}) but {dep} was "
                "not started again.",
            )
            for dep in ordered
        ]
        return _plan(f"Start {', '.join(ordered)}, which stopped with {unit}", steps)

    def _human_note(self, view: View, entry: str, human: Human, roots: list[str]) -> FinalNote:
        via = ""
        if human.unit != entry:
            chain = view.failing(entry)
            via = (
                f"{entry} is failing ({chain}) because of {human.unit}, which it needs. "
                if chain
                else ""
            )
        others = [r for r in roots if r != human.unit]
        more = f" Also failing: {', '.join(others)}." if others else ""
        text = f"{via}{human.unit}: {human.fact}. {human.advice} No plan is proposed.{more}"
        return _note(_cut(text, 3900), human)

    # -- one root ---------------------------------------------------------------------------

    def _classify(self, view: View, root: str, roots: list[str]) -> Human | Fix:
        status = view.status(root)
        if status is None:
            return Human(
                "unknown",
                root,
                f"{root} is failing, but its state could not be read",
                f"Look at systemctl status {root}.",
            )
        if status.load_state == "masked":
            return Human(
                "masked",
                root,
                f"{root} is masked (LoadState=masked, UnitFileState={status.unit_file_state})",
                f"systemd refuses to start it; if it should run, a human must unmask it "
                f"(systemctl unmask {root}) and start it.",
            )
        if status.load_state != "loaded" or status.need_daemon_reload:
            why = (
                f"LoadState={status.load_state}"
                + (f": {status.load_error}" if status.load_error else "")
                if status.load_state != "loaded"
                else "NeedDaemonReload=yes: its unit file changed on disk since systemd loaded it"
            )
            return Human(
                "unit_file_error",
                root,
                why,
                f"A human must fix or review its unit file ({status.fragment_path or 'none'}) "
                "and run systemctl daemon-reload first.",
            )
        denied = denied_reason(root)
        if denied is not None:
            return Human(
                "denylisted",
                root,
                f"{root} is failing ({view.failing(root)})",
                f"opsbot never acts on it (built-in denylist {denied!r}): a human must look.",
            )
        if status.active_state in ("activating", "deactivating"):
            return Human(
                "in_transition",
                root,
                f"{root} is {status.active_state}/{status.sub_state} "
                f"(NRestarts={status.n_restarts}, {_ended(status)})",
                "systemd is acting on it right now; diagnose again once it settles.",
            )
        if status.active_state in RUNNING:
            return self._running(view, root, status)
        return self._down(view, root, status, roots)

    def _down(self, view: View, root: str, status: UnitStatus, roots: list[str]) -> Human | Fix:
        found = view.found
        checked: list[str] = []
        disk = found.disk.get(root)
        if disk is not None:
            full = disk.full
            if full:
                d = full[0]
                return Human(
                    "disk_full",
                    root,
                    f"the filesystem of {d.path} ({d.role}) is full: {d.used_percent:.0f}% "
                    f"used, {d.free_bytes} bytes free",
                    f"A human must free space there (or grow it), then start {root}.",
                )
            checked.append("its filesystems have room")
        unit_file = found.unit_file.get(root)
        if unit_file is not None:
            for path in unit_file.paths:
                if path.exists is False and not path.optional:
                    return Human(
                        "missing_file",
                        root,
                        f"{path.path}, which its {path.role} names, does not exist",
                        f"A human must restore it or fix the unit, then start {root}.",
                    )
            for path in unit_file.paths:
                if path.exists and path.readable_by_unit is False:
                    return Human(
                        "permission_denied",
                        root,
                        f"{path.path} ({path.role}) is {path.kind} {path.mode} "
                        f"{path.owner}:{path.group}, which its user {unit_file.user} cannot "
                        f"{'run' if path.role.endswith('program') else 'read'}",
                        f"A human must fix the permissions (or User=/Group=), then start {root}.",
                    )
            checked.append("every file it names exists and is readable by its user")
        held = self._port_held(view, root)
        if held is not None:
            return held
        if found.listeners:
            checked.append("its port is free")
        tail = found.journal.get(root)
        episode = leads.own_lines(tail, _since(tail, status)) if tail is not None else []
        if unit_file is not None and _failed_starting(status):
            # Only its last words before it failed starting can name the setting that
            # stops it: a line it logged while serving (a request line is enough) cannot.
            environment = set(unit_file.environment)
            for key, value, line in leads.settings_named(episode[-LAST_WORDS:]):
                if f"{key}={value}" in environment:
                    files = ", ".join(unit_file.files) or "its unit file"
                    return Human(
                        "config_error",
                        root,
                        f"its environment sets {key}={value} (systemctl cat {root}: {files}), "
                        f'and every attempt to start it ended saying "{_cut(line.message, 160)}"',
                        f"A human must fix that setting, then run systemctl reset-failed {root} "
                        "and start it.",
                    )
        failed = status.failed_command
        if failed is not None and failed.phase == "ExecStartPre" and unit_file is not None:
            changed = _changed_after(unit_file.paths, status.inactive_enter_timestamp, failed.argv)
            if not changed:
                return Human(
                    "config_error",
                    root,
                    f"its start check failed: ExecStartPre={_cut(failed.argv, 140)} "
                    f"{failed.code} with status {failed.status}, and nothing it checks "
                    "changed since",
                    f"The check will fail the same way until a human fixes what it checks "
                    f"(journalctl -u {root} shows its words), then starts {root}.",
                )
            checked.append(f"{', '.join(changed)} changed after its start check failed")
        if failed is not None and _died_starting(status, failed) and unit_file is not None:
            changed = _changed_after(unit_file.paths, status.inactive_enter_timestamp, failed.argv)
            if not changed:
                last = episode[-1].message if episode else ""
                said = f'; its last words: "{_cut(last, 160)}"' if last else ""
                return Human(
                    "config_error",
                    root,
                    f"its program exited with status {failed.status} "
                    f"{failed.ran_seconds:.1f} s after it started, before it was serving, and "
                    f"nothing it was started with changed since{said}",
                    f"It fails while starting: a start would fail the same way until a human "
                    f"fixes what it reads (journalctl -u {root} tells what), then starts it.",
                )
            checked.append(f"{', '.join(changed)} changed after it failed starting")
        limit = leads.start_limit_hit(tail, _since(tail, status)) if tail is not None else None
        facts = "; ".join(checked) or "nothing shows a cause that remains"
        down = view.dependents_down(root, roots)
        then = [
            _step(
                "start_unit",
                unit,
                {"active_state": ["inactive", "failed"]},
                f"{unit} depends on {root} and stopped with it; start it again after it.",
            )
            for unit in down
        ]
        after = f", then {', '.join(down)}, which stopped with it" if down else ""
        if limit is not None or status.result == "start-limit-hit":
            seen = "systemd gave up restarting it (start limit)"
            return Fix(
                [
                    _step(
                        "reset_failed_unit",
                        root,
                        {"active_state": [status.active_state]},
                        f"{root} is {status.active_state} ({_ended(status)}, "
                        f"NRestarts={status.n_restarts}): {seen}. Checked: {facts}. Clearing "
                        "the failed state resets the limit.",
                    ),
                    _step(
                        "start_unit",
                        root,
                        {"active_state": ["inactive", "failed"]},
                        f"Start {root} again once its start limit is reset.",
                    ),
                    *then,
                ],
                f"Clear the start limit of {root} and start it{after}",
            )
        return Fix(
            [
                _step(
                    "start_unit",
                    root,
                    {"active_state": [status.active_state]},
                    f"{root} is {status.active_state} ({_ended(status)}); checked: {facts}; "
                    "so starting it again should bring it back.",
                ),
                *then,
            ],
            f"Start {status.active_state} {root}{after}",
        )

    def _port_held(self, view: View, root: str) -> Human | None:
        """Another process holds a port ``root`` needs: its health target's, or one its
        own output (since it stopped) says is in use."""
        status = view.status(root)
        wanted = [view.port_of(root)]
        if status is not None:
            wanted += _text_ports(view, root, status)
        for listeners in view.found.listeners.values():
            for item in listeners.listeners:
                if item.port not in wanted:
                    continue
                if any(p.unit == root for p in item.processes):
                    continue  # its own socket
                owners = ", ".join(
                    f"pid {p.pid} {p.comm}" + (f" of {p.unit}" if p.unit else "")
                    for p in item.processes[:2]
                )
                return Human(
                    "port_in_use",
                    root,
                    f"port {item.port} ({item.address}) it listens on is held now by user "
                    f"{item.user}" + (f" ({owners})" if owners else ""),
                    f"A human must stop what holds the port (or move {root} to another), "
                    f"then start {root}.",
                )
        return None

    def _running(self, view: View, root: str, status: UnitStatus) -> Human | Fix:
        found = view.found
        failed_reload = view.reload_failed(root)
        if failed_reload:
            return Human(
                "config_error",
                root,
                f"{root} runs, but its last reload failed ({failed_reload}): it runs the "
                "previous configuration",
                "A human must fix the configuration and reload again; a restart would load "
                "the broken one and take it down.",
            )
        stuck = view.process_stuck(root)
        bad = view.health_failing(root)
        if stuck or any(h.outcome == "timeout" for h in bad):
            why = stuck or "; ".join(f"health target {h.target} {_health_words(h)}" for h in bad)
            return Fix(
                [
                    _step(
                        "restart_unit",
                        root,
                        _pinned(status),
                        f"{root} is active (invocation {status.invocation_id[:12]}) but {why}: "
                        "it is alive but not serving. Its dependencies are healthy.",
                    )
                ],
                f"Restart {root}, which runs but does not answer",
            )
        refused = [h for h in bad if h.outcome in ("connection_refused", "connection_error")]
        if refused:
            held = self._port_held(view, root)
            if held is not None:
                return held
            return Human(
                "app_error",
                root,
                f"{root} is active but health target {refused[0].target} "
                f"{_health_words(refused[0])}",
                f"Check that {root} listens where the target expects (and that nothing else "
                "does); no restart is proposed.",
            )
        unit_file = found.unit_file.get(root)
        tail = found.journal.get(root)
        loaded = max(
            [
                t
                for t in (
                    status.exec_main_start_timestamp,
                    leads.last_reload(tail) if tail else None,
                )
                if t
            ],
            default=None,
        )
        if unit_file is not None and loaded is not None:
            changed = [
                p.path
                for p in unit_file.paths
                if p.modified is not None and p.modified > loaded and not p.role.endswith("program")
            ]
            if changed:
                tool = "reload_unit" if status.can_reload else "restart_unit"
                return Fix(
                    [
                        _step(
                            tool,
                            root,
                            _pinned(status),
                            f"{root} answers {bad[0].status if bad else 'errors'} while its "
                            f"dependencies are healthy, and {', '.join(changed)} changed after it "
                            f"last loaded it ({loaded:%H:%M:%S} UTC): it serves the old one.",
                        )
                    ],
                    f"{'Reload' if status.can_reload else 'Restart'} {root} to load its changed "
                    "configuration",
                )
        first = bad[0] if bad else None
        what = f"health target {first.target} {_health_words(first)}" if first else "it fails"
        return Human(
            "app_error",
            root,
            f"{root} is active and its dependencies are healthy, but {what}",
            f"Its own logs (journalctl -u {root}) tell why; nothing it was started with changed, "
            "so no restart or reload is proposed.",
        )


def _failed_starting(status: UnitStatus) -> bool:
    """Its last run ended while it was starting: what it said then may say why."""
    failed = status.failed_command
    return failed is not None and _died_starting(status, failed)


def _text_ports(view: View, unit: str, status: UnitStatus) -> list[int]:
    """Ports its own output says are in use, as leads for list_listeners: only when it
    failed while starting (a bind error ends a start), and only from its last words. Its
    output is anyone's text (a client's request line lands in it): a port named while
    it was serving, or before the last lines, may not decide anything."""
    tail = view.found.journal.get(unit)
    if tail is None or not _failed_starting(status):
        return []
    return leads.ports_named(leads.own_lines(tail, _since(tail, status))[-LAST_WORDS:])


def _died_starting(status: UnitStatus, failed: Any) -> bool:
    """Its main program exited with an error while starting: within START_GRACE seconds,
    or (Type=notify) before it ever said it was ready in this run."""
    if failed.phase != "ExecStart" or failed.code != "exited" or failed.status == 0:
        return False
    return failed.ran_seconds is not None and failed.ran_seconds < START_GRACE


def _since(tail: JournalTail, status: UnitStatus) -> datetime | None:
    """Where its current trouble starts in ``tail`` (leads.episode_start)."""
    return leads.episode_start(tail, status.active_enter_timestamp)


def _changed_after(paths: Sequence[Any], moment: datetime | None, argv: str) -> list[str]:
    """The files of a failed command that changed after ``moment`` (the failure)."""
    if moment is None:
        return []
    return [
        p.path for p in paths if p.path in argv and p.modified is not None and p.modified > moment
    ]
