"""opsbot.fleet's review report, built on the controller from what opsbot_plans returned
on each host: the reviewed artefact that fleet-approve.yml approves exactly.

- ``fleet_report(hostplans, rules=None)``: ``{inventory_hostname: [plan, ...]}`` to the
  report, grouping plans of the same shape (the same goal and the same ordered (tool,
  unit) steps, per-host preconditions aside): "the same fix on 7 hosts"; with ``rules``
  (``{inventory_hostname: opsbot_policy_report's result}``), what each host's standing
  approval rules did and would have done, or why that could not be read;
- ``fleet_report_table(report)``: the report as terminal lines of at most 100 columns;
- ``fleet_report_markdown(report)``: the report as Markdown, every sha256 whole;
- ``fleet_plan_ends(results)``: how each plan a host waited on ended, from the
  registered loop of opsbot_plans (fleet-approve.yml's wait);
- ``fleet_report_path(path)``: ``path`` as the operator meant it, from the directory
  ansible-playbook was started in (a local task runs in the playbook's directory);
- ``fleet_report_refusals(report)``: the reviewed plans the standing rules left to a
  human, each with why and what root read (fleet-approve.yml says them before approving).

What a host answers is that host's word, never more: it is read into its own entry only
(keyed by the inventory's name, never by anything the host says), each id, sha256, state,
tool and unit must look as opsbot makes them or the host is "not reviewed" (the others
are), counts must be counts, and its text is shown escaped, on one line, bounded.
"""

from __future__ import annotations

import os
import re
import shlex
import textwrap
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import (
    PLAN_ID_RE,
    PLAN_STATES,
    SHA256_RE,
    TOOL_RE,
    UNIT_RE,
)

try:
    from ansible.errors import AnsibleFilterError as ReportError
except ImportError:  # the functions below are plain Python; tests may import them alone

    class ReportError(Exception):  # type: ignore[no-redef]
        """A hostplans value that is not what opsbot_plans returns."""


FORMAT = "opsbot-fleet-report/1"
#: The terminal's width: every table line fits it (opsbot prints 100 columns).
WIDTH = 100
#: What a plan must carry to be reviewed and approved.
PLAN_KEYS = ("plan_id", "sha256", "state", "goal", "steps")
#: A plan's steps at most (shared_schema/plan.py).
STEPS_MAX = 8
#: Characters kept of one text a host sends (opsbot's own bound for a reason is 500).
TEXT_MAX = 500
#: Lines kept of one list of lines a host sends (a decision's refusals, its readings).
LINES_MAX = 64
#: Per plan, the refusals and readings the terminal shows (the Markdown has them all).
LINES_SHOWN = 4
#: The decision of a reviewed plan on a host with rules that sent none about it.
NOT_RECORDED = "not recorded"


class Unreadable(Exception):
    """What one host answered is not what opsbot sends: that host is not reviewed."""


