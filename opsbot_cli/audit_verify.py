"""``opsbot audit --verify [ID | --since DAY]``: check the chained trail
(shared_io.audit_chain) against the journal and the writers' heads, and name the first
entry missing, altered or out of order.

For a plan: each writer's chain of it (the executor's, root's), read from the journal in
the order journald keeps it; for ``--since``: each writer's day chains from that UTC day
to today, whatever the plans. An entry counts only from its writer (opsbot_cli/writers.py:
the executor's chain from opsbot-executor.service and opsbot-apply.service as the
executor's user, root's from uid 0; on a collector's copy, ``--against DIR``, the same
units as the sending host's journald recorded them, as a user other than root), and is

- altered when its ``AUDIT_HASH`` is not the sha256 of its fields (an edit);
- missing when a sequence number is absent, before the last entry seen or up to the
  head its writer keeps (a deletion, also of the newest);
- out of order when the journal has it before an entry with a smaller number;
- unlinked when its ``*_PREV`` is not the hash of the entry numbered before it (an entry
  replaced by one made up);
- forked when two different entries carry one number (one made up, or its writer killed
  between sending it and keeping its head; the same entry twice is one);
- past the head when it is numbered after the head its writer keeps (made up, or its
  writer killed between sending it and keeping its head);
- unkeyed when its ``AUDIT_MAC`` is not its writer's key's mark of its hash, or it has
  none though it was sent after the key was made: the hash has no key, so anyone who
  reads the last link can compute the next; only the writer's key marks it.

The heads and the keys are the writers' files on the host whose trail it is: read by
root there (an operator in group systemd-journal checks the links alone). ``--against
DIR`` checks a copy of this host's trail (the collector's files for it, copied back);
a chain this host keeps no head of is another host's, checked without heads or key (the
report says ``keyed: false``): verify a host's trail on that host.

An entry that names a writer's chain and carries a chain hash, but that journald says
another uid or unit sent, is not believed: only the uid and unit journald records tell
the writer's own. It is left out of the chain and listed apart ("not from its writer");
it makes no problem of the chain, so a local user who logs such fields cannot make
``--verify`` fail.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opsbot_cli.errors import ConsoleError
from opsbot_cli.writers import CHAIN_WRITERS, Uids, local_uids
from shared_io.audit_chain import (
    EXECUTOR_CHAIN_DIR,
    GENESIS,
    HASH_FIELD,
    MAC_FIELD,
    ROOT_CHAIN_DIR,
    Head,
    Key,
    day_head_path,
    entry_hash,
    plan_head_path,
    read_head,
    read_key,
)
from shared_io.run import run as run_program

CHAIN_DIRS = {"executor": EXECUTOR_CHAIN_DIR, "root": ROOT_CHAIN_DIR}
#: The most a verify reads from journalctl.
OUTPUT_LIMIT = 256 * 1024 * 1024


@dataclass
class ChainReport:
    """One chain checked: ``name`` (executor, root), ``of`` (a plan id, or day-YYYYMMDD)."""

    name: str
    of: str
    entries: int = 0
    head: int | None = None
    #: Whether each link's key mark was checked (the writer's key read here).
    keyed: bool = False
    problems: list[str] = field(default_factory=list)
    #: Entries that name this chain but that its writer did not send: not believed.
    not_its_writers: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "chain": self.name,
            "of": self.of,
            "entries": self.entries,
            "head": self.head,
            "keyed": self.keyed,
            "intact": not self.problems,
            "problems": self.problems,
            "not_from_its_writer": self.not_its_writers,
        }


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def read_entries(matches: list[str], against: Path | None) -> list[dict[str, str]]:
    """The journal entries matching ``matches`` (all of them: journalctl's OR is ``+``),
    oldest first, every field a string: the local journal, or the journal files under
    ``against``."""
    argv = ["journalctl", "--no-pager", "-o", "json", "--all"]
    if against is not None:
        argv += ["--directory", str(against)]
    result = run_program([*argv, *matches], timeout=120, output_limit=OUTPUT_LIMIT)
    if not result.ok and not result.stdout:
        said = (result.stderr.strip() or result.error).splitlines()
        raise ConsoleError(
            f"journalctl could not read the journal: {said[-1][:200] if said else 'no output'}",
            hint="reading the journal needs root or group systemd-journal",
        )
    entries = []
    # One entry per \n: journalctl prints text raw, and a field may hold U+2028 or
    # U+2029, which splitlines() would take for line ends and cut the entry in two.
    for line in result.stdout.split("\n"):
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        fields = {k: t for k, v in raw.items() if (t := _text(v)) is not None}
        entries.append(fields)
    return entries


def trusted_writer(entry: Mapping[str, str], uids: Uids) -> bool:
    """Whether ``entry`` comes from the writer its ``CHAIN`` names (its units, as its
    user: ``uids`` this host's, None for a collector's copy)."""
    writers = CHAIN_WRITERS.get(entry.get("CHAIN", ""), ())
    return any(writer.sent(entry, uids) for writer in writers)


def _where(entry: Mapping[str, str]) -> str:
    try:
        at = datetime.fromtimestamp(int(entry["__REALTIME_TIMESTAMP"]) / 1e6, UTC)
        when = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    except (KeyError, ValueError):
        when = "?"
    return f"{entry.get('EVENT', '?')} at {when}"


def _unkeyed(entry: Mapping[str, str], key: Key) -> bool:
    """Whether ``entry`` lacks its writer's key mark: a wrong one, or none though it was
    sent after the key was made (journald's time of it; an entry sent before has none)."""
    mark = entry.get(MAC_FIELD)
    if mark is None:
        sent = entry.get("__REALTIME_TIMESTAMP", "")
        return not sent.isdigit() or int(sent) >= key.since_us
    expected = key.mark(entry.get(HASH_FIELD, ""))
    return not hmac.compare_digest(mark.encode(), expected.encode())  # any text, compared


def check_chain(
    report: ChainReport,
    entries: list[dict[str, str]],
    seq_field: str,
    prev_field: str,
    head: Head | None,
    key: Key | None = None,
) -> None:
    """The checks above, for one chain's ``entries`` in journal order; the key marks
    where its writer's ``key`` is given."""
    report.entries = len(entries)
    report.head = head.seq if head is not None else None
    numbered: dict[int, dict[str, str]] = {}
    order: list[int] = []
    for entry in entries:
        seq_text = entry.get(seq_field, "")
        if not seq_text.isdigit():
            report.problems.append(f"altered: {_where(entry)} has no {seq_field}")
            continue
        seq = int(seq_text)
        if entry_hash(entry) != entry.get(HASH_FIELD):
            report.problems.append(
                f"altered: #{seq} ({_where(entry)}): its fields are not what its hash signed"
            )
        first = numbered.setdefault(seq, entry)
        if first is not entry and first.get(HASH_FIELD) != entry.get(HASH_FIELD):
            # The same entry twice (a journal upload retried) is one entry; two different
            # ones under one number are a fork of the chain.
            report.problems.append(
                f"forked: #{seq} ({_where(entry)}) is a second, different entry numbered "
                f"#{seq} after ({_where(first)}): one was made up, or its writer was killed "
                "between sending it and keeping its head"
            )
        order.append(seq)
    last = max(order, default=0)
    top = max(last, head.seq if head is not None else 0)
    absent = [n for n in range(1, top + 1) if n not in numbered]
    for n in absent:
        after = numbered.get(n - 1)
        before = next((numbered[m] for m in range(n + 1, top + 1) if m in numbered), None)
        where = (
            f"after #{n - 1} ({_where(after)})"
            if after is not None
            else f"before #{n + 1} ({_where(before)})"
            if before is not None
            else "the writer's head counts it"
        )
        report.problems.append(f"missing: #{n}, {where}")
    for earlier, later in zip(order, order[1:], strict=False):
        if later < earlier:
            report.problems.append(
                f"out of order: #{later} ({_where(numbered[later])}) comes after "
                f"#{earlier} ({_where(numbered[earlier])}) in the journal"
            )
    for seq in sorted(numbered):
        expected = GENESIS if seq == 1 else numbered.get(seq - 1, {}).get(HASH_FIELD)
        if expected is not None and numbered[seq].get(prev_field) != expected:
            report.problems.append(
                f"unlinked: #{seq} ({_where(numbered[seq])}) does not follow #{seq - 1}"
            )
    if head is not None and head.seq == last and last in numbered:
        if numbered[last].get(HASH_FIELD) != head.hash:
            report.problems.append(
                f"altered: #{last} ({_where(numbered[last])}) is not the entry its writer "
                "recorded last"
            )
    if head is not None:
        for seq in sorted(n for n in numbered if n > head.seq):
            report.problems.append(
                f"past the head: #{seq} ({_where(numbered[seq])}) is numbered after #"
                f"{head.seq}, the last entry its writer recorded: made up, or its writer was "
                "killed between sending it and keeping its head"
            )
    if key is not None:
        report.keyed = True
        for entry in entries:
            if entry.get(seq_field, "").isdigit() and _unkeyed(entry, key):
                report.problems.append(
                    f"unkeyed: #{entry[seq_field]} ({_where(entry)}) does not carry its "
                    f"writer's key mark ({MAC_FIELD}): made up by someone who read the chain"
                )


def _read_head(path: Path) -> Head | None:
    try:
        head = read_head(path)
    except OSError:
        return None  # not readable here (an operator): the chain alone is checked
    return head if head.seq else None


def _read_key(directory: Path, head: Head | None, against: Path | None) -> Key | None:
    """The key a chain's links are checked with: its writer's here, for this host's own
    journal or a copy of a chain this host keeps the head of; None when it is not
    readable (an operator) or the copy is another host's."""
    if against is not None and head is None:
        return None
    try:
        return read_key(directory)
    except OSError:
        return None


def _forged(entry: Mapping[str, str], name: str, seq_field: str) -> str:
    """An entry that names ``name``'s chain but that writer did not send (numbered as the
    chain being checked numbers it: ``seq_field``)."""
    seq = entry.get(seq_field) or "?"
    unit = entry.get("_SYSTEMD_UNIT") or "no unit"
    return (
        f"#{seq} ({_where(entry)}) names the {name}'s chain but uid {entry.get('_UID', '?')} "
        f"wrote it in {unit}: not believed"
    )


@dataclass
class Chains:
    """The chained entries of a read, by the chain each names: those its writer sent, and
    those someone else sent under its name."""

    trusted: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    forged: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {*self.trusted, *self.forged}


def grouped(entries: Iterable[dict[str, str]], remote: bool) -> Chains:
    """Each chained entry under the chain it names, trusted only from that chain's writer
    (:func:`trusted_writer`)."""
    uids = None if remote else local_uids()
    chains = Chains()
    for entry in entries:
        name = entry.get("CHAIN", "")
        if HASH_FIELD not in entry or name not in CHAIN_DIRS:
            continue
        into = chains.trusted if trusted_writer(entry, uids) else chains.forged
        into.setdefault(name, []).append(entry)
    return chains


def _report(
    chains: Chains,
    name: str,
    of: str,
    fields: tuple[str, str],
    head: Head | None,
    key: Key | None,
) -> ChainReport:
    report = ChainReport(name, of)
    seq_field, _ = fields
    check_chain(report, chains.trusted.get(name, []), *fields, head, key)
    report.not_its_writers = [
        _forged(entry, name, seq_field) for entry in chains.forged.get(name, [])
    ]
    return report


def verify_plan(plan_id: str, against: Path | None) -> list[ChainReport]:
    """Each writer's chain of ``plan_id``: from its writer's head when it has one here."""
    entries = read_entries([f"PLAN_ID={plan_id}"], against)
    chains = grouped(entries, remote=against is not None)
    reports = []
    for name, directory in CHAIN_DIRS.items():
        head = _read_head(plan_head_path(directory, plan_id))
        if name not in chains.names() and head is None:
            continue
        key = _read_key(directory, head, against)
        reports.append(_report(chains, name, plan_id, ("CHAIN_SEQ", "CHAIN_PREV"), head, key))
    return reports


def verify_days(since: datetime, against: Path | None, today: datetime) -> list[ChainReport]:
    """Each writer's day chain of every UTC day from ``since`` to ``today``."""
    reports = []
    day = since.astimezone(UTC).date()
    while day <= today.astimezone(UTC).date():
        name_of_day = day.strftime("%Y%m%d")
        chains = grouped(read_entries([f"AUDIT_DAY={name_of_day}"], against), against is not None)
        for name, directory in CHAIN_DIRS.items():
            head = _read_head(day_head_path(directory, name_of_day))
            if name not in chains.names() and head is None:
                continue
            of = f"day-{name_of_day}"
            key = _read_key(directory, head, against)
            reports.append(_report(chains, name, of, ("DAY_SEQ", "DAY_PREV"), head, key))
        day += timedelta(days=1)
    return reports
