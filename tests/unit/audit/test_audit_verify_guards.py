"""``opsbot audit --verify`` as an operator runs it: the journal read through journalctl
(scripted here, printing what journalctl prints and refusing what it refuses), each
writer's chain of a plan or of the days since ``--since``, the heads and keys on this
host or a collector's copy of another host's journal. Every entry deleted, edited or made
up is named (a link a reader made up, past its writer's head and without its key's
mark); an entry a writer did not send is listed apart and never fails a chain; the JSON a
script reads says all of it."""

from __future__ import annotations

import json
import os
import pwd
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli import audit_verify
from opsbot_cli.audit_verify import verify_days, verify_plan
from opsbot_cli.errors import ConsoleError
from shared_io.audit_chain import GENESIS, KEY_FILE, MAC_FIELD, Chain, entry_hash, plan_head_path
from shared_io.log import journal_fields
from shared_io.run import OUTPUT_LIMIT as RUN_OUTPUT_LIMIT, RunResult, cut
from tests.unit.audit.test_audit_chain import EVENTS, PLAN, problems, written

#: An entry as the journal holds it: a field's value is text, bytes, or several values.
Entry = dict[str, Any]

AT = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
#: Who sends each writer's entries on this host: identifier, uid, unit.
WRITERS = {
    "executor": ("opsbot-apply", "997", "opsbot-apply.service"),
    "root": ("opsbot-approver", "0", "opsbot-approver.service"),
}


def micros(at: datetime) -> str:
    return str(int(at.timestamp()) * 1_000_000)


def printed(value: str | bytes | list[Any]) -> Any:
    """A field's value as ``journalctl -o json`` prints it: text when it is printable
    UTF-8 (tab and newline allowed), else its bytes as numbers; a field an entry has more
    than once, all its values."""
    if isinstance(value, list):
        return [printed(v) for v in value]
    data = value.encode() if isinstance(value, str) else value
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)
    if any((c < " " and c not in "\t\n") or "\x7f" <= c <= "\x9f" for c in text):
        return list(data)
    return text


@dataclass
class Journalctl:
    """journalctl as ``--verify`` runs it through shared_io.run: the entries of the local
    journal, or of a collector's ``--directory``, that the matches select, one JSON
    object a line, oldest first; an option it does not know refused with its words; the
    output cut to ``output_limit`` as run() cuts it; ``hangs`` until the timeout."""

    journal: list[Entry] = field(default_factory=list)
    directories: dict[str, list[Entry]] = field(default_factory=dict)
    hangs: bool = False

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        output_limit: int = RUN_OUTPUT_LIMIT,
        merge_stderr: bool = False,
    ) -> RunResult:
        args = tuple(argv)
        if args[0] != "journalctl":
            return RunResult(args, None, "", "", 0.0, error=f"cannot run {args[0]}: not found")
        if self.hangs:
            assert timeout is not None, "journalctl hangs: the verify would wait for ever"
            return RunResult(
                args, None, "", "", timeout, timed_out=True, error=f"timed out after {timeout:g}s"
            )
        entries, rest = self.journal, list(args[1:])
        matches: dict[str, set[str]] = {}
        while rest:
            arg = rest.pop(0)
            if arg in ("--no-pager", "--all"):
                continue
            if arg in ("-o", "--directory") and not rest:
                return refused(args, f"journalctl: option '{arg}' requires an argument")
            if arg == "-o":
                output = rest.pop(0)
                if output != "json":
                    return refused(args, f"Unknown output format '{output}'.")
            elif arg == "--directory":
                directory = rest.pop(0)
                if directory not in self.directories:
                    return refused(args, f"Failed to open {directory}: No such file or directory")
                entries = self.directories[directory]
            elif arg.startswith("-"):
                return refused(args, f"journalctl: unrecognized option '{arg}'")
            elif "=" in arg:
                name, _, value = arg.partition("=")
                matches.setdefault(name, set()).add(value)
            else:
                return refused(args, f"Failed to add match '{arg}': Invalid argument")
        shown = [e for e in entries if all(e.get(k) in v for k, v in matches.items())]
        # As journalctl prints it: UTF-8 text raw, not escaped.
        stdout = "".join(
            json.dumps({k: printed(v) for k, v in e.items()}, ensure_ascii=False) + "\n"
            for e in shown
        )
        stdout, truncated = cut(stdout, output_limit)
        return RunResult(args, 0, stdout, "", 0.01, truncated=truncated)


