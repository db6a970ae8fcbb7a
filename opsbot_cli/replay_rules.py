"""``opsbot replay --rules FILE`` (root): what each standing rule in FILE would have
approved of the plans diagnosis proposed in the period, and how those plans ended.

Three reads, none of them live and none a write: the plans the records hold (``python -I
-m diagnose_svc.replay --plans``, through the one runner), root's approver's records of
the period with what it knew when its rules were asked (``policy-report`` pages over its
socket), and the executor's plan store, read only, for how each plan ended. Each rule is
asked again by plans/rules_replay.py (plans.standing.decide, the one place that decides);
a decision that needs a fact nobody recorded is listed as not replayable, never guessed.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsbot_cli.errors import UsageError
from opsbot_cli.output import json_out, one_line, out, printable, when
from opsbot_cli.say import fold
from shared_io.exit_codes import OK

if TYPE_CHECKING:
    from plans.rules_replay import RecordedPlan, RuleReplayed
    from shared_schema.approver_socket import RuleDecision
    from shared_schema.standing import ApproveRule

#: Plans listed one by one per rule in the text (``--json`` has them all).
SHOWN = 10
#: Pages of the approver's records at most (each up to half a MiB).
MAX_PAGES = 100
#: The bytes of a rules file read at most.
MAX_FILE_BYTES = 1024 * 1024


def load_rules(path: Path) -> list[ApproveRule]:
    """The ``[[approve.rule]]`` tables of ``path`` (a TOML file: opsbot.toml, or one that
    holds only rules), checked as the config checks them."""
    from pydantic import ValidationError

    from shared_schema.standing import StandingApprovals

    try:
        data = path.read_bytes()[:MAX_FILE_BYTES].decode()
        parsed = tomllib.loads(data)
    except OSError as exc:
        raise UsageError(f"--rules {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--rules {path}: not a TOML file ({exc})") from exc
    approve = parsed.get("approve", {})
    try:
        rules = StandingApprovals.model_validate(approve).rule
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(f"--rules {path}: approve.{where}: {first['msg']}") from exc
    if not rules:
        raise UsageError(
            f"--rules {path}: no [[approve.rule]] in it",
            hint="write the rules as in opsbot.toml: [[approve.rule]] name = ... tools = ...",
        )
    return rules


def approver_records(since: datetime) -> dict[str, RuleDecision]:
    """Root's approver's records of the plans decided since ``since``, by plan id."""
    from opsbot_cli.policy import ask
    from shared_schema.approver_socket import PolicyReport, PolicyReported

    found: dict[str, RuleDecision] = {}
    after = ""
    for _ in range(MAX_PAGES):
        page = ask(PolicyReport(records_since=since, after=after), PolicyReported, "no replay")
        found.update((decision.plan_id, decision) for decision in page.records_sent)
        if not page.more or not page.records_sent:
            break
        after = page.records_sent[-1].plan_id
    return found


def recorded_plans(
    document: dict[str, Any], state_dir: Path
) -> tuple[list[RecordedPlan], list[dict[str, str]]]:
    """The plans of the engine's ``--plans`` document, each with how it ended; those it
    cannot believe, with why."""
    from pydantic import ValidationError

    from plans import PlanStore
    from plans.rules_replay import recorded
    from shared_schema import Plan

    store = PlanStore(state_dir)
    plans: list[RecordedPlan] = []
    bad: list[dict[str, str]] = []
    for entry in document.get("plans", ()):
        plan_id, sha256 = str(entry.get("plan_id")), str(entry.get("sha256"))
        try:
            plan = Plan.model_validate(entry.get("plan"))
        except ValidationError as exc:
            bad.append({"plan_id": plan_id, "why": f"its recorded plan is not a plan: {exc}"})
            continue
        if plan.fingerprint() != sha256:
            bad.append({"plan_id": plan_id, "why": "its recorded plan is not the sha256 it names"})
            continue
        plans.append(recorded(plan_id, sha256, plan, entry.get("outcome"), store))
    return plans, bad


def run(
    args: argparse.Namespace,
    rules: list[ApproveRule],
    state_dir: Path,
    config: Path,
    document: dict[str, Any],
    since: datetime,
) -> int:
    """Ask ``rules`` (``args.rules``: :func:`load_rules`) about the plans of ``document``
    (the engine's ``--plans``) and print what they would have approved."""
    from plans.rules_replay import replay_rules
    from shared_io.config import load_config

    policy = load_config(config).executor
    plans, bad = recorded_plans(document, state_dir)
    decisions = approver_records(since)
    replayed = replay_rules(rules, policy, plans, decisions)
    if args.json:
        json_out(
            {
                "since": since.isoformat(),
                "rules_file": str(args.rules),
                "plans": len(plans),
                "rules": [r.as_json() for r in replayed],
                "unreadable": bad,
                "skipped": document.get("skipped", []),
            }
        )
        return OK
    for skip in document.get("skipped", ()):
        said = f"record {printable(str(skip.get('record')))} skipped: {skip.get('why')}"
        print("\n".join(fold("opsbot: warning: ", printable(said))), file=sys.stderr)
    for line in lines(replayed, len(plans), since, bad):
        out(line)
    return OK


def lines(
    replayed: list[RuleReplayed], plans: int, since: datetime, bad: list[dict[str, str]]
) -> list[str]:
    """The text: per rule what it would have approved, how those ended, what it refused
    and what could not be replayed."""
    said = [f"{plans} recorded plan{'' if plans == 1 else 's'} since {when(since)}, asked again:"]
    for rule in replayed:
        head = f"rule {one_line(rule.name)} ({rule.mode}): would have approved {len(rule.approved)}"
        said += fold("", head)
        for approved in rule.approved[:SHOWN]:
            steps = ", ".join(printable(step) for step in approved["steps"])
            ended = printable(str(approved["ended"]))
            said += fold(f"  {printable(approved['plan_id'])}  ", f"{steps} (ended {ended})")
        if len(rule.approved) > SHOWN:
            said.append(f"  ({len(rule.approved) - SHOWN} more: --json)")
        if rule.ended:
            ended = ", ".join(f"{n} {printable(state)}" for state, n in rule.ended.most_common())
            said += fold("  what became of them: ", ended)
        if rule.refused:
            said.append(f"  refused {sum(rule.refused.values())}, most often:")
            for reason, n in rule.refused.most_common(3):
                said += fold(f"  {n:>4}  ", one_line(reason))
        if rule.not_replayable:
            said.append(f"  not replayable: {len(rule.not_replayable)} (never guessed):")
            for entry in rule.not_replayable[:SHOWN]:
                said += fold(f"  {printable(entry['plan_id'])}  ", printable(entry["why"]))
            if len(rule.not_replayable) > SHOWN:
                said.append(f"  ({len(rule.not_replayable) - SHOWN} more: --json)")
    for entry in bad:
        said += fold(f"  skipped {printable(entry['plan_id'])}: ", printable(entry["why"]))
    return said