def printable(text: Any) -> str:
    """Text from a host (a goal, a unit) for one line: blanks as one space, anything
    unprintable escaped, so that a host cannot paint the operator's terminal."""
    said = " ".join(str(text).split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in said)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def shape(plan: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What makes two plans the same fix: the goal and the ordered (tool, unit) steps."""
    return str(plan["goal"]), tuple((str(s["tool"]), str(s["unit"])) for s in plan["steps"])


def _said(value: Any) -> str:
    """A value a host sent, quoted briefly for a refusal."""
    return repr(cut(printable(value), 40))


def _text(value: Any) -> str:
    return cut(printable(value), TEXT_MAX)


def _plan(plan: Any) -> dict[str, Any]:
    """One plan of a host's answer, as the report keeps it; Unreadable where it is not one
    opsbot made (an id, sha256, state, tool or unit that opsbot never writes)."""
    if not isinstance(plan, Mapping) or any(k not in plan for k in PLAN_KEYS):
        raise Unreadable(f"a plan is not what opsbot_plans returns (needs {', '.join(PLAN_KEYS)})")
    plan_id, sha256, state = plan["plan_id"], plan["sha256"], plan["state"]
    if not isinstance(plan_id, str) or not PLAN_ID_RE.match(plan_id):
        raise Unreadable(f"{_said(plan_id)} is not a plan id")
    if not isinstance(sha256, str) or not SHA256_RE.match(sha256):
        raise Unreadable(f"plan {plan_id}: {_said(sha256)} is not a whole sha256")
    if state not in PLAN_STATES:
        raise Unreadable(f"plan {plan_id}: {_said(state)} is not a plan state")
    steps = plan["steps"]
    if not isinstance(steps, list) or not 1 <= len(steps) <= STEPS_MAX:
        raise Unreadable(f"plan {plan_id}: its steps are not 1 to {STEPS_MAX} steps")
    for s in steps:
        if not isinstance(s, Mapping) or "tool" not in s or "unit" not in s:
            raise Unreadable(f"plan {plan_id}: steps need tool, unit")
        if not isinstance(s["tool"], str) or not TOOL_RE.match(s["tool"]):
            raise Unreadable(f"plan {plan_id}: {_said(s['tool'])} is not a tool")
        if not isinstance(s["unit"], str) or not UNIT_RE.match(s["unit"]):
            raise Unreadable(f"plan {plan_id}: {_said(s['unit'])} is not a unit")
    return {
        "plan_id": plan_id,
        "sha256": sha256,
        "state": state,
        "goal": cut(str(plan["goal"]), TEXT_MAX),
        "steps": [
            {
                "tool": s["tool"],
                "unit": s["unit"],
                "argv": [cut(str(a), TEXT_MAX) for a in (s.get("argv") or [])[:LINES_MAX]],
                "precondition": s.get("precondition"),
            }
            for s in steps
        ],
        "evidence": [cut(str(e), TEXT_MAX) for e in (plan.get("evidence") or [])[:LINES_MAX]],
        "submitted_at": cut(str(plan.get("submitted_at", "")), 64),
    }


def _plans(plans: Any) -> list[dict[str, Any]]:
    if not isinstance(plans, list):
        raise Unreadable("its plans are not a list")
    return [_plan(p) for p in plans]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unreadable(f"{_said(value)} is not a count")
    return value


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise Unreadable(f"{_said(value)} is not counts")
    return {_text(k): _count(n) for k, n in value.items()}


def _lines(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise Unreadable(f"{_said(value)} is not a list of lines")
    return [_text(line) for line in value[:LINES_MAX]]


def _rule(rule: Any) -> dict[str, Any]:
    if not isinstance(rule, Mapping):
        raise Unreadable(f"{_said(rule)} is not a rule")
    return {
        "name": cut(printable(rule.get("name", "?")), 48),
        "mode": cut(printable(rule.get("mode", "?")), 16),
        "approved": _count(rule.get("approved", 0)),
        "would_approve": _count(rule.get("would_approve", 0)),
        "ended": _counts(rule.get("ended", {})),
        "refused": _counts(rule.get("refused", {})),
    }


def _decisions(recent: Any, reviewed: Mapping[str, str], ruled: bool) -> dict[str, Any]:
    """The decision about each reviewed plan, by id: the record of that plan id *and*
    sha256 (another sha256 is another plan's), the first one; where the host has rules
    and sent none about it, "not recorded" (the human sees that nothing is known)."""
    if not isinstance(recent, list):
        raise Unreadable(f"{_said(recent)} is not a list of decisions")
    found: dict[str, dict[str, Any]] = {}
    for d in recent:
        if not isinstance(d, Mapping):
            raise Unreadable(f"{_said(d)} is not a decision")
        plan_id = d.get("plan_id")
        if not isinstance(plan_id, str) or plan_id in found:
            continue
        if reviewed.get(plan_id) != d.get("sha256"):
            continue
        found[plan_id] = {
            "outcome": cut(printable(d.get("outcome", "")), 32),
            "rule": cut(printable(d.get("rule", "")), 48),
            "refused": _lines(d.get("refused", [])),
            "read": _lines(d.get("read", [])),
        }
    if ruled:
        for plan_id in reviewed:
            found.setdefault(
                plan_id, {"outcome": NOT_RECORDED, "rule": "", "refused": [], "read": []}
            )
    return {plan_id: found[plan_id] for plan_id in reviewed if plan_id in found}


def _pause(pause: Any) -> dict[str, str] | None:
    if not isinstance(pause, Mapping) or not pause.get("paused"):
        return None
    return {
        "paused": True,
        "by": cut(printable(pause.get("by", "?")), 64),
        "at": cut(printable(pause.get("at", "")), 64),
        "reason": _text(pause.get("reason", "")),
    }


def _host_rules(result: Any, reviewed: Mapping[str, str]) -> dict[str, Any]:
    """One host's ``opsbot policy report --json`` (opsbot_policy_report's result) as the
    report keeps it: each rule's counts, the pause, and the decisions about the plans
    reviewed (``reviewed``: their id -> sha256); or ``error``, the task's message (the
    approver did not answer, say) or why the answer is not a policy report."""
    said = result.get("report") if isinstance(result, Mapping) else None
    if not isinstance(said, Mapping) or not isinstance(said.get("rules"), list):
        message = result.get("msg") if isinstance(result, Mapping) else None
        return {"error": _text(message or "opsbot policy report did not run there")}
    try:
        rules = [_rule(rule) for rule in said["rules"]]
        return {
            "error": "",
            "rules": rules,
            "paused": _pause(said.get("pause")),
            "records": _count(said.get("records", 0)),
            "dropped": _count(said.get("dropped", 0)),
            "plans": _decisions(said.get("recent", []), reviewed, bool(rules)),
        }
    except Unreadable as exc:
        return {"error": f"its policy report is not opsbot's: {exc}"}


def fleet_report(
    hostplans: Any, generated_at: str | None = None, rules: Any = None
) -> dict[str, Any]:
    """The report of ``{host: [plan, ...]}`` (hosts kept in the order given, which is the
    inventory's): every plan per host, and the groups of plans of the same shape, most
    hosts first, then by goal. With ``rules`` (``{host: opsbot_policy_report's
    result}``), also ``rules``: per host, what its standing rules did (a host missing
    from ``rules`` is "not read"). A host whose answer is not opsbot's is not reviewed:
    ``unread`` says why, and nothing of it is in ``hosts`` (nothing to approve there)."""
    if not isinstance(hostplans, Mapping):
        raise ReportError("fleet_report takes {inventory_hostname: [plan, ...]}")
    hosts: dict[str, list[dict[str, Any]]] = {}
    unread: dict[str, str] = {}
    for host, plans in hostplans.items():
        try:
            hosts[str(host)] = _plans(plans)
        except Unreadable as exc:
            unread[str(host)] = f"its answer is not opsbot's: {exc}"
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, str]]] = {}
    for host, plans in hosts.items():
        for plan in plans:
            groups.setdefault(shape(plan), []).append(
                {"host": host, "plan_id": plan["plan_id"], "sha256": plan["sha256"]}
            )
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0][0], item[0][1]))
    extra: dict[str, Any] = {}
    if rules is not None:
        if not isinstance(rules, Mapping):
            raise ReportError("fleet_report: rules= takes {inventory_hostname: result}")
        extra["rules"] = {
            host: _host_rules(rules.get(host), {p["plan_id"]: p["sha256"] for p in plans})
            for host, plans in hosts.items()
        }
    return {
        "format": FORMAT,
        "generated_at": generated_at or datetime.now(UTC).isoformat(timespec="seconds"),
        "hosts": hosts,
        "groups": [
            {
                "goal": goal,
                "steps": [[tool, unit] for tool, unit in steps],
                "hosts": members,
                "count": len(members),
            }
            for (goal, steps), members in ordered
        ],
        "unread": unread,
        **extra,
    }


def check_report(report: Any) -> Mapping[str, Any]:
    """``report`` if it is an opsbot fleet report, else a ReportError saying why."""
    if not isinstance(report, Mapping) or report.get("format") != FORMAT:
        raise ReportError(f"not an opsbot fleet report (its format must be {FORMAT})")
    return report


def _steps_text(steps: list[Any]) -> str:
    return "; ".join(printable(f"{tool} {unit}") for tool, unit in steps)


def _hosts_word(count: int) -> str:
    return f"{count} host{'' if count == 1 else 's'}"


def fleet_report_table(report: Any) -> list[str]:
    """The report for the terminal, each line at most 100 columns: a line a group (how
    many hosts, the fix, which hosts, wrapped), its goal, then each host's plans with the
    sha256 the approval will be bound to (its first 16 digits here; the file has it
    whole)."""
    report = check_report(report)
    hosts: Mapping[str, list[Mapping[str, Any]]] = report["hosts"]
    count = sum(len(plans) for plans in hosts.values())
    waiting = sum(1 for plans in hosts.values() if plans)
    lines = [
        cut(
            f"{count} plan{'' if count == 1 else 's'} on {_hosts_word(waiting)} "
            f"(of {len(hosts)} reviewed), {len(report['groups'])} "
            f"fix{'' if len(report['groups']) == 1 else 'es'}:",
            WIDTH,
        )
    ]
    for group in report["groups"]:
        head = f"{_hosts_word(group['count']):<8} {cut(_steps_text(group['steps']), 50)}  "
        names = ", ".join(printable(h["host"]) for h in group["hosts"])
        wrapped = textwrap.wrap(
            names, WIDTH - len(head), break_on_hyphens=False, break_long_words=True
        ) or [""]
        lines.append(head + wrapped[0])
        lines.extend(" " * len(head) + more for more in wrapped[1:])
        lines.append(cut(f"{'':<8} goal: {printable(group['goal'])}", WIDTH))
    lines.append("")
    for host, plans in hosts.items():
        if not plans:
            lines.append(cut(f"{printable(host)}: no plan waits", WIDTH))
        for plan in plans:
            steps = _steps_text([[s["tool"], s["unit"]] for s in plan["steps"]])
            said = (
                f"{printable(host)}  {printable(plan['plan_id'])}  {printable(plan['state'])}  "
                f"sha256 {printable(plan['sha256'][:16])}...  {steps}"
            )
            lines.append(cut(said, WIDTH))
    for host, why in report.get("unread", {}).items():
        lines.append(cut(f"{printable(host)}: NOT REVIEWED, {printable(why)}", WIDTH))
    if "rules" in report:
        lines += ["", "standing rules (opsbot policy report):"]
        lines += [cut(line, WIDTH) for line in _rules_lines(report["rules"])]
    return lines


def _ended(ended: Mapping[str, int]) -> str:
    return ", ".join(f"{state} {count}" for state, count in ended.items())


def _rule_text(rule: Mapping[str, Any]) -> str:
    """One rule's record in a few words: approved 1, would approve 4 (VERIFIED 3, ...)."""
    ended = f" ({_ended(rule['ended'])})" if rule["ended"] else ""
    refused = sum(rule["refused"].values())
    return (
        f"{rule['name']} ({rule['mode']}): approved {rule['approved']}, would approve "
        f"{rule['would_approve']}{ended}, refused {refused}"
    )


def _pause_text(pause: Mapping[str, Any]) -> str:
    reason = f": {printable(pause.get('reason'))}" if pause.get("reason") else ""
    return f"PAUSED by {printable(pause.get('by', '?'))} at {printable(pause.get('at'))}{reason}"


def _rules_lines(rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per host: its rules' records, the pause, and each reviewed plan a rule approved or
    would have approved; or why the host's rules were not read."""
    lines = []
    for host, said in rules.items():
        name = printable(host)
        if said["error"]:
            lines.append(f"{name}  not read: {said['error']}")
            continue
        if said["paused"]:
            lines.append(f"{name}  {_pause_text(said['paused'])}")
        if not said["rules"]:
            lines.append(f"{name}  no [[approve.rule]]")
        lines += [f"{name}  {_rule_text(rule)}" for rule in said["rules"]]
        for plan_id, decision in said["plans"].items():
            lines += [f"{name}  {line}" for line in _decision_lines(plan_id, decision)]
    return lines


def _decision_lines(plan_id: str, decision: Mapping[str, Any]) -> list[str]:
    """What the rules decided about one reviewed plan: the rule that approved or would
    have; else that it is for humans and why (each rule's refusal), or that no decision
    was recorded; then what root read of its units (the facts, never the plan's words)."""
    said = printable(plan_id)
    outcome = printable(decision["outcome"])
    if decision["rule"]:
        lines = [f"{said}: {outcome} ({printable(decision['rule'])})"]
    elif outcome == NOT_RECORDED:
        lines = [f"{said}: no rule decision among those the host sent: nothing known"]
    else:
        lines = [f"{said}: {outcome}, the rules refused it"]
        lines += _shown("refused", decision["refused"])
    return lines + _shown("root read", decision.get("read") or [])


def _shown(label: str, said: list[Any]) -> list[str]:
    lines = [f"  {label}: {printable(line)}" for line in said[:LINES_SHOWN]]
    more = len(said) - LINES_SHOWN
    return lines + ([f"  ({more} more {label}: the Markdown has them)"] if more > 0 else [])


#: Markdown's and HTML's own characters in a host's text, shown as themselves: a host
#: cannot make a link, an image, a tag, code or a table cell of its own.
_MD_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "'",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
    }
)