def refused(args: tuple[str, ...], said: str) -> RunResult:
    return RunResult(args, 1, "", said + "\n", 0.01)


@dataclass
class Host:
    """This host as ``--verify`` sees it: the executor's and root's chains (their heads
    under tmp_path) and the journal journalctl prints."""

    executor: Chain
    root: Chain
    journalctl: Journalctl

    def sent(
        self,
        chain: Chain,
        event: str,
        at: datetime,
        *,
        uid: str | None = None,
        plan: str = PLAN,
        **more: object,
    ) -> Entry:
        """``event`` about ``plan`` as ``chain``'s writer sends it at ``at`` (as ``uid``,
        on another host), with the fields journald adds."""
        identifier, own_uid, unit = WRITERS[chain.name]
        entry: Entry = journal_fields({"event": event, "plan_id": plan, **more}, identifier)
        with chain.link(entry, now=at):
            pass
        entry.update(
            {
                "_UID": uid or own_uid,
                "_SYSTEMD_UNIT": unit,
                "__REALTIME_TIMESTAMP": micros(at),
                "CODE_LINE": "12",
            }
        )
        return entry

    def log(self, chain: Chain, event: str, at: datetime, **more: object) -> Entry:
        """``event`` sent by ``chain``'s writer on this host, kept in its journal."""
        entry = self.sent(chain, event, at, **more)
        self.journalctl.journal.append(entry)
        return entry


def forged(
    at: datetime, uid: str, unit: str | None, event: str = "plan.verified", **links: str
) -> Entry:
    """An entry about PLAN another process logs with ``links`` (CHAIN, CHAIN_SEQ, ...) and
    a right hash of its own fields, sent as ``uid`` from ``unit`` (None: no unit)."""
    entry: Entry = journal_fields({"event": event, "plan_id": PLAN}, "opsbot-verify")
    entry.update(links)
    entry["AUDIT_HASH"] = entry_hash(entry)
    entry.update({"_UID": uid, "__REALTIME_TIMESTAMP": micros(at)})
    if unit is not None:
        entry["_SYSTEMD_UNIT"] = unit
    return entry


def chain_json(name: str, of: str, entries: int, head: int | None, **said: Any) -> dict[str, Any]:
    """A chain as ``--verify --json`` prints it, intact unless ``problems`` says not, its
    links' key marks checked unless ``keyed`` says not."""
    problems = said.get("problems", [])
    return {
        "chain": name,
        "of": of,
        "entries": entries,
        "head": head,
        "keyed": said.get("keyed", True),
        "intact": not problems,
        "problems": problems,
        "not_from_its_writer": said.get("not_from_its_writer", []),
    }


def verified(against: Path | None = None) -> list[dict[str, Any]]:
    return [report.as_json() for report in verify_plan(PLAN, against)]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    """This host: opsbot-executor is uid 997 in its user database; the writers' heads are
    under tmp_path; journalctl is scripted."""
    real_getpwnam = pwd.getpwnam

    def getpwnam(name: str) -> pwd.struct_passwd:
        if name == "opsbot-executor":
            user = ("opsbot-executor", "x", 997, 997, "", "/var/lib/opsbot", "/usr/sbin/nologin")
            return pwd.struct_passwd(user)
        return real_getpwnam(name)

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    directories = {"executor": tmp_path / "executor", "root": tmp_path / "root"}
    monkeypatch.setattr(audit_verify, "CHAIN_DIRS", directories)
    journalctl = Journalctl()
    monkeypatch.setattr(audit_verify, "run_program", journalctl)
    return Host(
        Chain("executor", directories["executor"]), Chain("root", directories["root"]), journalctl
    )


