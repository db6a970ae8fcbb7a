"""How a writer chains its entries and keeps its heads (shared_io.audit_chain): which
process writes which chain, the hash any verifier can recompute, the mark of the writer's
own key on each link, head files only the writer's group can read and never followed
through a symlink, and a head that cannot be read back that neither stops the writer
logging nor misleads the verifier."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared_io import audit_chain
from shared_io.audit_chain import (
    EXECUTOR_CHAIN_DIR,
    GENESIS,
    KEY_FILE,
    MAC_FIELD,
    ROOT_CHAIN_DIR,
    Chain,
    Head,
    day_head_path,
    entry_hash,
    plan_head_path,
    read_head,
    read_key,
    writer_chain,
)
from shared_io.log import journal_fields
from tests.unit.audit.test_audit_chain import EVENTS, PLAN, problems, written

AT = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)


def accepted() -> dict[str, str]:
    """``plan.accepted`` about PLAN, as the executor's apply sends it."""
    return journal_fields({"event": "plan.accepted", "plan_id": PLAN}, "opsbot-apply")


def test_an_entrys_hash_is_the_sha256_of_its_signed_fields_as_compact_sorted_json() -> None:
    """``AUDIT_HASH`` is the sha256 of the writer's fields (not journald's ``_*``, not
    ``CODE_*``, not the hash) as JSON with sorted keys and no spaces: a verifier of
    another version, or a script, recomputes it from the fields whatever order they come
    in."""
    fields = {
        "PLAN_ID": PLAN,
        "EVENT": "plan.accepted",
        "CHAIN": "executor",
        "_UID": "997",
        "__REALTIME_TIMESTAMP": "1796277600000000",
        "CODE_LINE": "12",
        "AUDIT_HASH": GENESIS,
    }
    canonical = b'{"CHAIN":"executor","EVENT":"plan.accepted","PLAN_ID":"' + PLAN.encode() + b'"}'
    assert entry_hash(fields) == hashlib.sha256(canonical).hexdigest()


def test_a_trail_read_back_with_its_fields_in_another_order_is_intact(tmp_path: Path) -> None:
    """journalctl prints an entry's fields in journald's order, not the order the writer
    sent them: the trail read back with every entry's fields reversed is still intact."""
    entries = [dict(reversed(entry.items())) for entry in written(tmp_path)]
    assert problems(tmp_path, entries) == []


def test_a_writer_without_a_head_or_with_an_empty_one_is_at_the_genesis(tmp_path: Path) -> None:
    """No head file yet, or one left empty (created, then the entry never sent): the
    writer's head is the genesis, number 0."""
    assert read_head(tmp_path / "none") == Head(0, GENESIS)
    (tmp_path / "empty").write_text("")
    assert read_head(tmp_path / "empty") == Head(0, GENESIS)


def test_roots_processes_write_roots_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any process running as root (the approver, root's console) chains into root's
    chain, kept in /var/lib/opsbot-approvals/audit, whatever it calls itself."""
    monkeypatch.setattr(audit_chain.os, "geteuid", lambda: 0)
    for identifier in ("opsbot", "opsbot-approver", "opsbot-apply"):
        chain = writer_chain(identifier)
        assert chain is not None
        assert (chain.name, chain.directory) == ("root", ROOT_CHAIN_DIR)


def test_the_executors_daemon_and_apply_write_the_executors_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """opsbot-executor and opsbot-apply, as the executor's user, chain into the
    executor's chain, kept in /var/lib/opsbot/audit."""
    monkeypatch.setattr(audit_chain.os, "geteuid", lambda: 997)
    for identifier in ("opsbot-executor", "opsbot-apply"):
        chain = writer_chain(identifier)
        assert chain is not None
        assert (chain.name, chain.directory) == ("executor", EXECUTOR_CHAIN_DIR)


def test_other_units_write_no_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The diagnose service, the web door or an operator's console are no chain's writer:
    their entries are not chained."""
    monkeypatch.setattr(audit_chain.os, "geteuid", lambda: 998)
    for identifier in ("opsbot-diagnose", "opsbot-web", "opsbot"):
        assert writer_chain(identifier) is None


def test_a_writers_heads_are_readable_by_its_group_only(tmp_path: Path) -> None:
    """The plan's and the day's head files a writer creates are mode 0640: the writer
    writes them, its group reads them, no one else."""
    umask = os.umask(0o022)
    try:
        with Chain("executor", tmp_path).link(accepted(), now=AT):
            pass
    finally:
        os.umask(umask)
    for head in (plan_head_path(tmp_path, PLAN), day_head_path(tmp_path, "20261203")):
        assert stat.S_IMODE(head.stat().st_mode) == 0o640, head


def test_a_head_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    """A plan's head replaced by a symlink to another file: the writer does not write
    through it (the file stays as it was) and leaves the entry unchained."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not a head\n")
    chain_dir = tmp_path / "audit"
    chain_dir.mkdir()
    plan_head_path(chain_dir, PLAN).symlink_to(elsewhere)
    fields = accepted()
    with Chain("executor", chain_dir).link(fields, now=AT):
        pass
    assert elsewhere.read_text() == "not a head\n"
    assert "CHAIN" not in fields and "AUDIT_HASH" not in fields


