"""A writer's key and the directory it keeps its chains in (shared_io.audit_chain): a key
file that is a symlink or not ASCII is no key (the writer leaves its entries unchained
rather than marking them with it, or stopping), the key's time is counted as journald
counts an entry's, and the directory the writer makes, first or again after it went away,
is closed to others."""

from __future__ import annotations

import os
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared_io.audit_chain import KEY_FILE, MAC_FIELD, Chain, plan_head_path, read_key
from shared_io.log import journal_fields
from tests.unit.audit.test_audit_chain import PLAN

AT = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
#: A key an intruder knows (it is in a file of their own).
KNOWN = "ab" * 32


def accepted() -> dict[str, str]:
    """``plan.accepted`` about PLAN, as the executor's apply sends it."""
    return journal_fields({"event": "plan.accepted", "plan_id": PLAN}, "opsbot-apply")


def test_a_key_that_is_a_symlink_is_neither_marked_with_nor_checked_against(
    tmp_path: Path,
) -> None:
    """The writer's key replaced by a symlink to a file of 64 hex digits someone else
    knows: the verifier does not read it (OSError), and the writer marks no link with it
    (the entry is sent, unchained), so no one who knows that file can mark a link."""
    elsewhere = tmp_path / "known"
    elsewhere.write_text(f"{KNOWN}\n")
    chain_dir = tmp_path / "audit"
    chain_dir.mkdir()
    (chain_dir / KEY_FILE).symlink_to(elsewhere)
    with pytest.raises(OSError):
        read_key(chain_dir)
    fields = accepted()
    with Chain("executor", chain_dir).link(fields, now=AT):
        pass
    assert MAC_FIELD not in fields and "CHAIN" not in fields


def test_a_key_garbled_into_bytes_that_are_not_ascii_is_no_key_and_logging_goes_on(
    tmp_path: Path,
) -> None:
    """A key file garbled into bytes that are not ASCII: it is "not a key" (the OSError
    the verifier and the writer expect, not a decoding error), and the writer still sends
    its entry, unchained."""
    chain_dir = tmp_path / "audit"
    chain_dir.mkdir()
    (chain_dir / KEY_FILE).write_bytes(b"\xff" * 64 + b"\n")
    with pytest.raises(OSError, match="not a key"):
        read_key(chain_dir)
    fields = accepted()
    with Chain("executor", chain_dir).link(fields, now=AT):
        pass
    assert MAC_FIELD not in fields and "CHAIN" not in fields


def test_the_keys_time_is_counted_in_whole_microseconds_as_journald_counts_an_entrys(
    tmp_path: Path,
) -> None:
    """The verifier holds every entry journald stamped from the key's time on to carry a
    mark. That time is the key file's, cut down to the whole microsecond, as journald
    stamps an entry: an entry sent in the microsecond the key was made is one of them."""
    (tmp_path / KEY_FILE).write_text(f"{KNOWN}\n")
    os.utime(tmp_path / KEY_FILE, ns=(1_796_277_600_123_456_789, 1_796_277_600_123_456_789))
    assert read_key(tmp_path).since_us == 1_796_277_600_123_456


def test_the_chain_directory_a_writer_makes_is_closed_to_others(tmp_path: Path) -> None:
    """A writer whose chain directory does not exist yet makes it at its first entry,
    mode 0750 (its group reads the heads; others do not even see which plans have one),
    whatever the process's umask would have given."""
    chain_dir = tmp_path / "audit"
    umask = os.umask(0o022)
    try:
        with Chain("executor", chain_dir).link(accepted(), now=AT):
            pass
    finally:
        os.umask(umask)
    assert stat.S_IMODE(chain_dir.stat().st_mode) == 0o750


def test_a_chain_directory_removed_while_the_writer_runs_is_made_again_closed(
    tmp_path: Path,
) -> None:
    """The chain directory removed while the executor runs (its key already read): its
    next entry makes the directory again, mode 0750, and is chained (from #1: the heads
    went with the directory, which the verifier names from the journal)."""
    chain_dir = tmp_path / "audit"
    chain = Chain("executor", chain_dir)
    with chain.link(accepted(), now=AT):
        pass
    shutil.rmtree(chain_dir)
    fields = accepted()
    umask = os.umask(0o022)
    try:
        with chain.link(fields, now=AT):
            pass
    finally:
        os.umask(umask)
    assert stat.S_IMODE(chain_dir.stat().st_mode) == 0o750
    assert fields["CHAIN_SEQ"] == "1" and plan_head_path(chain_dir, PLAN).exists()