@pytest.fixture
def new_york() -> Iterator[None]:
    """This host's clock in New York's winter time, UTC-5 (a POSIX TZ: no tz database)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "EST5")
        time.tzset()
        yield
    time.tzset()


def minutes(n: int) -> datetime:
    return AT + timedelta(minutes=n)


# --- the journal, read through journalctl ----------------------------------------------


def test_a_trail_longer_than_a_programs_usual_output_is_read_whole(host: Host) -> None:
    """Twelve entries make more than the 2000 characters run() keeps of a program by
    default: journalctl's output is read whole, and the trail is intact up to its head."""
    for n in range(12):
        host.log(host.executor, EVENTS[n % 5], minutes(n))
    assert sum(len(json.dumps(e)) for e in host.journalctl.journal) > RUN_OUTPUT_LIMIT
    assert verified() == [chain_json("executor", PLAN, 12, 12)]


def test_a_chains_json_says_each_thing_a_script_reads(host: Host) -> None:
    """``--verify --json``: each chain's writer, what it is the chain of, its entries,
    its head, whether it is intact, its problems and the entries not from its writer."""
    for n in range(3):
        host.log(host.executor, EVENTS[n], minutes(n))
    del host.journalctl.journal[1]
    assert verified() == [
        {
            "chain": "executor",
            "of": PLAN,
            "entries": 2,
            "head": 3,
            "keyed": True,
            "intact": False,
            "problems": ["missing: #2, after #1 (plan.accepted at 2026-12-03 06:00:00 UTC)"],
            "not_from_its_writer": [],
        }
    ]


def test_against_reads_the_collectors_copy_and_believes_the_sending_hosts_executor(
    host: Host, tmp_path: Path
) -> None:
    """``--against DIR`` on a collector: the entries are those of the journal files under
    DIR, not this host's; the executor there runs as another uid than here, and its
    entries are believed; this host keeps no head of that plan, so the chain is another
    host's, checked without a head or a key (``keyed`` false)."""
    other_host = Chain("executor", tmp_path / "other-host")
    collector = tmp_path / "remote"
    host.journalctl.directories[str(collector)] = [
        host.sent(other_host, EVENTS[n], minutes(n), uid="4242") for n in range(3)
    ]
    assert verified(collector) == [chain_json("executor", PLAN, 3, None, keyed=False)]


def test_a_journal_journalctl_cannot_read_is_said_with_journalctls_words(
    host: Host, tmp_path: Path
) -> None:
    """journalctl fails and prints nothing: the verify stops, saying journalctl's last
    line, and which rights reading the journal needs."""
    gone = tmp_path / "remote"
    with pytest.raises(ConsoleError) as said:
        verify_plan(PLAN, gone)
    assert said.value.message == (
        f"journalctl could not read the journal: Failed to open {gone}: No such file or directory"
    )
    assert said.value.hint == "reading the journal needs root or group systemd-journal"


def test_a_journalctl_that_hangs_is_given_up(host: Host) -> None:
    """journalctl hangs on a journal file on a stalled disk: the verify does not wait for ever; it
    stops at its timeout and says so."""
    host.journalctl.hangs = True
    with pytest.raises(ConsoleError) as said:
        verify_plan(PLAN, None)
    assert said.value.message == "journalctl could not read the journal: timed out after 120s"


def test_a_plan_whose_only_entry_was_never_sent_has_no_chain(host: Host) -> None:
    """The first entry about a plan raised in its send: the heads were created, empty,
    and the journal has nothing chained. There is no chain to verify, and nothing is
    missing."""
    accepted = journal_fields({"event": "plan.accepted", "plan_id": PLAN}, "opsbot-apply")
    with pytest.raises(ConnectionRefusedError), host.executor.link(accepted, now=AT):
        raise ConnectionRefusedError("journald away")
    assert plan_head_path(host.executor.directory, PLAN).read_text() == ""
    assert verified() == []


