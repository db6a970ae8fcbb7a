"""``opsbot audit ID``: the plan's story from the journal, trusted entries only, after a
one-line summary of it (:func:`summary`: who proposed what, who approved it, what ran,
and where it ended). An entry one of opsbot's writers sent about another writer's event
(opsbot_cli/writers.py) is shown after the story, apart, "not from its writer".
``opsbot audit --verify ID`` (or ``--verify --since DAY``): its chained trail checked
(opsbot_cli/audit_verify.py), exit 5 when an entry is missing, altered or out of order.

On a journal collector (systemd-journal-remote writing remote-*.journal files under
/var/log/journal/remote, or ``--remote-dir``), each sending host's story too, read from
that host's files alone and believing only what it may say of itself (story.py).
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opsbot_cli.audit_verify import verify_days, verify_plan
from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.output import command, fit, json_out, out, plan_id_arg, printable, when
from opsbot_cli.screen import WIDTH, cut, show
from opsbot_cli.story import (
    REMOTE_DIR,
    SOURCES_MAP,
    Apart,
    AuditEntry,
    HostStory,
    Story,
    collector_sources,
    forged_of,
    read_host_story,
    read_sources_map,
    read_story,
)
from shared_io.exit_codes import REFUSED
from shared_io.paths import Paths
from shared_schema.states import PlanState

#: The state each event of a plan's story leaves it in (``plan.verified``: VERIFIED).
STATE_OF = {"plan.accepted": "PROPOSED"} | {f"plan.{s.lower()}": s.value for s in PlanState}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "audit", "tell a plan's story from the journal (trusted entries only)")
    p.add_argument("plan_id", metavar="ID", nargs="?")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the chained trail of ID (or of every plan since --since) against the "
        "journal and the writers' heads; name the first entry missing, altered or out of "
        "order (exit 5)",
    )
    p.add_argument(
        "--since",
        metavar="DAY",
        help="with --verify and no ID: the day chains from DAY (YYYY-MM-DD, UTC) to today",
    )
    p.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="with --verify: read the entries from the journal files under DIR (the fleet "
        "collector's copy of this host), not this host's journal",
    )
    p.add_argument("--json", action="store_true", help="the trusted entries, whole")
    p.add_argument("-v", "--verbose", action="store_true", help="every field whole (sha256s, argv)")
    p.add_argument(
        "--no-pager", action="store_true", help="print, never through a pager (as journalctl)"
    )
    p.add_argument(
        "--remote-dir",
        type=Path,
        metavar="DIR",
        help=f"a collector's remote-*.journal files, one per sending host (default {REMOTE_DIR})",
    )
    p.add_argument("--host", metavar="NAME", help="on a collector: only this sending host's story")
    p.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="ADDRESS=HOST",
        help=f"a source journal-remote named by its address is this host (also {SOURCES_MAP})",
    )
    p.set_defaults(func=run)


def _sources_map(given: list[str]) -> dict[str, str]:
    names = read_sources_map()
    for item in given:
        address, _, host = item.partition("=")
        if not address or not host:
            raise UsageError(
                f"--source {printable(item)!r}: not ADDRESS=HOST",
                hint="e.g. --source 10.0.0.2=web1 (the file remote-10.0.0.2.journal is web1's)",
            )
        names[address] = host
    return names


def run(args: argparse.Namespace, paths: Paths) -> int:
    if args.verify:
        return verify(args)
    if args.plan_id is None:
        raise UsageError("an ID to audit (or --verify --since DAY)")
    if args.since is not None or args.against is not None:
        raise UsageError("--since and --against go with --verify")
    plan_id = plan_id_arg(args.plan_id)
    remote_dir: Path = args.remote_dir or REMOTE_DIR
    try:
        stories = _collector(plan_id, remote_dir, args.host, _sources_map(args.source))
        unreadable = False
    except PermissionError:
        # An operator in systemd-journal on a collector still reads this host's story;
        # the senders' files are journal-remote's and root's.
        if args.remote_dir is not None or args.host is not None:
            raise
        stories, unreadable = [], True
    here = read_story(plan_id) if args.host is None else Story([], [], 0)
    entries, ignored = here.entries, here.ignored
    found = bool(entries or here.apart) or any(s.entries or s.apart for s in stories)
    if args.json:
        json_out(
            {
                "plan_id": plan_id,
                "entries": [e.as_json() for e in entries],
                "not_from_its_writer": [a.as_json() for a in here.apart],
                "ignored_untrusted": ignored,
                "hosts": {
                    s.host: {
                        "files": [f.name for f in s.files],
                        "entries": [e.as_json() for e in s.entries],
                        "not_from_its_writer": [a.as_json() for a in s.apart],
                        "ignored": s.ignored,
                    }
                    for s in stories
                },
                "ignored_forged": [f.as_json() for f in forged_of(stories)],
            }
        )
        return 0 if found else 1
    if not found:
        raise nothing_found(plan_id, stories, remote_dir, unreadable)
    lines = _entry_lines(entries, args.verbose)
    if entries:
        lines = [summary(plan_id, entries, args.verbose), "", *lines]
    lines += apart_lines(here.apart, args.verbose)
    if ignored:
        lines.append(f"({ignored} entries naming this plan were ignored: not written by opsbot)")
    if unreadable:
        lines.append(f"(the other hosts' journals in {remote_dir} need root: sudo opsbot audit)")
    for story in stories:
        if story.entries or story.ignored or args.host is not None:
            lines += _host_lines(plan_id, story, args.verbose, first=not lines)
    show(lines, no_pager=args.no_pager)  # a long story pages on a terminal, as journalctl's
    return 0


def nothing_found(
    plan_id: str,
    stories: list[HostStory] | None = None,
    remote_dir: Path = REMOTE_DIR,
    unreadable: bool = False,
) -> ConsoleError:
    """No trusted entry of ``plan_id``'s story, here (nor in a collector's ``stories``),
    said with what to check (``opsbot audit`` and ``opsbot mcp``'s plan_story)."""
    where = f" nor in the files of {len(stories)} host(s) in {remote_dir}" if stories else ""
    hint = "reading the journal needs root or group systemd-journal"
    if unreadable:
        hint = f"the other hosts' journals in {remote_dir} need root: sudo opsbot audit {plan_id}"
    elif stories:
        hint = f"does the plan's host send its journal here? `ls {remote_dir}`; {hint}"
    return ConsoleError(f"no journal entries from opsbot for plan {plan_id}{where}", hint=hint)


def verify(args: argparse.Namespace) -> int:
    """``--verify``: each chain intact or its problems; exit 5 when one is not."""
    if (args.plan_id is None) == (args.since is None):
        raise UsageError("--verify needs an ID or --since DAY (not both)")
    if args.against is not None and not args.against.is_dir():
        raise UsageError(f"--against {printable(str(args.against))!r}: not a directory")
    now = datetime.now(UTC)
    if args.plan_id is not None:
        plan_id = plan_id_arg(args.plan_id)
        reports = verify_plan(plan_id, args.against)
        what = f"plan {plan_id}"
    else:
        try:
            since = datetime.strptime(args.since, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise UsageError(f"--since {printable(args.since[:20])!r}: not YYYY-MM-DD") from None
        if since > now or now - since > timedelta(days=400):
            raise UsageError("--since: a day within the last 400 days")
        reports = verify_days(since, args.against, now)
        what = f"the days since {args.since}"
    intact = all(not r.problems for r in reports)
    if args.json:
        json_out({"intact": intact and bool(reports), "chains": [r.as_json() for r in reports]})
    elif not reports:
        out(f"no chained entries for {what} (written before chaining, or not by opsbot)")
    else:
        for report in reports:
            head = f", head #{report.head}" if report.head is not None else ""
            keys = "" if report.keyed else ", keys unchecked"
            state = "intact" if not report.problems else f"{len(report.problems)} problem(s)"
            said = f"{report.entries} entries{head}{keys}"
            out(f"{report.name} chain of {report.of}: {said}: {state}")
            for problem in report.problems:
                out(f"  {problem}")
            for entry in report.not_its_writers:
                out(f"  not from its writer: {entry}")
        if not all(r.keyed for r in reports):
            out("(keys unchecked: each writer's key is read by root on the host whose trail it is)")
    if not reports:
        return 1
    return 0 if intact else REFUSED


def _collector(
    plan_id: str, remote_dir: Path, only_host: str | None, sources_map: dict[str, str]
) -> list[HostStory]:
    """Each sending host's story under ``remote_dir`` (only ``only_host``'s if given)."""
    sources = collector_sources(remote_dir, sources_map)
    if only_host is not None and only_host not in sources:
        known = ", ".join(sources) or "none"
        raise ConsoleError(
            f"no journal files of host {printable(only_host)!r} in {remote_dir} (hosts: {known})",
            hint="journal-remote names each file after its sender; map addresses with --source",
        )
    return [
        read_host_story(plan_id, host, files)
        for host, files in sources.items()
        if only_host is None or host == only_host
    ]


def _entry_lines(entries: list[AuditEntry], verbose: bool) -> list[str]:
    lines: list[str] = []
    for e in entries:
        # A root-run service may log PLAN_ID= too; what it wrote is shown, never obeyed.
        lines.append(f"{when(e.time)}  {printable(e.event):<18} [{printable(e.source)}]")
        details = " ".join(
            f"{k.lower()}={_short(k, printable(v), verbose)}" for k, v in e.fields.items()
        )
        lines += fit(details, "    ", lines=3, verbose=verbose)
    return lines


def _host_lines(plan_id: str, story: HostStory, verbose: bool, *, first: bool) -> list[str]:
    """One sending host's section: its name and file, the summary of its story, the
    story, what it may not say."""
    files = story.files[0].name if story.files else "no file"
    if len(story.files) > 1:
        files += f" and {len(story.files) - 1} archived"
    lines = [] if first else [""]
    lines.append(f"host {printable(story.host)}  ({printable(files)})")
    if story.entries:
        lines.append(summary(plan_id, story.entries, verbose))
    lines += _entry_lines(story.entries, verbose) or ["    (nothing this host may say of the plan)"]
    lines += apart_lines(story.apart, verbose)
    untrusted = story.ignored - len(story.forged)
    if untrusted:
        lines.append(f"({untrusted} entries naming this plan were ignored: not written by opsbot)")
    for reason, count in Counter(f.reason for f in story.forged).items():
        lines += fit(f"({count} ignored: {printable(reason)})", "", lines=2, verbose=verbose)
    return lines


def apart_lines(apart: list[Apart], verbose: bool) -> list[str]:
    """The entries shown apart: one of opsbot's writers logged another's event. Each as
    the story shows an entry, with whose event it is; never part of the summary."""
    if not apart:
        return []
    lines = [f"not from its writer ({len(apart)}): another writer's events, not the plan's history"]
    for one in apart:
        lines += _entry_lines([one.entry], verbose)
        lines += fit(f"({printable(str(one.why))})", "    ", lines=2, verbose=verbose)
    return lines


def _short(key: str, value: str, verbose: bool) -> str:
    """A sha256 as its first 16 digits unless ``verbose`` (``--json`` has them whole)."""
    if not verbose and key.endswith("SHA256") and len(value) == 64:
        return value[:16] + "..."
    return value


def summary(plan_id: str, entries: list[AuditEntry], verbose: bool = False) -> str:
    """The story of ``plan_id`` in one line of at most 100 columns (whole if ``verbose``):
    who proposed what, who approved it (or rejected it; a standing rule as ``rule NAME
    approved``), what ran and how each step ended, and the state it is in, as its own
    entries say (an incident's other plans are in the story, not here)::

        opsbot-diagnose proposed "Restart app"; bob approved; ran restart app.service (ok): VERIFIED

    Where it would not fit, the steps are counted (``ran 3 steps (2 ok, 1 failed)``),
    then the goal is cut; the state is always said."""
    own = [e for e in entries if e.plan_id == plan_id]
    accepted = next((e for e in own if e.event == "plan.accepted"), None)
    proposer = _proposer(accepted, entries)
    goal = printable(" ".join(accepted.fields.get("GOAL", "").split())) if accepted else ""
    decided = [e for e in own if e.event in ("plan.approved", "plan.rejected")]
    decision = "not approved"
    if decided:
        fields = decided[-1].fields
        by = printable(fields.get("APPROVER", "someone"))
        if decided[-1].event == "plan.rejected":
            decision = f"{by} rejected it"
        elif fields.get("APPROVED_BY_RULE"):  # a rule, never said as if a person
            decision = f"rule {printable(fields['APPROVED_BY_RULE'])} approved"
        else:
            decision = f"{by} approved"
    finished = [e for e in own if e.event == "step.finished"]
    outcomes = [printable(e.fields.get("OUTCOME", "?")) for e in finished]
    each = ", ".join(f"{_did(e)} ({o})" for e, o in zip(finished, outcomes, strict=True))
    counted = ", ".join(f"{n} {o}" for o, n in Counter(outcomes).items())
    plural = "" if len(finished) == 1 else "s"
    ran = [f"ran {each}", f"ran {len(finished)} step{plural} ({counted})"] if finished else []
    states = [STATE_OF[e.event] for e in own if e.event in STATE_OF]
    verdict = states[-1] if states else "no state recorded"

    def line(goal: str | None, ran: str) -> str:
        """The summary, the goal quoted (None: "proposed it")."""
        what = "it" if goal is None else f'"{goal}"'
        return f"{proposer} proposed {what}; {decision}; {ran}: {verdict}"

    choices = ran or ["nothing ran"]
    whole = goal or None
    if verbose:
        return line(whole, choices[0])
    for said in choices:  # the goal whole, with each step or with them counted
        if len(line(whole, said)) <= WIDTH:
            return line(whole, said)
    room = WIDTH - len(line("", choices[-1]))  # what the goal may take between its quotes
    if goal and room >= 12:
        return line(cut(goal, room), choices[-1])
    return cut(line(None, choices[-1]), WIDTH)


def _proposer(accepted: AuditEntry | None, entries: list[AuditEntry]) -> str:
    """Who submitted the plan: the user the executor saw (``PEER_UID``), else the unit
    of the diagnosis run that proposed it (its entries share the ``RUN_ID``)."""
    if accepted is None:
        return "an unknown submitter"
    if accepted.peer:
        return printable(accepted.peer)
    run_id = accepted.fields.get("RUN_ID")
    for entry in entries:
        if run_id and entry.event.startswith("diagnose.") and entry.fields.get("RUN_ID") == run_id:
            return printable(entry.source.split(" ")[0].removesuffix(".service"))
    return "an unknown submitter"


def _did(entry: AuditEntry) -> str:
    """What a finished step did, as ``restart app.service`` (its argv, shortened from
    ``systemctl restart --no-ask-password -- app.service``)."""
    argv = entry.fields.get("ARGV", "")
    try:
        words = shlex.split(argv)
    except ValueError:
        words = []
    if len(words) >= 3 and words[0] == "systemctl":
        return printable(f"{words[1]} {words[-1]}")
    return printable(argv) or f"step {printable(entry.fields.get('STEP', '?'))}"
