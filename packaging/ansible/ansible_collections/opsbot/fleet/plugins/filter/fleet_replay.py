"""opsbot.fleet's replay report, built on the controller from what opsbot_replay returned
on each host: how many of each host's recorded diagnoses today's opsbot answers as it did
then, and in all (fleet-replay.yml).

- ``fleet_replay_report(results, since=, unit=)``: ``{inventory_hostname: opsbot_replay's
  registered result}`` (``{}`` where the task did not run) to the report: per host its
  counts (replayed, agree, differ, failed, skipped, not-recorded calls, ...), its
  agreement and the diagnoses that differ; the same counts added up in ``total``; the
  hosts that could not be read, and why, in ``unread``;
- ``fleet_replay_table(report)``: the report as terminal lines of at most 100 columns.

What a host answers is that host's word (as in fleet_report): read into its own entry only,
keyed by the inventory's name; its counts must be counts that add up (agree, differ and
failed make replayed) or the host is not read (the others are); its text is shown
escaped, on one line, bounded.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ansible_collections.opsbot.fleet.plugins.filter.fleet_report import (
    LINES_MAX,
    LINES_SHOWN,
    WIDTH,
    ReportError,
    Unreadable,
    cut,
    printable,
)

FORMAT = "opsbot-fleet-replay/1"
#: The counts every host's summary carries, shown in the table (the engine's names).
SHOWN = ("replayed", "agree", "differ", "failed", "skipped", "not_recorded_calls")
#: The other counts of a summary, kept and added up where the host sends them.
MORE = (
    "plan_where_note",
    "note_where_plan",
    "differ_where_unresolved",
    "same_where_unresolved",
    "harmful_steps",
    "tokens",
)
#: Why a host with no registered result has no report.
NOT_REACHED = "not replayed: the host was not reached, or failed before the replay"


def _said(value: Any) -> str:
    return repr(cut(printable(value), 40))


def _text(value: Any, width: int = 200) -> str:
    return cut(printable(value), width)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unreadable(f"{_said(value)} is not a count")
    return value


def _counts(summary: Any) -> dict[str, int]:
    """A host's summary as counts: every one of SHOWN, those of MORE it sends; agree,
    differ and failed must make replayed."""
    if not isinstance(summary, Mapping):
        raise Unreadable("it has no summary")
    missing = [key for key in SHOWN if key not in summary]
    if missing:
        raise Unreadable(f"its summary has no {', '.join(missing)}")
    counts = {key: _count(summary[key]) for key in SHOWN}
    counts.update({key: _count(summary[key]) for key in MORE if key in summary})
    if counts["agree"] + counts["differ"] + counts["failed"] != counts["replayed"]:
        raise Unreadable(
            f"agree {counts['agree']}, differ {counts['differ']} and failed "
            f"{counts['failed']} do not make replayed {counts['replayed']}"
        )
    return counts


def _verdict(said: Any) -> str:
    """A verdict as the replay says it (kind, ended_by, what) on one line."""
    if not isinstance(said, Mapping):
        return "none"
    what = said.get("what")
    named = ", ".join(printable(w) for w in what) if isinstance(what, list) else ""
    return _text(f"{said.get('kind', '?')}: {named or '(nothing named)'}", 120)


def _differing(replays: Any) -> list[dict[str, str]]:
    """The host's replayed diagnoses that do not agree: what they said then and now."""
    if not isinstance(replays, list):
        raise Unreadable("its replays are not a list")
    out = []
    for replay in replays:
        if not isinstance(replay, Mapping):
            raise Unreadable(f"{_said(replay)} is not a replayed diagnosis")
        if replay.get("agree") is True:
            continue
        out.append(
            {
                "run_id": _text(replay.get("run_id", "?"), 40),
                "unit": _text(replay.get("unit", "?"), 64),
                "then": _verdict(replay.get("then")),
                "now": _verdict(replay.get("now")) if replay.get("now") else "none",
                "outcome": _text(replay.get("outcome") or "", 16),
                "error": _text(replay.get("error") or ""),
            }
        )
    return out[:LINES_MAX]


def _agreement(counts: Mapping[str, int]) -> float | None:
    """The share of the replayed diagnoses that agree, in percent (None: none replayed)."""
    if not counts["replayed"]:
        return None
    return round(100 * counts["agree"] / counts["replayed"], 1)


def _host(result: Mapping[str, Any]) -> dict[str, Any]:
    report = result["report"]
    if not isinstance(report, Mapping):
        raise Unreadable("its replay report is not an object")
    counts = _counts(report.get("summary"))
    skipped = report.get("skipped", [])
    if not isinstance(skipped, list):
        raise Unreadable("its skipped records are not a list")
    median = report["summary"].get("seconds_median", 0)
    if isinstance(median, bool) or not isinstance(median, int | float) or median < 0:
        raise Unreadable(f"{_said(median)} is not a number of seconds")
    return {
        "policy": _text(report.get("policy", "?"), 48),
        "exit_status": _count(result.get("exit_status", 0)),
        "summary": counts,
        "agreement": _agreement(counts),
        "seconds_median": median,
        "differing": _differing(report.get("replays", [])),
        "skipped": [
            _text(f"{s.get('record', '?')}: {s.get('why', '')}" if isinstance(s, Mapping) else s)
            for s in skipped[:LINES_MAX]
        ],
    }