def test_a_field_journalctl_prints_as_bytes_is_read_as_the_writers_text(host: Host) -> None:
    """A step's output with terminal colours (control characters) is printed by
    journalctl as numbers, not text: read back as the text the writer signed, the trail
    is intact."""
    host.log(host.executor, "plan.accepted", minutes(0))
    host.log(host.executor, "step.finished", minutes(1), output="\x1b[31mfailed\x1b[0m")
    assert isinstance(printed(host.journalctl.journal[-1]["OUTPUT"]), list)
    assert verified() == [chain_json("executor", PLAN, 2, 2)]


def test_a_line_separator_in_a_field_neither_drops_its_entry_nor_stops_the_read(
    host: Host,
) -> None:
    """journalctl prints U+2028 and U+2029 raw. A step's output holding one, and a
    stranger's entry about the plan holding one before it: the writer's entries are all
    read, and the chain is intact."""
    host.log(host.executor, "plan.accepted", minutes(0))
    host.journalctl.journal.append(
        forged(minutes(1), "1000", "session-4.scope", MESSAGE="hello\u2028world")
    )
    host.log(host.executor, "step.finished", minutes(2), output="line one\u2029line two")
    host.log(host.executor, "plan.applied", minutes(3))
    assert verified() == [chain_json("executor", PLAN, 3, 3)]


def test_a_local_users_fields_that_are_not_text_cannot_fail_the_verify(host: Host) -> None:
    """A local user logs under the executor's chain a message that is not UTF-8 and a
    field given twice: the verify reads past them, lists the entry apart, and the chain
    is intact."""
    first = host.log(host.executor, "plan.accepted", minutes(0))
    links = {"CHAIN": "executor", "CHAIN_SEQ": "2", "CHAIN_PREV": first["AUDIT_HASH"]}
    odd = forged(minutes(5), "1000", "session-4.scope", **links)
    odd.update(MESSAGE=b"plan.verified \xff\xfe", REASON=["a", "b"])
    host.journalctl.journal.append(odd)
    not_believed = (
        "#2 (plan.verified at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 1000 "
        "wrote it in session-4.scope: not believed"
    )
    assert verified() == [chain_json("executor", PLAN, 1, 1, not_from_its_writer=[not_believed])]


# --- whose entries are believed --------------------------------------------------------


def test_roots_own_entries_are_believed(host: Host) -> None:
    """Root's approver (uid 0) chains its approval of the plan: root's chain is intact
    beside the executor's."""
    host.log(host.executor, "plan.accepted", minutes(0))
    host.log(host.root, "approval.cli", minutes(1))
    host.log(host.executor, "approval.consumed", minutes(2))
    assert verified() == [chain_json("executor", PLAN, 2, 2), chain_json("root", PLAN, 1, 1)]


def test_a_link_forged_under_roots_chain_by_another_uid_is_listed_apart(host: Host) -> None:
    """A local user logs an ``approval.cli`` #1 under root's chain, hash and link right:
    root's chain of the plan has no entry and no head, no problem, and the forgery is
    listed apart."""
    for n in range(3):
        host.log(host.executor, EVENTS[n], minutes(n))
    links = {"CHAIN": "root", "CHAIN_SEQ": "1", "CHAIN_PREV": GENESIS}
    host.journalctl.journal.append(
        forged(minutes(5), "1000", "session-4.scope", "approval.cli", **links)
    )
    not_believed = (
        "#1 (approval.cli at 2026-12-03 06:05:00 UTC) names the root's chain but uid 1000 "
        "wrote it in session-4.scope: not believed"
    )
    assert verified() == [
        chain_json("executor", PLAN, 3, 3),
        chain_json("root", PLAN, 0, None, keyed=False, not_from_its_writer=[not_believed]),
    ]


