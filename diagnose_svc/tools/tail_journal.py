"""tail_journal: the newest journal lines of one unit, read with systemd.journal.Reader.

Matches what ``journalctl -u UNIT`` shows: the unit's own processes, systemd's messages
about the unit, its core dumps, and messages other system daemons log about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import Field, field_validator

from diagnose_svc._model import Model
from diagnose_svc.errors import ToolError
from diagnose_svc.limits import (
    JOURNAL_DEFAULT_LINES,
    JOURNAL_MAX_LINES,
    JOURNAL_MESSAGE_LIMIT,
    TOOL_OUTPUT_BUDGET,
)
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from shared_schema.units import denied_reason

PRIORITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"

_RELATIVE = re.compile(r"^([1-9][0-9]{0,4})(s|min|h|d)$")
_UNITS = {"s": "seconds", "min": "minutes", "h": "hours", "d": "days"}
MAX_SINCE = timedelta(days=31)


class JournalArgs(UnitToolArgs):
    gives = "journal"
    lines: Annotated[int, Field(ge=1, le=JOURNAL_MAX_LINES)] = JOURNAL_DEFAULT_LINES
    since: Annotated[str, Field(max_length=40)] | None = None
    own_output_only: bool = False

    @field_validator("since")
    @classmethod
    def _since_format(cls, value: str | None) -> str | None:
        if value is not None:
            since_cutoff(value, datetime.now(UTC))
        return value


def since_cutoff(since: str, now: datetime) -> datetime:
    """The moment ``since`` names: a relative age ("10min", "2h", "30s", "1d") or an ISO time.

    ISO times without an offset are UTC. Raises ValueError for anything else, and for
    ages beyond 31 days or times in the future.
    """
    match = _RELATIVE.fullmatch(since)
    if match is not None:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        if delta > MAX_SINCE:
            raise ValueError("since may reach back at most 31 days")
        return now - delta
    try:
        moment = datetime.fromisoformat(since)
    except ValueError:
        raise ValueError(
            "since is an age like '10min', '30s', '2h', '1d' or an ISO time like "
            "'2026-11-29T21:00:00Z'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if moment > now + timedelta(minutes=5):
        raise ValueError("since is in the future")
    return moment


class JournalLine(Model):
    """One journal entry: when (UTC), how severe, who logged it, what it said.

    ``systemd`` is true only for what systemd itself (PID 1) logged, as journald records
    it (_PID=1): a line any process can write claims nothing by its text or its name.
    """

    time: str
    priority: str
    source: str
    message: str
    systemd: bool = False


class JournalTail(ToolOutput):
    """The newest lines of a unit's journal, newest last."""

    unit: str
    since: str | None = None
    lines: list[JournalLine]
    omitted: int = 0

    def summary(self) -> str:
        if not self.lines:
            return f"journal of {self.unit}: no lines" + (
                f" since {self.since}" if self.since else ""
            )
        newest = self.lines[-1]
        return (
            f"journal of {self.unit}: {len(self.lines)} lines; newest: "
            f"{newest.source}: {newest.message[:120]}"
        )


def _text(value: Any) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return "" if value is None else str(value)


def journal_line(entry: Mapping[str, Any]) -> JournalLine:
    """One entry as returned by systemd.journal.Reader, bounded."""
    moment = entry.get("__REALTIME_TIMESTAMP")
    when = (
        moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        if isinstance(moment, datetime)
        else ""
    )
    priority = entry.get("PRIORITY")
    level = PRIORITIES[priority] if isinstance(priority, int) and 0 <= priority < 8 else "info"
    source = _text(entry.get("SYSLOG_IDENTIFIER")) or _text(entry.get("_COMM")) or "?"
    message = _text(entry.get("MESSAGE"))
    if len(message) > JOURNAL_MESSAGE_LIMIT:
        message = message[: JOURNAL_MESSAGE_LIMIT - 1] + "…"
    return JournalLine(
        time=when,
        priority=level,
        source=source[:64],
        message=message,
        systemd=str(entry.get("_PID", "")) == "1",
    )


def fit(unit: str, since: str | None, newest_first: list[JournalLine], budget: int) -> JournalTail:
    """Keep the newest lines whose JSON fits ``budget`` characters; count the rest."""
    empty = JournalTail(unit=unit, since=since, lines=[], omitted=len(newest_first))
    used = len(empty.model_dump_json()) + 8  # room for a larger omitted count
    kept: list[JournalLine] = []
    for line in newest_first:
        size = len(json.dumps(line.model_dump(), ensure_ascii=False, separators=(",", ":"))) + 1
        if used + size > budget:
            break
        kept.append(line)
        used += size
    kept.reverse()
    return JournalTail(unit=unit, since=since, lines=kept, omitted=len(newest_first) - len(kept))


def _open_reader(context: ToolContext) -> Any:
    from systemd import journal  # imported here: the module needs libsystemd at import

    if context.journal_path is not None:
        return journal.Reader(path=str(context.journal_path))
    return journal.Reader(journal.SYSTEM | journal.LOCAL_ONLY)


def _add_unit_matches(reader: Any, unit: str) -> None:
    """The matches journalctl -u uses (src/journal/journalctl.c, add_matches_for_unit)."""
    reader.add_match(_SYSTEMD_UNIT=unit)
    reader.add_disjunction()
    reader.add_match(_PID="1", UNIT=unit)
    reader.add_disjunction()
    reader.add_match(MESSAGE_ID=COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=unit)
    reader.add_disjunction()
    reader.add_match(_UID="0", OBJECT_SYSTEMD_UNIT=unit)


@read_tool(JournalArgs)
def tail_journal(args: JournalArgs, context: ToolContext) -> JournalTail:
    """Read the newest journal lines of one unit (its own output and systemd's messages
    about it), newest last.

    lines: how many to read (1-200, default 50). since: only lines after this moment,
    an age such as "10min", "30s", "2h", "1d" or an ISO time (UTC unless it has an
    offset). own_output_only: only what the unit's own processes logged, without
    systemd's messages about it (to see what each of several attempts said). Each line
    has time (UTC), priority, source and message (cut to 500 characters); when they do
    not all fit, the oldest are left out and counted in omitted.
    """
    scope = context.journal_scope
    if scope is not None and (args.unit not in scope or denied_reason(args.unit)):
        raise ToolError(
            f"the journal of {args.unit} is outside the diagnosis scope (the units opsbot "
            "may act on, the health targets' units, [diagnose] scope, and their dependencies)",
            hint="only units in scope are read; its status can still be read",
        )
    cutoff = since_cutoff(args.since, datetime.now(UTC)) if args.since else None
    try:
        reader = _open_reader(context)
    except OSError as exc:
        raise ToolError(
            f"cannot open the journal: {exc.strerror or exc}",
            hint="the diagnose user needs to be in the systemd-journal group",
        ) from exc
    newest_first: list[JournalLine] = []
    try:
        if args.own_output_only:
            reader.add_match(_SYSTEMD_UNIT=args.unit)
        else:
            _add_unit_matches(reader, args.unit)
        reader.seek_tail()
        while len(newest_first) < args.lines:
            entry = reader.get_previous()
            if not entry:
                break
            moment = entry.get("__REALTIME_TIMESTAMP")
            if cutoff is not None and isinstance(moment, datetime) and moment < cutoff:
                break
            newest_first.append(journal_line(entry))
    except OSError as exc:
        raise ToolError(f"reading the journal failed: {exc.strerror or exc}") from exc
    finally:
        reader.close()
    return fit(args.unit, args.since, newest_first, TOOL_OUTPUT_BUDGET)
