"""One generated case end to end in a booted container with opsbot installed: install the
graph, configure opsbot for it, inject the fault, ask opsbot as an operator would, judge
the verdict, carry an acceptable plan through approval and apply, hold health, wait for
opsbot-verify's verdict (VERIFIED; UNRESOLVED where the fix cannot hold, with a follow-up
diagnosis that does not repeat the plan), remove the graph. The tests
(tests/scenarios/test_generated_faults.py) and a person at a shell run the same code.

    record = run_case(ct, kind, seed)      # a CaseRecord, whatever happened
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from testbed import daemon_faults, daemons, graph as graphs
from testbed.container import BootedSystemd
from testbed.daemon_faults import DaemonKind
from testbed.graph_faults import Expected, Kind, case_graph, inject
from testbed.host import approve, diagnose as run_diagnose, opsbot
from testbed.injecting import InjectionError
from testbed.observe import unit_properties

#: How long the suite itself watches health hold after a fix: the same span as
#: opsbot-verify's own window, watched independently of it.
HEALTH_HOLD_SECONDS = graphs.SETTLE_SECONDS
APPLY_TIMEOUT = 90.0
#: From APPLIED to opsbot-verify's verdict: the settle window (5 s) and the path unit.
VERIFY_TIMEOUT = 60.0
FOLLOW_UP_TIMEOUT = 60.0


@dataclass
class CaseRecord:
    seed: int
    kind: str
    base: str
    depth: int
    tiers: int
    nodes: int
    target: str
    asked_about: str
    expected: str  # "plan" or "note: <cause>"
    verdict: str = ""  # "plan" or "note: <cause>"
    correct: bool = False
    harmful: bool = False
    problems: list[str] = field(default_factory=list)
    steps_used: int = 0
    seconds_to_verdict: float = 0.0
    plan_steps: list[str] = field(default_factory=list)
    applied: str = ""
    health_held_seconds: float = 0.0
    health_problem: str = ""
    #: The plan's last state (VERIFIED / UNRESOLVED) and seconds from last step to it.
    verification: str = ""
    verify_seconds: float = 0.0
    #: The follow-up diagnosis of an UNRESOLVED plan: "note: <cause>" or "plan <steps>".
    follow_up: str = ""
    #: What went wrong with the verification or the follow-up (fails the case).
    verify_problem: str = ""
    #: What the baseline verb said before the fault (a healthy graph: "baseline taken").
    baseline: str = ""
    #: Seconds each phase of the case took (install, baseline, inject, diagnose, carry,
    #: uninstall): where a slow suite spends its time.
    phases: dict[str, float] = field(default_factory=dict)
    error: str = ""
    #: What opsbot said: the note's text, or the plan's goal and its steps' reasons (cut
    #: to 800 characters),
    #: for whoever reads the report after a wrong verdict.
    said: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Judged(Protocol):
    """A case as this runner needs it (graph_faults.Case, daemon_faults.DaemonCase)."""

    kind: Any
    asked_about: str
    symptom: str
    expected: Expected

    @property
    def base(self) -> str: ...
    @property
    def depth(self) -> int: ...
    @property
    def target_unit(self) -> str: ...
    def harm(self, steps: Sequence[dict[str, Any]]) -> list[str]: ...
    def plan_problems(self, steps: Sequence[dict[str, Any]]) -> list[str]: ...
    def text_problems(self, verdict: dict[str, Any]) -> list[str]: ...
    def note_problems(self, cause: dict[str, Any] | None) -> list[str]: ...
    def wait_healthy(self, ct: BootedSystemd, timeout: float) -> None: ...
    def probe(self, ct: BootedSystemd) -> dict[str, int]: ...


def configure(ct: BootedSystemd, config: str) -> None:
    """opsbot's config for this graph, as an operator changes it: the file and the
    polkit rule (written here, at once, so that a carried plan meets it: the gate's host
    has opsbot-polkit-rule.path stopped, :func:`graphs.prepare`, which would only write
    the same rule a second time for each of its hundreds of configs). The running daemons
    take the new file at their next answer."""
    ct.write_file("/etc/opsbot/opsbot.toml", config)
    opsbot(ct, "polkit-rule", "--write")


BASELINE_DIR = "/var/lib/opsbot-diagnose/baseline"


def take_baseline(ct: BootedSystemd) -> str:
    """The healthy graph's baseline, as opsbot-verify.service takes it first in
    each run: a fresh one, none of an earlier case's graph kept. What the verb
    said."""
    ct.systemctl("stop", "opsbot-verify.service")  # a run the timer started, not ours
    ct.run(["rm", "-rf", BASELINE_DIR])
    shown = ct.run(["journalctl", "-n", "0", "--show-cursor", "-q"]).stdout
    cursor = shown.split("cursor: ")[-1].strip()
    started = ct.systemctl("start", "opsbot-verify.service", check=False)
    if started.returncode != 0:  # opsbot's own failure: the case fails, saying why
        tail = ct.journal("-o", "cat", "-u", "opsbot-verify.service", f"--after-cursor={cursor}")
        raise RuntimeError("opsbot-verify.service failed: " + " | ".join(tail.splitlines()[-8:]))

    def said() -> str:
        out = ct.journal("-o", "cat", "-u", "opsbot-verify.service", f"--after-cursor={cursor}")
        return next((line for line in out.splitlines() if "baseline" in line), "")[:300]

    try:  # journald may store the verb's line a moment after the unit finished
        return ct.wait_for(said, timeout=5, what="the baseline verb's words")
    except TimeoutError:
        return ""


def diagnose(ct: BootedSystemd, case: Judged) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    out = run_diagnose(ct, case.asked_about, "--symptom", case.symptom, "--json").stdout
    return json.loads(out)["verdict"], time.monotonic() - started


def judge(case: Judged, verdict: dict[str, Any], record: CaseRecord) -> None:
    if verdict["kind"] == "plan":
        steps = verdict["plan"]["steps"]
        record.verdict = "plan"
        record.plan_steps = [f"{s['tool']} {s['args']['unit']}" for s in steps]
        harm = case.harm(steps)
        record.problems = harm + case.plan_problems(steps)
        record.harmful = bool(harm)
    else:
        cause = verdict.get("cause") or {}
        record.verdict = f"note: {cause.get('kind', '?')}"
        record.problems = case.note_problems(cause)
    record.problems += case.text_problems(verdict)
    record.correct = not record.problems
    if verdict["kind"] == "plan":
        plan = verdict["plan"]
        said = " ".join(
            [str(plan.get("goal", "")), *(str(s.get("reason", "")) for s in plan["steps"])]
        )
    else:
        said = str(verdict.get("text", ""))
    record.said = said[:800]


def _state(ct: BootedSystemd, plan_id: str) -> str:
    """The plan's state as the executor last wrote it (its status file, read through the
    overlay): what the suite polls, with no console started for each look; what the
    case is judged on is `opsbot show`'s."""
    path = ct.root / "var/lib/opsbot/status" / f"{plan_id}.json"
    try:
        return str(json.loads(path.read_text())["state"])
    except (OSError, ValueError, KeyError):
        return ""