def test_the_executors_uid_outside_opsbots_units_is_not_believed(host: Host) -> None:
    """A cron job running as opsbot-executor logs the next link of its chain: journald
    says it came from cron.service, not one of opsbot's units, so it is not believed."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    links = {"CHAIN": "executor", "CHAIN_SEQ": "4", "CHAIN_PREV": entries[-1]["AUDIT_HASH"]}
    host.journalctl.journal.append(forged(minutes(5), "997", "cron.service", **links))
    not_believed = (
        "#4 (plan.verified at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 997 "
        "wrote it in cron.service: not believed"
    )
    assert verified() == [chain_json("executor", PLAN, 3, 3, not_from_its_writer=[not_believed])]


def test_a_forgery_from_outside_any_unit_is_listed_by_its_number_in_the_plans_chain(
    host: Host,
) -> None:
    """A link forged by a process in no unit, numbered #4 in the plan's chain and #9 in
    the day's: listed apart as #4, the plan's number, from no unit."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    links = {"CHAIN": "executor", "CHAIN_SEQ": "4", "DAY_SEQ": "9"}
    links["CHAIN_PREV"] = entries[-1]["AUDIT_HASH"]
    host.journalctl.journal.append(forged(minutes(5), "1000", None, **links))
    not_believed = (
        "#4 (plan.verified at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 1000 "
        "wrote it in no unit: not believed"
    )
    assert verified() == [chain_json("executor", PLAN, 3, 3, not_from_its_writer=[not_believed])]


def test_a_forgery_that_says_neither_its_number_nor_its_event_is_still_listed(
    host: Host,
) -> None:
    """An entry that names the executor's chain and carries a hash, but no number and no
    event: listed apart all the same, with ``?`` for what it does not say."""
    host.log(host.executor, "plan.accepted", minutes(0))
    bare: Entry = {"MESSAGE": "hello", "PLAN_ID": PLAN, "CHAIN": "executor"}
    bare["AUDIT_HASH"] = entry_hash(bare)
    bare.update(
        {
            "_UID": "1000",
            "_SYSTEMD_UNIT": "session-4.scope",
            "__REALTIME_TIMESTAMP": micros(minutes(5)),
        }
    )
    host.journalctl.journal.append(bare)
    not_believed = (
        "#? (? at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 1000 "
        "wrote it in session-4.scope: not believed"
    )
    assert verified() == [chain_json("executor", PLAN, 1, 1, not_from_its_writer=[not_believed])]


# --- entries deleted, edited, made up --------------------------------------------------


def test_the_first_entry_deleted_is_named_before_the_second(tmp_path: Path) -> None:
    """Entry #1 deleted: no entry before it to name, so it is named before #2."""
    entries = written(tmp_path)
    del entries[0]
    assert problems(tmp_path, entries) == [
        "missing: #1, before #2 (approval.consumed at 2026-12-03 00:00:01 UTC)"
    ]


def test_two_entries_deleted_together_are_named_by_the_entries_around_them(
    tmp_path: Path,
) -> None:
    """#3 and #4 deleted: #3 is named after #2, and #4, whose predecessor is gone too,
    before #5: each by the nearest entry still there, with its event and time."""
    entries = written(tmp_path)
    del entries[2:4]
    assert problems(tmp_path, entries) == [
        "missing: #3, after #2 (approval.consumed at 2026-12-03 00:00:01 UTC)",
        "missing: #4, before #5 (plan.verified at 2026-12-03 00:00:04 UTC)",
    ]


