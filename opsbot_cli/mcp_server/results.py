"""The four tools' results as text for an agent's model, from what the console's own
functions return (the verdict, ``opsbot plans --json``, ``opsbot show --json``, ``opsbot
audit``'s trusted entries).

opsbot's words first: ids, states, times, units, the argv each step runs, who approved,
and for a plan that waits how a person approves it (the command, or the page): text,
never a token. Then every free text (a goal, a reason, a note, evidence, a journal field)
in the quoted block of opsbot_cli.mcp_server.quoting.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from opsbot_cli.story import Apart, AuditEntry
from plans import step_argv
from shared_io.exit_codes import TABLE
from shared_schema.text import printable
from shared_schema.verdict import NoteVerdict, PlanVerdict

from .quoting import Quoted, bounded

__all__ = [
    "approval_lines",
    "plan_result",
    "plans_result",
    "story_result",
    "verdict_result",
]

#: What nothing opsbot mcp does can do: said in every result about a plan.
NO_CHANGE = "Nothing has changed on the host: opsbot mcp only reads and asks."
#: The journal fields of a story shown as opsbot's words: names, numbers, states, argv
#: opsbot built. Any other field (a goal, a reason, evidence, a tool a model named) is
#: quoted.
STORY_FIELDS = (
    "STATE",
    "STEP",
    "DECIDED_BY",
    "ACTION",
    "EXIT_STATUS",
    "OUTCOME",
    "APPROVER",
    "APPROVED_BY_RULE",
    "RULE_SHA256",
    "UNIT",
    "KIND",
    "ENDED_BY",
    "DUPLICATE",
    "RUN_ID",
    "EXPIRES_AT",
    "SECONDS",
    "FOLLOW_UP_OF",
    "INCIDENT",
    "FOLLOWS",
    "ARGV",
)


#: What a story's entry may show outside the quotes: an event name (``plan.accepted``),
#: a source as opsbot's audit names it (``opsbot-executor.service (uid 998)``), a field
#: value that is one word of names and numbers, or an argv as the executor runs it. A
#: root-run service may log anything with a PLAN_ID: what does not look like opsbot's own
#: (words with spaces between them) is quoted.
EVENT = re.compile(r"[a-z][a-z_]*(\.[a-z_]+)+")
SOURCE = re.compile(r"[A-Za-z0-9@._:-]{1,120} \(uid [a-z0-9_.-]{1,32}\)")
PLAIN = re.compile(r"[A-Za-z0-9@._:/+=,-]{0,200}")
ARGV = re.compile(r"systemctl [a-z-]{1,20} --no-ask-password -- [A-Za-z0-9@._:\\-]{1,256}")


def _plain(key: str, value: str) -> bool:
    return bool((ARGV if key == "ARGV" else PLAIN).fullmatch(value))


def approval_lines(plan_id: str, sha256: str) -> list[str]:
    """How a person approves a waiting plan; this server cannot, nor can its client."""
    return [
        "It runs only once approved: by a person, for this exact plan, or by a standing "
        "rule root wrote in opsbot.toml ([[approve.rule]]; `opsbot policy report` says what "
        "the rules decided). This server has no approve tool; no agent can approve:",
        f"  root on this host, after `opsbot show {plan_id}`: "
        f"sudo opsbot approve {plan_id} --sha256 {sha256}",
        "  or an approver, on opsbot's approval page: the link opsbot-notify sent them, "
        "and the code of their authenticator app",
    ]


def _meaning(status: int) -> str:
    return dict(TABLE).get(status, "")


def verdict_result(verdict: PlanVerdict | NoteVerdict, status: int, symptom: str = "") -> str:
    """A diagnosis's verdict: the plan (its id, sha256, each step's argv, how a person
    approves it) or the note's kind and cause; ``status`` is what ``opsbot diagnose``
    exits with. The goal, reasons, note and evidence are quoted."""
    quoted = Quoted()
    quoted.add("symptom asked about", symptom)
    steps = f"{verdict.steps_used} step{'' if verdict.steps_used == 1 else 's'}"
    lines = [f"diagnosis {verdict.run_id} of {verdict.unit}: {steps}"]
    if isinstance(verdict, PlanVerdict):
        plan = verdict.plan
        lines += [
            f"verdict: plan {verdict.plan_id} proposed; it waits for approval (a person's, "
            "or a standing rule's)",
            f"sha256: {verdict.sha256}",
            "steps (the exact argv each runs, as root's apply will run it):",
        ]
        quoted.add("goal", plan.goal)
        for index, (step, argv) in enumerate(zip(plan.steps, step_argv(plan), strict=True), 1):
            lines.append(f"  {index}. {shlex.join(argv)}")
            if step.reason:
                quoted.add(f"step {index} reason", step.reason)
        lines += [NO_CHANGE, *approval_lines(verdict.plan_id, verdict.sha256)]
    else:
        cause = verdict.cause
        lines.append(
            f"verdict: no plan (ended by {verdict.ended_by}"
            + (f", cause {cause.kind}" if cause is not None else "")
            + "); the note is quoted below"
        )
        lines.append(NO_CHANGE)
        if cause is not None:
            quoted.add("cause unit", cause.unit or "")
            quoted.add("cause fact", cause.fact)
        quoted.add("note", verdict.text)
    lines.append(f"(opsbot diagnose would exit {status}: {_meaning(status)})")
    for item in verdict.evidence:
        quoted.add("evidence" + (" (an error)" if item.error else ""), item.line())
    return bounded(lines, quoted)


def _window(summary: Mapping[str, Any]) -> str:
    from opsbot_cli.output import window_words

    if summary["state"] != "APPROVED" or summary.get("waits_for_window") is None:
        return ""
    return f"; runs {window_words(summary['waits_for_window'])}"


def _approved(summary: Mapping[str, Any]) -> str:
    if summary.get("approved_by_rule"):
        rule = printable(str(summary["approved_by_rule"]))
        return f"approved by standing rule {rule} (a rule, not a person)"
    if summary.get("approved_by"):
        return f"approved by {printable(str(summary['approved_by']))}"
    return ""


def plans_result(shown: Sequence[Mapping[str, Any]], total: int | None, limit: int) -> str:
    """``opsbot plans --json``: one line a plan (id, state, when, by, units, who approved);
    each goal quoted."""
    quoted = Quoted()
    lines = [f"{len(shown)} plan{'' if len(shown) == 1 else 's'} (newest first):"]
    for plan in shown:
        incident = plan.get("incident")
        said = [
            f"  {plan['plan_id']} {plan['state']}",
            f"submitted {plan['submitted_at']} by {printable(str(plan['submitted_by']))}",
            f"units {printable(', '.join(plan['units']))}",
            _approved(plan) + _window(plan),
            f"a follow-up in incident {incident}"
            if incident not in (None, plan["plan_id"])
            else "",
        ]
        lines.append("; ".join(part for part in said if part))
        quoted.add(f"goal of {plan['plan_id']}", str(plan["goal"]))
    if isinstance(total, int) and total > len(shown):
        lines.append(f"({total} stored plans match; at most {limit} are listed: limit for more)")
    if any(p["state"] == "PROPOSED" for p in shown):
        lines.append(
            "A PROPOSED plan waits for a person's approval, or a standing rule root wrote "
            "(show_plan says how); no agent can approve."
        )
    return bounded(lines, quoted)


def plan_result(detail: Mapping[str, Any]) -> str:
    """``opsbot show --json``: state, sha256, who submitted and approved it, its incident,
    each step's argv and how it ran, the verification, the history; for a PROPOSED plan
    how a person approves it. The goal, reasons, outputs, evidence and history reasons are
    quoted."""
    quoted = Quoted()
    s = detail["summary"]
    plan = detail["plan"]
    lines = [
        f"plan {s['plan_id']}: {s['state']}",
        f"sha256: {s['sha256']}",
        f"submitted {s['submitted_at']} by {printable(str(s['submitted_by']))}",
    ]
    quoted.add("goal", str(s["goal"]))
    quoted.add("state reason", str(s.get("reason") or ""))
    if _approved(s):
        lines.append(_approved(s) + _window(s))
    symptom = plan.get("symptom")
    if symptom:
        health = ", ".join(symptom.get("health") or []) or "none"
        lines.append(f"symptom: {symptom['unit']}; health targets failing: {printable(health)}")
    follows = plan.get("follows")
    incident = s.get("incident")
    if follows:
        lines.append(
            f"incident {incident or follows}: follows plan {follows}, which ran and did not "
            "cure the symptom"
        )
    elif incident and incident != s["plan_id"]:
        lines.append(f"incident {incident}")
    elif incident:
        lines.append(f"incident {incident} (this plan is its first)")
    lines.append(f"on a failed step: {'stop' if plan['stop_on_error'] else 'continue'}")
    lines.append("steps (the exact argv each runs):")
    records = {r["index"]: r for r in detail.get("steps", [])}
    for index, (step, argv) in enumerate(zip(plan["steps"], detail["argv"], strict=True), 1):
        ran = ""
        record = records.get(index)
        if record is not None and record["outcome"] != "not-run":
            ran = f"  -> {record['outcome']} (exit {record['exit_status']})"
            quoted.add(f"step {index} output", str(record.get("output") or ""))
        lines.append(f"  {index}. {shlex.join(argv)}{ran}")
        expect = step.get("expect")
        if expect:
            wanted = ", ".join(
                f"{key} {'|'.join(value) if isinstance(value, list) else value}"
                for key, value in expect.items()
                if value
            )
            lines.append(f"     runs only if {printable(wanted)}")
        quoted.add(f"step {index} reason", str(step.get("reason") or ""))
    verification = s.get("verification")
    if verification is not None:
        lines.append(
            f"verification: {verification['result']} {verification['seconds']:g} s after "
            f"the last step, by {printable(str(verification['by']))}"
        )
        for number, line in enumerate(verification.get("evidence") or [], 1):
            quoted.add(f"verification evidence {number}", str(line))
    elif s["state"] == "APPLIED":
        lines.append("verification: not yet (opsbot-verify watches its units for a while)")
    history = detail.get("history") or []
    if history:
        lines.append("history:")
        for number, item in enumerate(history, 1):
            lines.append(
                f"  {number}. {printable(str(item.get('at', '?')))} "
                f"{printable(str(item.get('state', '?')))} by {printable(str(item.get('by', '?')))}"
            )
            quoted.add(f"history {number} reason", str(item.get("reason") or ""))
    lines.append(NO_CHANGE)
    if s["state"] == "PROPOSED":
        lines += approval_lines(s["plan_id"], s["sha256"])
    return bounded(lines, quoted)


def story_result(
    plan_id: str,
    state: str,
    entries: Sequence[AuditEntry],
    ignored: int,
    summary: str,
    apart: Sequence[Apart] = (),
) -> str:
    """``opsbot audit ID``: the plan's trusted journal entries, oldest first, each with
    its time, event, source and the fields opsbot itself sets; ``summary`` (the audit's
    one line, which names the goal), every other field and each event name quoted. The
    entries ``apart`` (one of opsbot's users logging another writer's event) are left out
    of the story: each said by its event and source only, and whose event it is."""
    quoted = Quoted()
    quoted.add("summary", summary)
    lines = [
        f"the story of plan {plan_id} (now {state}) from this host's journal: "
        f"{len(entries)} entries written by opsbot itself (root or its units), oldest first"
    ]
    for number, entry in enumerate(entries, 1):
        plain = {
            key: value
            for key, value in entry.fields.items()
            if key in STORY_FIELDS and _plain(key, value)
        }
        said = [
            f"  {number}. {entry.time.isoformat()}",
            f"[{entry.source}]" if SOURCE.fullmatch(entry.source) else "[source quoted]",
            entry.event if EVENT.fullmatch(entry.event) else "(event quoted)",
            *(f"{key.lower()}={value}" for key, value in plain.items()),
        ]
        lines.append(" ".join(said))
        if not SOURCE.fullmatch(entry.source):
            quoted.add(f"entry {number} source", entry.source)
        if not EVENT.fullmatch(entry.event):
            quoted.add(f"entry {number} event", entry.event)
        rest = " ".join(
            f"{key.lower()}={value}"
            for key, value in entry.fields.items()
            if key not in plain and value
        )
        quoted.add(f"entry {number} fields", rest)
    for one in apart:
        event = one.entry.event if EVENT.fullmatch(one.entry.event) else "(an event quoted)"
        source = one.entry.source if SOURCE.fullmatch(one.entry.source) else "(a source)"
        lines.append(
            f"left out, not from its writer: {event} [{source}] at {one.entry.time.isoformat()}"
            f": {one.why}; not the plan's history"
        )
        if not EVENT.fullmatch(one.entry.event):
            quoted.add("left-out event", one.entry.event)
    if ignored:
        lines.append(f"({ignored} entries naming this plan were ignored: not written by opsbot)")
    lines.append(NO_CHANGE)
    return bounded(lines, quoted)
