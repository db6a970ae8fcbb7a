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
  ansible-playbook was started in (a local task runs in the playbook's directory).
"""

from __future__ import annotations

import os
import shlex
import textwrap
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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


def _plan(host: str, plan: Any) -> dict[str, Any]:
    if not isinstance(plan, Mapping) or any(k not in plan for k in PLAN_KEYS):
        raise ReportError(
            f"fleet_report: a plan of host {host} is not what opsbot_plans returns "
            f"(needs {', '.join(PLAN_KEYS)})"
        )
    steps = plan["steps"]
    if not isinstance(steps, list) or any(
        not isinstance(s, Mapping) or "tool" not in s or "unit" not in s for s in steps
    ):
        raise ReportError(f"fleet_report: plan {plan['plan_id']} of {host}: steps need tool, unit")
    return {
        "plan_id": str(plan["plan_id"]),
        "sha256": str(plan["sha256"]),
        "state": str(plan["state"]),
        "goal": str(plan["goal"]),
        "steps": [
            {
                "tool": str(s["tool"]),
                "unit": str(s["unit"]),
                "argv": [str(a) for a in s.get("argv") or []],
                "precondition": s.get("precondition"),
            }
            for s in steps
        ],
        "evidence": [str(e) for e in plan.get("evidence") or []],
        "submitted_at": str(plan.get("submitted_at", "")),
    }


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {printable(k): int(n) for k, n in value.items() if isinstance(n, int)}


def _host_rules(result: Any, reviewed: set[str]) -> dict[str, Any]:
    """One host's ``opsbot policy report --json`` (opsbot_policy_report's result) as the
    report keeps it: each rule's counts, the pause, and the decisions about the plans
    reviewed; or ``error``, the task's message (the approver did not answer, say)."""
    said = result.get("report") if isinstance(result, Mapping) else None
    if not isinstance(said, Mapping) or not isinstance(said.get("rules"), list):
        message = result.get("msg") if isinstance(result, Mapping) else None
        return {"error": printable(message or "opsbot policy report did not run there")}
    rules = [
        {
            "name": printable(rule.get("name", "?")),
            "mode": printable(rule.get("mode", "?")),
            "approved": int(rule.get("approved") or 0),
            "would_approve": int(rule.get("would_approve") or 0),
            "ended": _counts(rule.get("ended")),
            "refused": _counts(rule.get("refused")),
        }
        for rule in said["rules"]
        if isinstance(rule, Mapping)
    ]
    pause = said.get("pause")
    decisions = {
        str(d["plan_id"]): {
            "outcome": printable(d.get("outcome", "")),
            "rule": printable(d.get("rule", "")),
            "refused": [printable(line) for line in d.get("refused") or []],
        }
        for d in said.get("recent") or []
        if isinstance(d, Mapping) and str(d.get("plan_id")) in reviewed
    }
    return {
        "error": "",
        "rules": rules,
        "paused": dict(pause) if isinstance(pause, Mapping) and pause.get("paused") else None,
        "records": int(said.get("records") or 0),
        "dropped": int(said.get("dropped") or 0),
        "plans": decisions,
    }


def fleet_report(
    hostplans: Any, generated_at: str | None = None, rules: Any = None
) -> dict[str, Any]:
    """The report of ``{host: [plan, ...]}`` (hosts kept in the order given, which is the
    inventory's): every plan per host, and the groups of plans of the same shape, most
    hosts first, then by goal. With ``rules`` (``{host: opsbot_policy_report's
    result}``), also ``rules``: per host, what its standing rules did (a host missing
    from ``rules`` is "not read")."""
    if not isinstance(hostplans, Mapping):
        raise ReportError("fleet_report takes {inventory_hostname: [plan, ...]}")
    hosts: dict[str, list[dict[str, Any]]] = {}
    for host, plans in hostplans.items():
        if not isinstance(plans, list):
            raise ReportError(f"fleet_report: the plans of host {host} are not a list")
        hosts[str(host)] = [_plan(str(host), p) for p in plans]
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
            host: _host_rules(rules.get(host), {p["plan_id"] for p in plans})
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
                f"{printable(host)}  {plan['plan_id']}  {plan['state']}  "
                f"sha256 {plan['sha256'][:16]}...  {steps}"
            )
            lines.append(cut(said, WIDTH))
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
            if decision["rule"]:
                lines.append(f"{name}  {plan_id}: {decision['outcome']} ({decision['rule']})")
    return lines


def _md(text: Any) -> str:
    """Text from a host inside a Markdown table cell or line."""
    return printable(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")


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
        on = ", ".join(f"{_md(h['host'])} ({h['plan_id']})" for h in group["hosts"])
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
                f"- plan `{plan['plan_id']}` ({_md(plan['state'])}): {_md(plan['goal'])}",
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
        out.append("")
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


def fleet_plan_ends(results: Any) -> list[dict[str, str]]:
    """``[{plan_id, state, reason}]`` of the wait's registered loop results (each item a
    reviewed ``{plan_id, sha256}``, each result opsbot_plans' for that plan): ``unknown``
    and the task's message where the plan could not be read."""
    ends = []
    for result in results or []:
        plans = result.get("plans") or []
        plan_id = str((result.get("item") or {}).get("plan_id", "?"))
        if plans:
            state, reason = str(plans[0]["state"]), str(plans[0].get("reason") or "")
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
    """opsbot.fleet.fleet_report, fleet_report_table, fleet_report_markdown."""

    def filters(self) -> dict[str, Any]:
        return {
            "fleet_report": fleet_report,
            "fleet_report_table": fleet_report_table,
            "fleet_report_markdown": fleet_report_markdown,
            "fleet_report_path": fleet_report_path,
            "fleet_plan_ends": fleet_plan_ends,
        }