def test_an_entry_whose_number_was_removed_is_named_altered_and_its_number_missing(
    tmp_path: Path,
) -> None:
    """#2's CHAIN_SEQ removed: the entry is named as altered (it has no number), its
    number as missing, and the entries after it are still checked (nothing else)."""
    entries = written(tmp_path)
    del entries[1]["CHAIN_SEQ"]
    assert problems(tmp_path, entries) == [
        "altered: approval.consumed at 2026-12-03 00:00:01 UTC has no CHAIN_SEQ",
        "missing: #2, after #1 (plan.accepted at 2026-12-03 00:00:00 UTC)",
    ]


def test_every_entry_of_a_chain_deleted_is_named_from_the_writers_head(host: Host) -> None:
    """The executor's three entries about the plan all deleted: the journal has nothing
    of its chain, but its head still counts three, each named missing."""
    for n in range(3):
        host.log(host.executor, EVENTS[n], minutes(n))
    host.journalctl.journal.clear()
    counted = [f"missing: #{n}, the writer's head counts it" for n in (1, 2, 3)]
    assert verified() == [chain_json("executor", PLAN, 0, 3, problems=counted)]


def test_the_newest_entry_replaced_by_one_made_up_is_named_from_the_head(tmp_path: Path) -> None:
    """#5 replaced by a made-up #5 that links #4 rightly and hashes its own fields: only
    the writer's head tells it is not the entry it recorded last."""
    entries = written(tmp_path)
    made_up = dict(entries[-1], REASON="made up")
    made_up["AUDIT_HASH"] = entry_hash(made_up)
    entries[-1] = made_up
    assert problems(tmp_path, entries) == [
        "altered: #5 (plan.verified at 2026-12-03 00:00:04 UTC) is not the entry its writer "
        "recorded last"
    ]


def test_a_first_entry_that_does_not_start_from_the_genesis_is_named_unlinked(
    tmp_path: Path,
) -> None:
    """A made-up #1, hash right, that links something other than the genesis: named as
    not following the start of the chain (and #2 as not following it)."""
    entries = written(tmp_path)
    made_up = dict(entries[0], CHAIN_PREV="f" * 64)
    made_up["AUDIT_HASH"] = entry_hash(made_up)
    entries[0] = made_up
    assert problems(tmp_path, entries) == [
        "unlinked: #1 (plan.accepted at 2026-12-03 00:00:00 UTC) does not follow #0",
        "unlinked: #2 (approval.consumed at 2026-12-03 00:00:01 UTC) does not follow #1",
    ]


def test_other_units_entries_about_the_plan_between_the_links_are_passed_over(
    host: Host,
) -> None:
    """The diagnose service logs about the plan between the executor's entries, unchained:
    the executor's chain is all its three entries, intact."""
    for n in range(3):
        host.log(host.executor, EVENTS[n], minutes(n))
        aside = journal_fields({"event": "diagnose.step", "plan_id": PLAN}, "opsbot-diagnose")
        aside.update({"_UID": "998", "_SYSTEMD_UNIT": "opsbot-diagnose.service"})
        host.journalctl.journal.append(aside)
    assert verified() == [chain_json("executor", PLAN, 3, 3)]


def test_times_are_said_in_utc_whatever_the_hosts_zone(tmp_path: Path, new_york: None) -> None:
    """On a host in New York, an entry's time is still said in UTC, as its label says."""
    entries = written(tmp_path)
    del entries[2]
    assert problems(tmp_path, entries)[0] == (
        "missing: #3, after #2 (approval.consumed at 2026-12-03 00:00:01 UTC)"
    )


def test_roots_chain_is_checked_when_the_executor_wrote_nothing(host: Host) -> None:
    """Root's console refused the plan twice and the executor never logged about it: the
    verify checks root's chain all the same."""
    host.log(host.root, "approval.refused", minutes(0))
    host.log(host.root, "approval.refused", minutes(1))
    assert verified() == [chain_json("root", PLAN, 2, 2)]


# --- --since: the day chains -----------------------------------------------------------

SINCE = datetime(2026, 12, 2, tzinfo=UTC)
TODAY = datetime(2026, 12, 3, 1, 0, tzinfo=UTC)


