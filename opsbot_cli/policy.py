"""``opsbot policy check|test ID|report|pause|resume``: the standing approval rules
(``[[approve.rule]]`` in opsbot.toml, shared_schema/standing.py) as the config holds them,
which rule would approve a stored plan now and why each other would not (plans/standing.py
decides), and what root's opsbot-approver, where the rules decide, did with them.

``check`` says, per rule, what it reaches now: each tool with the allowlisted units its
patterns match (a pattern that reaches none is a warning, exit 1). ``test ID`` (root: it
reads the plan store) asks the rules about one plan, as they would be asked when it was
proposed, but as the store, the config and the clock stand now: exit 0 when a rule would
approve it, 3 when it waits for a human.

``report``, ``pause`` and ``resume`` (root) ask opsbot-approver over its socket
(shared_io.approver_client): per rule, what it approved, would have approved in shadow
(and what became of those plans), and why it refused the others; ``pause`` stops every
rule at once, ``resume`` lets them decide again, each recorded with the login name behind
sudo and journaled by the approver.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import TYPE_CHECKING, Any, TypeVar

from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.output import (
    json_out,
    one_line,
    operator_name,
    out,
    plan_id_arg,
    require_root,
    when,
)
from opsbot_cli.screen import WIDTH, cut
from shared_io.config import load_config
from shared_io.exit_codes import ERROR, OK, WAITING
from shared_io.paths import Paths

if TYPE_CHECKING:
    from shared_schema._model import Model
    from shared_schema.approver_socket import Pause, PolicyReported, RuleDecision, RuleSummary

SUMMARY = "the standing approval rules: check, test a plan; report, pause, resume them"
VERBS = ("check", "test", "report", "pause", "resume")
EPILOG = """\
verbs:
  check            each [[approve.rule]] and the allowlisted units it reaches now
  test ID          (root) which rule would approve plan ID now, and why the others would not
  report           (root) per rule: what it approved, would have approved (and how those
                   ended), why it refused; the records kept and dropped; the pause
  pause            (root) stop every rule at once: each new plan waits for a human
  resume           (root) let the rules decide new plans again

exit status:
  check            0 fine; 1 a rule reaches no unit, or every unit by a glob (a warning)
  test ID          0 a rule would approve it; 3 it waits for a human
  report, pause,   0 done; 1 opsbot-approver cannot be reached (not installed, not
  resume           listening) or refused (its journal says why)
  every verb       2 usage, or a root-only verb run by another user; 78 invalid config