def test_a_garbled_head_does_not_stop_the_writer_logging(tmp_path: Path) -> None:
    """A plan's head garbled into bytes that are no head (not ASCII, no number): the
    entry is still sent and chained, from #1 and the genesis, and the head is its own."""
    plan_head_path(tmp_path, PLAN).write_bytes(b"\xff " + b"a" * 64)
    fields = accepted()
    with Chain("executor", tmp_path).link(fields, now=AT):
        pass
    assert (fields["CHAIN_SEQ"], fields["CHAIN_PREV"]) == ("1", GENESIS)
    assert read_head(plan_head_path(tmp_path, PLAN)) == Head(1, fields["AUDIT_HASH"])


def test_a_head_longer_than_the_next_is_cut_to_it(tmp_path: Path) -> None:
    """A head only grows, so it is rewritten in place without cutting the file; one that
    held more than the next head (garbage, or a head with a longer number put there by
    hand) is cut, so that the file holds the new head and nothing after it."""
    for garbage in (b"x" * 150, b"12345678 " + b"b" * 64 + b"\n" + b"y" * 300):
        chain_dir = tmp_path / f"audit-{len(garbage)}"
        chain_dir.mkdir()
        plan_head_path(chain_dir, PLAN).write_bytes(garbage)
        fields = accepted()
        with Chain("executor", chain_dir).link(fields, now=AT):
            pass
        head = plan_head_path(chain_dir, PLAN).read_bytes()
        assert head == f"{fields['CHAIN_SEQ']} {fields['AUDIT_HASH']}\n".encode()


def test_a_head_with_a_number_as_long_as_the_file_read_is_cut_to_the_next(
    tmp_path: Path,
) -> None:
    """A head put there by hand with a 134-digit number, its hash ending the 200 bytes
    the writer reads, and more after: the next head is one byte longer than what was
    read, yet the file held more than that; it is cut, so the verifier reads the new head
    and not the old tail after it."""
    garbage = b"9" * 134 + b" " + b"c" * 64 + b"\n" + b"z" * 100
    plan_head_path(tmp_path, PLAN).write_bytes(garbage)
    fields = accepted()
    with Chain("executor", tmp_path).link(fields, now=AT):
        pass
    assert fields["CHAIN_SEQ"] == str(10**134) and fields["CHAIN_PREV"] == "c" * 64
    head = plan_head_path(tmp_path, PLAN).read_bytes()
    assert head == f"{fields['CHAIN_SEQ']} {fields['AUDIT_HASH']}\n".encode()
    assert read_head(plan_head_path(tmp_path, PLAN)) == Head(10**134, fields["AUDIT_HASH"])


def test_a_writer_makes_its_key_once_for_itself_and_marks_each_link(tmp_path: Path) -> None:
    """The first link makes the writer's key: 64 hex digits, mode 0600. Each link carries
    the HMAC-SHA256 of its hash under it; another process of the writer uses the same
    key."""
    first, second = Chain("executor", tmp_path), Chain("executor", tmp_path)
    entries = []
    for n, chain in enumerate((first, second)):
        fields = {"EVENT": EVENTS[n], "PLAN_ID": PLAN}
        with chain.link(fields, now=AT):
            pass
        entries.append(fields)
    path = tmp_path / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = bytes.fromhex(path.read_text().strip())
    assert len(secret) == 32 and read_key(tmp_path).secret == secret
    for fields in entries:
        mark = hmac.new(secret, fields["AUDIT_HASH"].encode(), hashlib.sha256).hexdigest()
        assert fields[MAC_FIELD] == mark
        assert entry_hash(fields) == fields["AUDIT_HASH"]  # the mark is not hashed
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".key-")] == []


def _open_on(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == os.path.realpath(path))


def test_threads_of_one_writer_take_turns_at_the_days_head_not_at_their_plans(
    tmp_path: Path,
) -> None:
    """Two threads of the executor chain an entry each, about two plans, at once (a burst
    of submits): the second makes and locks its own plan's head meanwhile (entries about
    different plans do not wait for each other there), then waits its turn before it
    opens the day's, so that a burst's threads wait on the process's own lock rather than
    in the kernel on the day's head, each with it open; it links after the first, as the
    day's head orders them."""
    chain = Chain("executor", tmp_path / "audit")
    other = "20261203-060001-0a1b2c3d"
    first = journal_fields({"event": "plan.accepted", "plan_id": PLAN}, "opsbot-executor")
    second = journal_fields({"event": "plan.accepted", "plan_id": other}, "opsbot-executor")
    entered = threading.Event()
    done = threading.Event()

    def later() -> None:
        entered.wait(5)
        with chain.link(second, now=AT):
            pass
        done.set()

    thread = threading.Thread(target=later)
    thread.start()
    with chain.link(first, now=AT):
        entered.set()
        assert not done.wait(0.3)  # the second waits for the first to be sent
        assert plan_head_path(tmp_path / "audit", other).exists()
        assert _open_on(day_head_path(tmp_path / "audit", "20261203")) == 1
    thread.join(5)
    assert done.is_set()
    assert (first["DAY_SEQ"], second["DAY_SEQ"]) == ("1", "2")
    assert second["DAY_PREV"] == first[audit_chain.HASH_FIELD]