#: What GitHub's Markdown turns into a link by itself (an autolink): a scheme's "://" and
#: a "www." name, defanged as incident reports show a URL not to be followed
#: ("https[:]//", "www[.]").
_AUTOLINK = re.compile(r"(?i)(:)(//)|\b(www)(\.)")


def _defang(match: re.Match[str]) -> str:
    colon, slashes, www, dot = match.groups()
    return f"[:]{slashes}" if colon else f"{www}[.]"


def _md(text: Any) -> str:
    """Text from a host inside a Markdown table cell or line: no markup, and no link."""
    return _AUTOLINK.sub(_defang, printable(text)).translate(_MD_ESCAPES)


def fleet_report_markdown(report: Any) -> str:
    """The report as Markdown: the groups as a table, then each host's plans with their
    whole sha256, each step's argv and the evidence."""
    report = check_report(report)
    hosts: Mapping[str, list[Mapping[str, Any]]] = report["hosts"]
    out = [
        "# opsbot fleet review",
        "",
        f"Generated {_md(report['generated_at'])} ({FORMAT}): "
        f"{sum(len(p) for p in hosts.values())} plans on {len(hosts)} hosts reviewed.",
        "",
        "## Fixes",
        "",
        "| hosts | steps | goal | on |",
        "|---:|---|---|---|",
    ]
    for group in report["groups"]:
        on = ", ".join(f"{_md(h['host'])} ({_md(h['plan_id'])})" for h in group["hosts"])
        steps = "<br>".join(_md(f"{tool} {unit}") for tool, unit in group["steps"])
        out.append(f"| {group['count']} | {steps} | {_md(group['goal'])} | {on} |")
    out += ["", "## Plans per host", ""]
    for host, plans in hosts.items():
        out.append(f"### {_md(host)}")
        out.append("")
        if not plans:
            out += ["No plan waits.", ""]
        for plan in plans:
            out += [
                f"- plan `{_md(plan['plan_id'])}` ({_md(plan['state'])}): {_md(plan['goal'])}",
                f"  - sha256 `{_md(plan['sha256'])}`",
            ]
            for index, step in enumerate(plan["steps"], 1):
                argv = shlex.join(step.get("argv") or [])
                out.append(
                    f"  - step {index}: {_md(step['tool'])} {_md(step['unit'])}: `{_md(argv)}`"
                )
            out += [f"  - evidence: {_md(line)}" for line in plan.get("evidence") or []]
            decided = report.get("rules", {}).get(host, {}).get("plans", {}).get(plan["plan_id"])
            if decided:
                why = "; ".join(decided["refused"])
                said = f"{decided['outcome']} ({decided['rule']})" if decided["rule"] else why
                out.append(f"  - standing rules: {_md(said or decided['outcome'])}")
                out += [f"  - root read: {_md(line)}" for line in decided.get("read") or []]
        out.append("")
    for host, why in report.get("unread", {}).items():
        out += [f"### {_md(host)}", "", f"**Not reviewed**: {_md(why)}", ""]
    if "rules" in report:
        out = "\n".join(out).rstrip().split("\n") + [""] + _rules_markdown(report["rules"])
    return "\n".join(out).rstrip() + "\n"