"""
#: Reasons a rule refused, listed per rule in the text (``--json`` has all it sent).
REASONS_SHOWN = 3
#: Decisions listed one by one in the text (``--json`` has all the approver sent).
RECENT_SHOWN = 5
MAX_REASON_CHARS = 500
APPROVER = "opsbot-approver.socket"
Reply = TypeVar("Reply", bound="Model")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "policy",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("verb", choices=VERBS, metavar="VERB", help=", ".join(VERBS) + " (below)")
    p.add_argument("plan_id", metavar="ID", nargs="?", help="(test) the plan")
    p.add_argument(
        "--reason",
        metavar="TEXT",
        help="(pause, resume) why: kept with the switch, journaled, shown by `policy report`",
    )
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    verb = args.verb
    if verb != "test" and args.plan_id is not None:
        raise UsageError(f"`opsbot policy {verb}` takes no ID (`opsbot policy test ID` does)")
    if args.reason is not None and verb not in ("pause", "resume"):
        raise UsageError(f"--reason goes with pause and resume, not `opsbot policy {verb}`")
    if verb == "check":
        return run_check(args, paths)
    if verb == "test":
        if args.plan_id is None:
            raise UsageError("`opsbot policy test` needs the plan's ID (`opsbot plans` lists them)")
        require_root(f"policy test {args.plan_id}")
        return run_test(args, paths, plan_id_arg(args.plan_id))
    require_root(f"policy {verb}")
    if verb == "report":
        return run_report(args)
    return run_switch(args, paused=verb == "pause")


def run_check(args: argparse.Namespace, paths: Paths) -> int:
    from plans.standing import reach

    config = load_config(paths.config)
    rules = config.approve.rule
    found: list[dict[str, Any]] = []
    warnings: list[str] = []
    for rule in rules:
        reaches = reach(rule, config.executor)
        for tool, units in reaches.items():
            allowed = config.executor.allow.get(tool, [])
            if not units:
                warnings.append(
                    f"rule {rule.name}: {tool} of {', '.join(rule.units)} reaches no unit "
                    f"[executor.allow] {tool} holds"
                )
            elif len(units) > 1 and len(units) == len(allowed) and _globs(rule.units):
                warnings.append(
                    f"rule {rule.name}: {tool} of {', '.join(rule.units)} reaches every unit "
                    f"[executor.allow] {tool} holds ({len(units)}): name them if that is not "
                    "meant (a unit allowed later is reached too)"
                )
        found.append(
            {
                "name": rule.name,
                "mode": rule.mode,
                "tools": list(rule.tools),
                "units": list(rule.units),
                "reaches": reaches,
                "windows": [w.model_dump() for w in rule.windows],
                "max_per_unit": rule.max_per_unit,
                "period": rule.period,
            }
        )
    if args.json:
        json_out({"config": str(paths.config), "rules": found, "warnings": warnings})
        return ERROR if warnings else OK
    if not rules:
        out(f"{paths.config}: no [[approve.rule]]: every plan waits for a human")
        return OK
    header = f"{paths.config}: {len(rules)} standing approval rule(s), asked in this order:"
    for line in textwrap.wrap(header, 100, subsequent_indent="  "):
        out(line)
    for rule, said in zip(rules, found, strict=True):
        named = f"{rule.name} ({rule.mode}): {', '.join(rule.tools)} of {', '.join(rule.units)}"
        for line in textwrap.wrap(named, 98, subsequent_indent="    "):
            out(f"  {line}")
        for tool, units in said["reaches"].items():
            reached = f"{tool} reaches now: {', '.join(units) or 'nothing'}"
            for line in textwrap.wrap(reached, 96, subsequent_indent="  "):
                out(f"    {line}")
        when = "; ".join(f"{w.start} for {w.duration}" for w in rule.windows) or "any time"
        out(f"    when: {when}; at most {rule.max_per_unit} a unit in {rule.period}")
    for warning in warnings:
        for line in textwrap.wrap(f"warning: {warning}", 98, subsequent_indent="  "):
            out(f"  {line}")
    if not any(rule.mode == "enforce" for rule in rules):
        out("every rule is in shadow: none approves a plan, each records what it would have")
    out("what they did: sudo opsbot policy report; stop them all: sudo opsbot policy pause")
    return ERROR if warnings else OK


def run_test(args: argparse.Namespace, paths: Paths, plan_id: str) -> int:
    from plans import PlanStore, utcnow
    from plans.readings import read_units
    from plans.standing import ForHumans, decide, recent_errors, unit_history

    config = load_config(paths.config)
    store = PlanStore(paths.state_dir)
    record = store.load(plan_id)
    plan = store.verified_plan(record)
    status = store.status(plan_id, record)
    now = utcnow()
    decision = decide(
        plan,
        status.state,
        config.approve.rule,
        config.executor,
        history=lambda unit: unit_history(store, unit, skip=plan_id),
        recent=recent_errors(store, config.executor, now),
        now=now,
        reading=lambda: read_units(plan.units(), config.diagnose.health),
    )
    refused = decision.refused if isinstance(decision, ForHumans) else ()
    rule = None if isinstance(decision, ForHumans) else decision.rule
    if args.json:
        json_out(
            {
                "plan_id": plan_id,
                "state": str(status.state),
                "rule": None if rule is None else rule.name,
                "mode": None if rule is None else rule.mode,
                "refused": [{"rule": r.rule, "reason": r.reason} for r in refused],
            }
        )
        return WAITING if rule is None else OK
    out(f"plan {plan_id} ({status.state}): {plan.goal}"[:100])
    if rule is not None:
        out(f"  rule {rule.name} ({rule.mode}) would approve it")
    elif not refused:
        out("  no [[approve.rule]]: it waits for a human")
    else:
        out("  no rule would approve it; it waits for a human:")
        for r in refused:
            for line in textwrap.wrap(f"{r.rule}: {r.reason}", 96, subsequent_indent="  "):
                out(f"    {line}")
    return WAITING if rule is None else OK


def _globs(patterns: list[str]) -> bool:
    return any(c in pattern for pattern in patterns for c in "*?[")


# -- report, pause, resume: root's opsbot-approver ----------------------------------------


def ask(request: Model, expect: type[Reply], doing: str) -> Reply:
    """opsbot-approver's answer to ``request``; ``doing`` says what did not happen when
    it cannot be reached ("nothing was paused"), in one line and a hint, never a
    traceback."""
    from shared_io.approver_client import ask_approver
    from shared_io.errors import PeerProtocolError, SocketUnavailable

    status = f"`systemctl status {APPROVER} opsbot-approver.service`"
    try:
        return ask_approver(request, expect)
    except PeerProtocolError as exc:
        raise ConsoleError(
            f"{doing}: opsbot-approver sent a reply this opsbot cannot read: {exc.what}",
            hint="is it the version of this opsbot? restart it after an upgrade: "
            "`systemctl restart opsbot-approver.service`",
        ) from exc
    except SocketUnavailable as exc:
        if exc.reason == "missing":
            raise ConsoleError(
                f"{doing}: no socket at {exc.path}: opsbot-approver, where the standing rules "
                "decide, is not listening (while it is away, no rule approves anything)",
                hint=f"is it installed (install.sh) and enabled? {status}; "
                f"`systemctl enable --now {APPROVER}`",
            ) from exc
        raise ConsoleError(
            f"{doing}: cannot talk to opsbot-approver at {exc.path}: {exc.what}",
            hint=f"{status}; `journalctl -u opsbot-approver.service` says why",
        ) from exc


def run_report(args: argparse.Namespace) -> int:
    from shared_schema.approver_socket import PolicyReport, PolicyReported

    reply = ask(PolicyReport(), PolicyReported, "no report")
    if args.json:
        said = reply.model_dump(mode="json", exclude={"v", "op"})
        json_out({"paused": reply.pause is not None and reply.pause.paused, **said})
        return OK
    for line in report_lines(reply):
        out(line)
    return OK


def run_switch(args: argparse.Namespace, *, paused: bool) -> int:
    from shared_schema.approver_socket import PolicySwitch, PolicySwitched

    reason = " ".join((args.reason or "").split())
    if len(reason) > MAX_REASON_CHARS:
        raise UsageError(f"--reason: at most {MAX_REASON_CHARS} characters ({len(reason)} given)")
    request = PolicySwitch(paused=paused, by=operator_name(), reason=reason)
    doing = "nothing was paused" if paused else "nothing was resumed"
    pause = ask(request, PolicySwitched, doing).pause
    if args.json:
        json_out(pause.model_dump(mode="json"))
        return OK
    for line in switch_lines(pause):
        out(line)
    return OK


def _say(text: str, indent: str = "") -> list[str]:
    """``text`` folded to WIDTH columns, each line after the first indented two more."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ") or [
        indent.rstrip()
    ]