def three_days(host: Host) -> None:
    """The executor on Dec 1 (another plan) and Dec 2; only root on Dec 3, at 00:30."""
    host.log(
        host.executor,
        "plan.accepted",
        datetime(2026, 12, 1, 23, tzinfo=UTC),
        plan="20261201-230000-0123abcd",
    )
    host.log(host.executor, "plan.accepted", datetime(2026, 12, 2, 6, tzinfo=UTC))
    host.log(host.executor, "approval.consumed", datetime(2026, 12, 2, 6, 1, tzinfo=UTC))
    host.log(host.root, "approval.cli", datetime(2026, 12, 3, 0, 30, tzinfo=UTC))


def days_json(
    since: datetime, today: datetime, against: Path | None = None
) -> list[dict[str, Any]]:
    return [report.as_json() for report in verify_days(since, against, today)]


def test_since_checks_each_writers_day_chain_from_that_day_to_today(host: Host) -> None:
    """``--since 2026-12-02`` on Dec 3: the executor's chain of Dec 2 and root's of Dec 3,
    each to its head; not Dec 1, and no chain of a writer that wrote nothing that day."""
    three_days(host)
    assert days_json(SINCE, TODAY) == [
        chain_json("executor", "day-20261202", 2, 2),
        chain_json("root", "day-20261203", 1, 1),
    ]


def test_since_counts_utc_days_whatever_the_hosts_zone(host: Host, new_york: None) -> None:
    """On a host in New York, where it is still Dec 1 at Dec 2 00:00 UTC and Dec 2 at
    Dec 3 01:00 UTC, the days checked are the same UTC days."""
    three_days(host)
    assert days_json(SINCE, TODAY) == [
        chain_json("executor", "day-20261202", 2, 2),
        chain_json("root", "day-20261203", 1, 1),
    ]


def test_a_link_forged_into_a_day_chain_by_another_opsbot_unit_is_not_believed(
    host: Host,
) -> None:
    """opsbot-verify's user logs the next link of the executor's day chain (#4 there, and
    #2 of some plan's chain): journald says uid 998, not the executor's; the day's report
    lists it apart by its day number, and the day's chain is the executor's three."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    links = {"CHAIN": "executor", "AUDIT_DAY": "20261203", "DAY_SEQ": "4", "CHAIN_SEQ": "2"}
    links["DAY_PREV"] = entries[-1]["AUDIT_HASH"]
    host.journalctl.journal.append(forged(minutes(5), "998", "opsbot-verify.service", **links))
    not_believed = (
        "#4 (plan.verified at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 998 "
        "wrote it in opsbot-verify.service: not believed"
    )
    assert days_json(AT, AT + timedelta(hours=1)) == [
        chain_json("executor", "day-20261203", 3, 3, not_from_its_writer=[not_believed])
    ]


def test_since_against_reads_the_collectors_day_chains(host: Host, tmp_path: Path) -> None:
    """``--since`` with ``--against DIR``: the day's entries of the collector's copy, the
    sending host's executor believed, though this host keeps no head of its days."""
    other_host = Chain("executor", tmp_path / "other-host")
    collector = tmp_path / "remote"
    host.journalctl.directories[str(collector)] = [
        host.sent(other_host, EVENTS[n], minutes(n), uid="4242") for n in range(3)
    ]
    assert days_json(AT, AT + timedelta(hours=1), collector) == [
        chain_json("executor", "day-20261203", 3, None, keyed=False)
    ]