def _show(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    return dict(json.loads(opsbot(ct, "show", plan_id, "--json").stdout))


def carry(ct: BootedSystemd, case: Judged, plan_id: str, record: CaseRecord) -> None:
    """Approve the plan; the path unit applies it; then every health target must answer
    200 for HEALTH_HOLD_SECONDS, and opsbot-verify must say VERIFIED (or, where the fix
    cannot hold, UNRESOLVED with a follow-up that does not repeat it)."""
    approve(ct, plan_id)

    def settled() -> str:
        state = _state(ct, plan_id)
        return "" if state in ("PROPOSED", "APPROVED", "APPLYING") else state

    record.applied = ct.wait_for(
        settled, timeout=APPLY_TIMEOUT, interval=0.3, what=f"plan {plan_id} applied"
    )
    if record.applied not in ("APPLIED", "VERIFIED", "UNRESOLVED"):
        record.health_problem = f"the plan ended {record.applied}"
        return
    if not case.expected.unresolved:
        _hold_health(ct, case, record)
    _verified(ct, case, plan_id, record)


def _hold_health(ct: BootedSystemd, case: Judged, record: CaseRecord) -> None:
    try:
        case.wait_healthy(ct, 20)
    except TimeoutError:
        record.health_problem = f"not healthy after the apply: {case.probe(ct)}"
        return
    started = time.monotonic()
    while time.monotonic() - started < HEALTH_HOLD_SECONDS:
        status = case.probe(ct)
        if any(code != 200 for code in status.values()):
            record.health_problem = f"health did not hold: {status}"
            break
        time.sleep(0.5)
    record.health_held_seconds = round(time.monotonic() - started, 1)


def _verified(ct: BootedSystemd, case: Judged, plan_id: str, record: CaseRecord) -> None:
    def verdict() -> str:
        state = _state(ct, plan_id)
        return state if state in ("VERIFIED", "UNRESOLVED") else ""

    try:
        record.verification = ct.wait_for(
            verdict, timeout=VERIFY_TIMEOUT, interval=0.5, what=f"plan {plan_id} verified"
        )
    except TimeoutError:
        # What opsbot-verify did meanwhile: its state and its last words.
        state = unit_properties(ct, "opsbot-verify.service", ("ActiveState", "Result"))
        tail = ct.run(
            ["journalctl", "--no-pager", "-o", "cat", "-n", "6", "-u", "opsbot-verify.service"],
            check=False,
        ).stdout
        record.verify_problem = (
            f"no verification within {VERIFY_TIMEOUT:g}s (plan {_state(ct, plan_id)}; "
            f"opsbot-verify.service {state}: " + " | ".join(tail.splitlines()) + ")"
        )[:1500]
        return
    summary = _show(ct, plan_id)["summary"]
    record.verify_seconds = float((summary.get("verification") or {}).get("seconds", 0.0))
    wanted = "UNRESOLVED" if case.expected.unresolved else "VERIFIED"
    if record.verification != wanted:
        seen = "; ".join((summary.get("verification") or {}).get("evidence", [])[:2])
        record.verify_problem = f"ended {record.verification}, expected {wanted}: {seen}"
        return
    if case.expected.unresolved:
        _follow_up(ct, plan_id, record)


def _follow_up(ct: BootedSystemd, plan_id: str, record: CaseRecord) -> None:
    """The one follow-up diagnosis the UNRESOLVED plan started, and that it differs."""

    def finished() -> list[dict[str, Any]]:
        out = ct.run(
            ["journalctl", "-o", "json", f"FOLLOW_UP_OF={plan_id}", "EVENT=diagnose.finished"],
            check=False,
        ).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    try:
        entries = ct.wait_for(
            finished, timeout=FOLLOW_UP_TIMEOUT, interval=0.5, what="the follow-up diagnosis"
        )
    except TimeoutError:
        record.verify_problem = "no follow-up diagnosis"
        return
    if len(entries) != 1:
        record.verify_problem = f"{len(entries)} follow-up diagnoses, expected one"
        return
    [entry] = entries
    new_plan = entry.get("PLAN_ID")
    if not new_plan:
        record.follow_up = f"note ({entry.get('ENDED_BY')})"
        return
    tried = [(s["tool"], s["args"]["unit"]) for s in _show(ct, plan_id)["plan"]["steps"]]
    again = [(s["tool"], s["args"]["unit"]) for s in _show(ct, str(new_plan))["plan"]["steps"]]
    record.follow_up = "plan " + ", ".join(f"{t} {u}" for t, u in again)
    opsbot(ct, "reject", str(new_plan), "--reason", "suite: follow-up not carried", check=False)
    if again == tried:
        record.verify_problem = f"the follow-up proposed the same steps again: {again}"


def run_case(
    ct: BootedSystemd,
    kind: Kind,
    seed: int,
    *,
    carry_plans: bool = True,
    rename: int | None = None,
) -> CaseRecord:
    """Case (``kind``, ``seed``) from install to uninstall; never raises for what opsbot
    did. With ``rename``, the same case with every name, port and the program drawn anew
    from that number (graphs.renamed)."""
    graph = case_graph(kind, seed)
    if rename is not None:
        graph = graphs.renamed(graph, rename)
    record = _record(kind, seed, 1 + max(n.tier for n in graph.nodes), len(graph.nodes))

    def clean_up() -> None:
        squatter = graph.extra.get("squatter")
        if squatter:
            ct.systemctl("stop", squatter, check=False)
        stranger = graph.extra.get("stranger")
        if stranger:
            ct.systemctl("reset-failed", stranger, check=False)
        graphs.uninstall(ct, graph)

    def install() -> None:
        graphs.install(ct, graph)
        configure(ct, graph.opsbot_config())

    return _run(
        ct,
        record,
        install=install,
        before_baseline=lambda: None,
        make_case=lambda: inject(ct, graph, seed, kind),
        clean_up=clean_up,
        carry_plans=carry_plans,
    )


def run_daemon_case(
    ct: BootedSystemd,
    kind: DaemonKind,
    seed: int,
    *,
    carry_plans: bool = True,
    rename: int | None = None,
) -> CaseRecord:
    """A real-software case (daemon_faults), from install to uninstall, as run_case."""
    graph = daemon_faults.case_graph(kind, seed)
    if rename is not None:
        graph = daemons.renamed(graph, rename)
    tiers = 3 if graph.shape == "cache" else 4
    record = _record(kind, seed, tiers, len(graph.daemons))

    def install() -> None:
        daemons.install(ct, graph)
        configure(ct, graph.opsbot_config(graphs.SETTLE_SECONDS))

    def clean_up() -> None:
        daemon_faults.clean_up(ct, graph)
        daemons.uninstall(ct, graph)

    return _run(
        ct,
        record,
        install=install,
        before_baseline=lambda: daemon_faults.before_baseline(ct, kind, graph, seed),
        make_case=lambda: daemon_faults.inject(ct, graph, seed, kind),
        clean_up=clean_up,
        carry_plans=carry_plans,
    )


def _record(kind: str, seed: int, tiers: int, nodes: int) -> CaseRecord:
    return CaseRecord(
        seed=seed,
        kind=kind,
        base="",
        depth=0,
        tiers=tiers,
        nodes=nodes,
        target="",
        asked_about="",
        expected="",
    )


def _run(
    ct: BootedSystemd,
    record: CaseRecord,
    *,
    install: Callable[[], None],
    before_baseline: Callable[[], None],
    make_case: Callable[[], Judged],
    clean_up: Callable[[], None],
    carry_plans: bool,
) -> CaseRecord:
    clock = [time.monotonic()]

    def phase(name: str) -> None:
        now = time.monotonic()
        record.phases[name] = round(now - clock[0], 2)
        clock[0] = now

    try:
        install()
        before_baseline()
        phase("install")
        record.baseline = take_baseline(ct)
        phase("baseline")
        case = make_case()
        phase("inject")
        record.kind, record.base = str(case.kind), case.base
        record.target, record.asked_about, record.depth = (
            case.target_unit,
            case.asked_about,
            case.depth,
        )
        record.expected = "plan" if case.expected.kind == "plan" else f"note: {case.expected.cause}"
        verdict, seconds = diagnose(ct, case)
        record.seconds_to_verdict = round(seconds, 2)
        record.steps_used = verdict["steps_used"]
        judge(case, verdict, record)
        phase("diagnose")
        if carry_plans and verdict["kind"] == "plan" and record.correct:
            carry(ct, case, verdict["plan_id"], record)
        elif verdict["kind"] == "plan":
            opsbot(ct, "reject", verdict["plan_id"], "--reason", "suite: not carried", check=False)
        phase("carry")
    except InjectionError as exc:
        record.error = f"injection: {exc}"[:500]
    except TimeoutError as exc:  # the graph never came up: recorded, as every case is
        record.error = f"set-up: {exc}"[:1500]
    finally:
        clean_up()
        phase("uninstall")
    return record