def _rules_markdown(rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = [
        "## Standing rules",
        "",
        "What each host's `[[approve.rule]]` approved (enforce) and would have approved "
        "(shadow), how those plans ended, and why they refused the others "
        "(`opsbot policy report --json`).",
        "",
    ]
    for host, said in rules.items():
        out += [f"### {_md(host)}", ""]
        if said["error"]:
            out += [f"Not read: {_md(said['error'])}", ""]
            continue
        if said["paused"]:
            out += [_md(_pause_text(said["paused"])), ""]
        if not said["rules"]:
            out += ["No `[[approve.rule]]`.", ""]
            continue
        out += [
            "| rule | mode | approved | would approve | how those ended | refused: why |",
            "|---|---|---:|---:|---|---|",
        ]
        for rule in said["rules"]:
            refused = "<br>".join(f"{n}: {_md(why)}" for why, n in rule["refused"].items())
            out.append(
                f"| {_md(rule['name'])} | {_md(rule['mode'])} | {rule['approved']} | "
                f"{rule['would_approve']} | {_md(_ended(rule['ended']))} | {refused} |"
            )
        out += ["", f"{said['records']} decisions kept, {said['dropped']} dropped.", ""]
    return out


def fleet_report_refusals(report: Any) -> list[str]:
    """Each reviewed plan the standing rules refused (or decided nothing about), with why
    and what root read: what fleet-approve.yml says before it approves, within 100
    columns, so that no approval of a refused plan goes by unseen."""
    report = check_report(report)
    lines = []
    for host, said in report.get("rules", {}).items():
        for plan_id, decision in (said.get("plans") or {}).items():
            if not decision["rule"]:
                lines += [
                    cut(f"{printable(host)}  {line}", WIDTH)
                    for line in _decision_lines(plan_id, decision)
                ]
    return lines


def fleet_plan_ends(results: Any) -> list[dict[str, str]]:
    """``[{plan_id, state, reason}]`` of the wait's registered loop results (each item a
    reviewed ``{plan_id, sha256}``, each result opsbot_plans' for that plan): ``unknown``
    and the task's message where the plan could not be read."""
    ends = []
    for result in results or []:
        plans = result.get("plans") or []
        plan_id = str((result.get("item") or {}).get("plan_id", "?"))
        if plans:
            state, reason = _text(plans[0]["state"]), _text(plans[0].get("reason") or "")
        else:
            state, reason = "unknown", printable(result.get("msg", "not read"))
        ends.append({"plan_id": plan_id, "state": state, "reason": reason})
    return ends


def fleet_report_path(path: Any) -> str:
    """``path`` made absolute from the controller's working directory (filters run in
    ansible-playbook's own process, which stays where the operator started it), so that
    ``-e report=fleet-report.json`` lands where the operator stands, not beside the
    playbook."""
    return os.path.abspath(os.path.expanduser(str(path)))


class FilterModule:
    """opsbot.fleet's filters: the report, its table, Markdown and refusals, the wait's
    ends, the report's path."""

    def filters(self) -> dict[str, Any]:
        return {
            "fleet_report": fleet_report,
            "fleet_report_table": fleet_report_table,
            "fleet_report_markdown": fleet_report_markdown,
            "fleet_report_path": fleet_report_path,
            "fleet_report_refusals": fleet_report_refusals,
            "fleet_plan_ends": fleet_plan_ends,
        }