def test_a_strangers_entry_naming_a_chain_without_a_hash_is_no_link_at_all(host: Host) -> None:
    """A process logs CHAIN=executor and a number but no chain hash: it makes no link and
    forges none; it is neither in the executor's chain nor listed apart."""
    [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    hashless = forged(minutes(5), "1000", "opsbot-verify.service", CHAIN="executor", CHAIN_SEQ="4")
    del hashless["AUDIT_HASH"]
    host.journalctl.journal.append(hashless)
    assert verified() == [chain_json("executor", PLAN, 3, 3)]


# --- a reader's next link: the head and the key ----------------------------------------


def next_link(last: Entry, uid: str, unit: str, **more: str) -> Entry:
    """The link after ``last`` as a reader of the journal makes it: number, link and hash
    right, sent as ``uid`` from ``unit``."""
    seq = str(int(last["CHAIN_SEQ"]) + 1)
    links = {"CHAIN": "executor", "CHAIN_SEQ": seq, "CHAIN_PREV": last["AUDIT_HASH"]}
    return forged(minutes(5), uid, unit, "step.finished", **links, **more)


def key_made_before(host: Host, when: int) -> None:
    """The executor's key file dated ``when`` minutes after AT (its entries' clock)."""
    at = (AT + timedelta(minutes=when)).timestamp()
    os.utime(host.executor.directory / KEY_FILE, (at, at))


def test_a_link_made_up_by_a_reader_is_refused_past_the_head_and_unkeyed(host: Host) -> None:
    """Three links by the executor; a fourth made up by someone who read the third, as
    if journald had put it in opsbot-apply.service as the executor's uid (a copy edited
    on its way, a sender that raced its pid): its hash and link are right, but it is
    numbered past the writer's head and carries no mark of its key, or a made-up one."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    key_made_before(host, -1)
    made_up = next_link(entries[-1], "997", "opsbot-apply.service")
    host.journalctl.journal.append(made_up)
    refused = [
        "past the head: #4 (step.finished at 2026-12-03 06:05:00 UTC) is numbered after #3, "
        "the last entry its writer recorded: made up, or its writer was killed between "
        "sending it and keeping its head",
        "unkeyed: #4 (step.finished at 2026-12-03 06:05:00 UTC) does not carry its writer's "
        "key mark (AUDIT_MAC): made up by someone who read the chain",
    ]
    assert verified() == [chain_json("executor", PLAN, 4, 3, problems=refused)]
    made_up[MAC_FIELD] = "0" * 64
    assert verified() == [chain_json("executor", PLAN, 4, 3, problems=refused)]


def test_links_sent_before_the_writer_had_a_key_need_no_mark(host: Host) -> None:
    """A trail an older opsbot wrote, its links unmarked, before the key was made: intact;
    the key marks what was sent after it."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    for entry in entries:
        del entry[MAC_FIELD]
    key_made_before(host, 10)
    assert verified() == [chain_json("executor", PLAN, 3, 3)]
    key_made_before(host, 1)
    said = verified()[0]["problems"]
    assert [p.split(" (")[0] for p in said] == ["unkeyed: #2", "unkeyed: #3"], said


def test_a_copy_of_this_hosts_trail_refuses_the_diagnose_users_next_link(
    host: Host, tmp_path: Path
) -> None:
    """The collector's copy of this host's trail, checked here with ``--against``: the
    diagnose user (in group systemd-journal) read the executor's last link and logged
    the next from its own unit. The copy holds what this host's journald recorded, uid
    998 in opsbot-diagnose.service: not the executor's units, so not believed, listed
    apart; the chain is the executor's three, checked with this host's head and key."""
    entries = [host.log(host.executor, EVENTS[n], minutes(n)) for n in range(3)]
    copy = tmp_path / "copy"
    made_up = next_link(entries[-1], "998", "opsbot-diagnose.service")
    host.journalctl.directories[str(copy)] = [*entries, made_up]
    not_believed = (
        "#4 (step.finished at 2026-12-03 06:05:00 UTC) names the executor's chain but uid 998 "
        "wrote it in opsbot-diagnose.service: not believed"
    )
    assert verified(copy) == [
        chain_json("executor", PLAN, 3, 3, not_from_its_writer=[not_believed])
    ]
    assert audit_verify.trusted_writer(made_up, None) is False
