"""``opsbot replay``: recorded diagnoses asked again of today's policy, answered from
their record, never from the host: what this opsbot (its version, its ``[diagnose]``
settings) would have said of the incidents already seen, beside what was said then and
what became of the plan.

The console may not import diagnosis: it runs ``python -I -m diagnose_svc.replay``
(diagnose_svc/replay.py) through the one runner, as whoever runs ``opsbot replay`` (the
records are the diagnose user's: root or opsbot-diagnose may read them), and renders the
JSON it prints (``--json``: that document as it is). Its progress lines, past 50 records,
reach stderr as they come.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from opsbot_cli import replay_rules
from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.output import json_out, out, printable, require_root, unit_arg, when
from opsbot_cli.plans import since_arg
from opsbot_cli.say import fold
from shared_io.exit_codes import CONFIG, ERROR, HUMAN, OK
from shared_io.paths import Paths
from shared_io.run import run

SUMMARY = "replay recorded diagnoses through today's policy, answered from the record"
EPILOG = """\
Each diagnosis is asked again of today's policy and [diagnose] settings; each read-tool
call is answered from what was recorded then (a call never recorded is answered "not
recorded" and counted, never read live); nothing is submitted, nothing is written.
Per diagnosis: then and now (the plan's steps or the note's cause), the outcome then
(VERIFIED, UNRESOLVED), agree or DIFFERS; then a summary. Run it as root or as
opsbot-diagnose (the records are in /var/lib/opsbot-diagnose/records).
--model asks an OpenAI-compatible model instead ([diagnose.model]'s URL and name, or
--model-url, --model-name; the key from /etc/opsbot/llm_api_key, never a flag) and adds,
per diagnosis and in all: the plan against its outcome then (right: the plan that was
VERIFIED; wrong: the one that ended UNRESOLVED; miss: a note where a plan was VERIFIED),
harmful steps (on a unit outside the plan then, or where a note was), tokens, seconds,
and model errors (counted, the replay goes on).

exit status:
  0    every replayed diagnosis agrees (or none was recorded since WHEN)
  4    some differ: read them before you upgrade or keep the new settings
  1    the records cannot be read (not root or opsbot-diagnose), or the replay failed
  2    usage
  78   invalid configuration

examples:
  opsbot replay                          the last 30 days, before and after an upgrade
  opsbot replay --since 1h --unit app    one unit's diagnoses of the last hour
  opsbot replay 20261206-221205-7f993f11 --json   one diagnosis, the whole report
  sudo opsbot replay --model --since 7d  qualify [diagnose.model]'s model on last week
"""
#: Where the diagnose user keeps the records (diagnose_svc/record.py).
RECORDS = Path("/var/lib/opsbot-diagnose/records")
#: The whole replay at most this long (the runbook takes milliseconds a diagnosis).
TIMEOUT = 3600
#: The report's characters kept (a month of a busy host is a few MiB of JSON).
REPORT_LIMIT = 256 * 1024 * 1024
_RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "ids", metavar="ID", nargs="*", type=run_id_arg, help="only these diagnoses (run ids)"
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        default="30d",
        help="diagnoses since WHEN: a systemd time span ago (1h, 30d; default 30d) or a "
        "date and time (2026-12-01, '2026-12-01 15:20', ... UTC)",
    )
    p.add_argument("--unit", metavar="UNIT", help="only the diagnoses of UNIT")
    p.add_argument("--json", action="store_true", help="the replay's report, whole, as JSON")
    p.add_argument(
        "--config", type=Path, metavar="PATH", help="the config to replay with (default: opsbot's)"
    )
    p.add_argument(
        "--model",
        action="store_true",
        help="ask the OpenAI-compatible model of [diagnose.model] (key: the llm_api_key file "
        "next to the config, never a flag)",
    )
    p.add_argument("--model-url", metavar="URL", help="the model's API base (implies --model)")
    p.add_argument("--model-name", metavar="NAME", help="the model's name (implies --model)")
    p.add_argument(
        "--rules",
        type=Path,
        metavar="FILE",
        help="(root) what each [[approve.rule]] of FILE would have approved of the recorded "
        "plans, from root's approver's records, and how those plans ended",
    )
    p.set_defaults(func=run_replay)


def run_id_arg(value: str) -> str:
    if not _RUN_ID.match(value):
        raise argparse.ArgumentTypeError(
            f"not a run id (like 20261206-221205-7f993f11): {printable(value[:40])!r}"
        )
    return value


def records_dir() -> Path:
    """The records read: $OPSBOT_DIAGNOSE_RECORDS (tests), else :data:`RECORDS`."""
    return Path(os.environ.get("OPSBOT_DIAGNOSE_RECORDS") or RECORDS)


def _denied(records: Path) -> ConsoleError:
    return ConsoleError(
        f"permission denied reading {records}: run as root or opsbot-diagnose",
        hint="sudo opsbot replay ... (or sudo -u opsbot-diagnose opsbot replay ...)",
    )


def check_readable(records: Path) -> None:
    """Said before the engine starts: records this user may not read (0700, the diagnose
    user's). A directory not there yet is no error: nothing was recorded."""
    try:
        with os.scandir(records):
            pass
    except PermissionError:
        raise _denied(records) from None
    except OSError:
        return


def report(argv: list[str], records: Path) -> dict[str, Any]:
    """The engine's JSON document; its error as the console says it."""
    done = run(argv, timeout=TIMEOUT, output_limit=REPORT_LIMIT, stderr_through=True)
    if done.exit_status is None:
        raise ConsoleError(f"the replay did not finish: {done.failure()}")
    try:
        document = json.loads(done.stdout)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise ConsoleError(
            f"the replay failed (exit status {done.exit_status}, no report)",
            hint="its lines above say why; OPSBOT_DEBUG=1 is not needed to see them",
        )
    if "error" in document:
        message = str(document.get("error", ""))
        if "Permission denied" in message and str(records) in message:
            raise _denied(records)
        status = document.get("exit_status")
        raise ConsoleError(
            message,
            hint=document.get("hint") or None,
            exit_status=CONFIG if status == CONFIG else ERROR,
        )
    return document


def run_replay(args: argparse.Namespace, paths: Paths) -> int:
    since = since_arg(args.since, time.time())
    unit = unit_arg(args.unit) if args.unit else None
    records = records_dir()
    if args.rules is not None:  # root's records besides: said first
        require_root(f"replay --rules {args.rules}")
    check_readable(records)
    argv = [sys.executable, "-I", "-m", "diagnose_svc.replay", "--since", since.isoformat()]
    argv += ["--config", str(args.config or paths.config), "--records", str(records)]
    if unit is not None:
        argv += ["--unit", unit]
    if args.rules is not None:
        if model_args(args):
            raise UsageError("--rules asks the rules again, not a model: leave out --model")
        rules = replay_rules.load_rules(args.rules)  # before anything is read
        document = report([*argv, "--plans", "--", *args.ids], records)
        config = args.config or paths.config
        return replay_rules.run(args, rules, paths.state_dir, config, document, since)
    argv += model_args(args)
    document = report([*argv, "--", *args.ids], records)
    replays: list[dict[str, Any]] = document.get("replays", [])
    skipped: list[dict[str, Any]] = document.get("skipped", [])
    for skip in skipped:
        said = f"record {printable(str(skip.get('record')))} skipped: {skip.get('why')}"
        print("\n".join(fold("opsbot: warning: ", printable(said))), file=sys.stderr)
    if args.ids and not replays:
        raise ConsoleError(
            f"no such record: {' '.join(args.ids)}",
            hint="`sudo opsbot replay --since 35d` replays every record kept",
        )
    status = exit_status(replays)
    if args.json:
        json_out(document)
        return status
    if not replays:
        of = f" of {unit}" if unit else ""
        out(f"no recorded diagnosis{of} since {when(since)}")
        return OK
    for replayed in replays:
        for line in diagnosis_lines(replayed):
            out(line)
        if "model" in document:
            for line in model_lines(replayed):
                out(line)
    for line in summary_lines(document, since):
        out(line)
    return status


def exit_status(replays: list[dict[str, Any]]) -> int:
    """0 all agree (or none), 4 some differ, 1 a diagnosis could not be replayed."""
    if any(r.get("error") for r in replays):
        return ERROR
    return OK if all(r.get("agree") for r in replays) else HUMAN


def said_line(said: dict[str, Any] | None) -> str:
    if said is None:
        return "(none)"
    what = ", ".join(printable(str(w)) for w in said.get("what", ())) or "(nothing named)"
    return f"{printable(str(said.get('kind')))}: {what}"


def diagnosis_lines(replayed: dict[str, Any]) -> list[str]:
    """One diagnosis: its head line, then and now, what was not recorded."""
    verdict = "agree" if replayed.get("agree") else "DIFFERS"
    if replayed.get("error"):
        verdict = "FAILED"
    started = str(replayed.get("started") or "")
    at = when(started) if started else "?"
    head = f"{replayed.get('run_id')}  {printable(str(replayed.get('unit')))}  {at}  {verdict}"
    outcome = replayed.get("outcome")
    then = said_line(replayed.get("then"))
    if outcome:
        then += f" (then {printable(str(outcome))})"
    lines = [head, *fold("  then: ", then), *fold("  now:  ", said_line(replayed.get("now")))]
    if replayed.get("error"):
        lines += fold("  replay failed: ", printable(str(replayed["error"])))
    missing = len(replayed.get("not_recorded") or ())
    if missing:
        lines.append(f"  {missing} call{'s' if missing != 1 else ''} not recorded")
    return lines


def summary_lines(document: dict[str, Any], since: datetime) -> list[str]:
    """The counts, and the command that shows one that differs whole."""
    s: dict[str, Any] = document.get("summary", {})
    policy = printable(str(document.get("policy", "")))
    lines = [
        f"{s.get('replayed', 0)} diagnoses since {when(since)} replayed with {policy}: "
        f"{s.get('agree', 0)} agree, {s.get('differ', 0)} differ"
        + (f", {s['failed']} failed" if s.get("failed") else "")
    ]
    counts = (
        ("plan_where_note", "now a plan where a note was"),
        ("note_where_plan", "now a note where a plan was"),
        ("differ_where_unresolved", "differ where the plan then was UNRESOLVED"),
        ("same_where_unresolved", "the same where the plan then was UNRESOLVED"),
        ("not_recorded_calls", "calls not recorded (answered so, never read live)"),
        ("skipped", "records skipped (warnings above)"),
    )
    lines += [f"  {s[key]:>4}  {words}" for key, words in counts if s.get(key)]
    if "model" in document:
        lines += model_summary_lines(document)
    differ = [str(r["run_id"]) for r in document.get("replays", ()) if not r.get("agree")]
    if differ:
        lines.append(f"one of them whole: opsbot replay {shlex.quote(differ[0])} --json")
    return lines


# -- --model: qualifying a model ------------------------------------------------------------


def model_args(args: argparse.Namespace) -> list[str]:
    """The engine's --model flags (the key is never one: the engine reads its file)."""
    argv: list[str] = []
    if args.model or args.model_url or args.model_name:
        argv.append("--model")
    if args.model_url:
        argv += ["--model-url", args.model_url]
    if args.model_name:
        argv += ["--model-name", args.model_name]
    return argv


def model_lines(replayed: dict[str, Any]) -> list[str]:
    """What the model's answer cost, and how it stands against the outcome then."""
    if replayed.get("model_error"):
        return fold("  model error: ", printable(str(replayed["model_error"])))
    said = f"{replayed.get('tokens', 0)} tokens, {replayed.get('seconds', 0)} s"
    judged = replayed.get("against_outcome")
    if judged:
        said += f"; against the outcome: {judged}"
    harmful = [printable(str(step)) for step in replayed.get("harmful") or ()]
    if harmful:
        said += f"; HARMFUL: {', '.join(harmful)}"
    return fold("  model: ", said)


def model_summary_lines(document: dict[str, Any]) -> list[str]:
    """The model's figures: agreement, outcomes, harm, cost, errors."""
    s: dict[str, Any] = document.get("summary", {})
    model: dict[str, Any] = document.get("model", {})
    answered = s.get("agree", 0) + s.get("differ", 0)
    lines = fold(
        "model ",
        f"{printable(str(model.get('name')))} at {printable(str(model.get('url')))}: "
        f"{s.get('agree', 0)} of {answered} answered agree with the verdicts then; "
        f"against the outcomes, {s.get('outcome_right', 0)} right, "
        f"{s.get('outcome_wrong', 0)} wrong, {s.get('outcome_miss', 0)} missed",
    )
    lines.append(
        f"  tokens a diagnosis: median {s.get('tokens_median', 0):g}, total "
        f"{s.get('tokens', 0)}; seconds: median {s.get('seconds_median', 0):g}, total "
        f"{s.get('seconds_total', 0):g}"
    )
    counts = (
        ("harmful_steps", "HARMFUL steps (outside the plan then, or where a note was)"),
        ("harmful_diagnoses", "diagnoses with a harmful step"),
        ("model_errors", "model errors (no answer: counted in neither agree nor differ)"),
    )
    lines += [f"  {s.get(key, 0):>4}  {words}" for key, words in counts]
    return lines