def fleet_replay_report(
    results: Any, since: Any = "30d", unit: Any = None, generated_at: str | None = None
) -> dict[str, Any]:
    """The report of ``{host: opsbot_replay's result}`` (hosts in the order given, the
    inventory's): each host read, its counts and the diagnoses that differ; ``total``,
    the counts of every host read added up; ``unread``, each host that could not be read
    and why (the task's message: the replay failed there; or its answer is not
    opsbot's)."""
    if not isinstance(results, Mapping):
        raise ReportError("fleet_replay_report takes {inventory_hostname: result}")
    hosts: dict[str, dict[str, Any]] = {}
    unread: dict[str, str] = {}
    for name, result in results.items():
        host = str(name)
        if not isinstance(result, Mapping) or not result:
            unread[host] = NOT_REACHED
        elif "report" not in result:
            unread[host] = _text(result.get("msg") or "opsbot replay did not run there", 500)
        else:
            try:
                hosts[host] = _host(result)
            except Unreadable as exc:
                unread[host] = f"its answer is not opsbot's: {exc}"
    total: dict[str, int] = {key: 0 for key in (*SHOWN, *MORE)}
    for said in hosts.values():
        for key, count in said["summary"].items():
            total[key] += count
    return {
        "format": FORMAT,
        "generated_at": generated_at or datetime.now(UTC).isoformat(timespec="seconds"),
        "since": _text(since, 32),
        "unit": _text(unit, 256) if unit else None,
        "hosts": hosts,
        "total": {"hosts": len(hosts), **total, "agreement": _agreement(total)},
        "unread": unread,
    }


def check_replay_report(report: Any) -> Mapping[str, Any]:
    """``report`` if it is an opsbot fleet replay report, else a ReportError saying why."""
    if not isinstance(report, Mapping) or report.get("format") != FORMAT:
        raise ReportError(f"not an opsbot fleet replay report (its format must be {FORMAT})")
    return report


def _percent(agreement: float | None) -> str:
    return "-" if agreement is None else f"{agreement:.1f}%"


def fleet_replay_table(report: Any) -> list[str]:
    """The report for the terminal, each line at most 100 columns: what was replayed and
    how much of it agrees; a row per host and one for all; then, per host, the diagnoses
    that differ (then and now) and the hosts not read, with why."""
    report = check_replay_report(report)
    hosts: Mapping[str, Mapping[str, Any]] = report["hosts"]
    total = report["total"]
    unit = f" of {printable(report['unit'])}" if report.get("unit") else ""
    width = min(max([len(printable(h)) for h in hosts] + [4]), 24)
    head = (
        f"{'host':<{width}}  replayed  agree  differ  failed  skipped  not recorded  "
        "agreement  policy"
    )
    lines = [
        cut(
            f"diagnoses{unit} replayed since {printable(report['since'])} on "
            f"{total['hosts']} host{'' if total['hosts'] == 1 else 's'}: {total['agree']} of "
            f"{total['replayed']} agree ({_percent(total['agreement'])}), "
            f"{total['differ']} differ",
            WIDTH,
        ),
        "",
        head,
    ]

    def row(name: str, counts: Mapping[str, Any], agreement: float | None, policy: str) -> str:
        return cut(
            f"{cut(name, width):<{width}}  {counts['replayed']:>8}  {counts['agree']:>5}  "
            f"{counts['differ']:>6}  {counts['failed']:>6}  {counts['skipped']:>7}  "
            f"{counts['not_recorded_calls']:>12}  {_percent(agreement):>9}  {policy}",
            WIDTH,
        ).rstrip()

    for name, said in hosts.items():
        lines.append(row(printable(name), said["summary"], said["agreement"], said["policy"]))
    lines.append(row("all", total, total["agreement"], ""))
    for name, said in hosts.items():
        differing = said["differing"]
        for replay in differing[:LINES_SHOWN]:
            why = f"failed: {replay['error']}" if replay["error"] else f"now {replay['now']}"
            ended = f" ({replay['outcome']})" if replay["outcome"] else ""
            lines += [
                cut(
                    f"{printable(name)}  {replay['run_id']}  {replay['unit']}: "
                    f"then {replay['then']}{ended}",
                    WIDTH,
                ),
                cut(f"{'':<{len(printable(name))}}  {why}", WIDTH),
            ]
        more = len(differing) - LINES_SHOWN
        if more > 0:
            lines.append(cut(f"{printable(name)}  ({more} more differ: the JSON has them)", WIDTH))
    for name, why in report.get("unread", {}).items():
        wrapped = textwrap.wrap(
            f"{printable(name)}: NOT READ, {printable(why)}",
            WIDTH,
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        lines += wrapped[:LINES_SHOWN]
    return lines


class FilterModule:
    """opsbot.fleet's replay filters: the report and its table."""

    def filters(self) -> dict[str, Any]:
        return {
            "fleet_replay_report": fleet_replay_report,
            "fleet_replay_table": fleet_replay_table,
        }