def _switched(pause: Pause) -> str:
    """Who switched the rules, when, and why: ``by carol at 2026-11-29 21:35:00 UTC: a bad
    night``."""
    why = f": {one_line(pause.reason)}" if pause.reason else ""
    return f"by {one_line(pause.by)} at {when(pause.at)}{why}"


def switch_lines(pause: Pause) -> list[str]:
    """What ``pause`` and ``resume`` print: what was done, and what it means now."""
    if pause.paused:
        return [
            *_say(f"paused every standing approval rule, {_switched(pause)}"),
            *_say(
                "every rule stops at once: none approves a plan or records what it would "
                "have; each new plan waits for a human",
                "  ",
            ),
            *_say(
                "an approval a rule wrote before the pause stands until it is used or "
                "expires: `opsbot plans --state approved` lists them, `sudo opsbot reject ID` "
                "withdraws one",
                "  ",
            ),
            "  undo: sudo opsbot policy resume",
        ]
    return [
        *_say(f"resumed the standing approval rules, {_switched(pause)}"),
        *_say(
            "each rule decides new plans again (enforce rules approve, shadow rules record); "
            "the plans proposed while paused still wait for a human",
            "  ",
        ),
        "  stop them all again: sudo opsbot policy pause",
    ]


def _pause_lines(pause: Pause | None) -> list[str]:
    if pause is None:
        return ["standing approval rules: running (never paused)"]
    if not pause.paused:
        return _say(f"standing approval rules: running (resumed {_switched(pause)})")
    return [
        *_say(f"standing approval rules: PAUSED {_switched(pause)}"),
        "  no rule approves or records anything: every new plan waits for a human",
        "  resume: sudo opsbot policy resume",
    ]


def _plans(n: int) -> str:
    return f"{n} plan{'' if n == 1 else 's'}"


def _rule_lines(rule: RuleSummary) -> list[str]:
    mode = "removed from the config" if rule.mode == "removed" else rule.mode
    did = []
    if rule.approved or rule.mode == "enforce":
        did.append(f"approved {_plans(rule.approved)}")
    if rule.would_approve or rule.mode == "shadow":
        did.append(f"would have approved {_plans(rule.would_approve)}")
    lines = _say(f"rule {one_line(rule.name)} ({mode}): {', '.join(did) or 'approved nothing'}")
    if rule.ended:
        ended = ", ".join(f"{n} {one_line(state)}" for state, n in rule.ended.items())
        lines += _say(f"what became of those it would have approved: {ended}", "  ")
    refused = sum(rule.refused.values())
    if not refused:
        return [*lines, "  refused none"]
    lines.append(f"  refused {_plans(refused)}, most often:")
    for reason, n in list(rule.refused.items())[:REASONS_SHOWN]:
        lines += _say(f"{n:>4}  {one_line(reason)}", "  ")
    more = len(rule.refused) - REASONS_SHOWN
    if more > 0:
        lines.append(f"        ({more} other reason{'' if more == 1 else 's'}: --json)")
    return lines


def _decision_line(d: RuleDecision) -> str:
    rule = one_line(d.rule)
    outcome = {
        "approved": f"approved by rule {rule}",
        "would approve": f"rule {rule} would have approved it",
        "for humans": "for humans",
        "failed": f"rule {rule} approved; the approval was not written",
    }[d.outcome]
    steps = f"{','.join(d.tools)} {','.join(d.units)}"
    return cut(f"  {d.plan_id}  {outcome}: {one_line(steps)}", WIDTH)


def report_lines(reply: PolicyReported) -> list[str]:
    """What ``policy report`` prints: the pause first (what matters at 3 a.m.), then each
    rule, the records kept, the latest decisions; at most WIDTH columns a line."""
    lines = _pause_lines(reply.pause)
    if not reply.rules and not reply.records:
        return [
            *lines,
            "no [[approve.rule]] and no decision recorded: every plan waits for a human",
        ]
    for rule in reply.rules:
        lines += _rule_lines(rule)
    dropped = (
        f"; {reply.dropped} older dropped to keep the bound (oldest first)"
        if reply.dropped
        else "; none dropped"
    )
    lines += _say(f"records: {reply.records} plans decided, kept by opsbot-approver{dropped}")
    if reply.recent:
        shown = reply.recent[:RECENT_SHOWN]
        lines.append(f"latest decisions ({len(shown)} of {len(reply.recent)} sent; --json: all):")
        lines += [_decision_line(d) for d in shown]
    return lines
