"""The audit trail against someone who rewrites the journal: a plan's whole story as the
real daemons chain it (approved by root, applied by the executor, verified), then the
journal's own export of it, tampered with as root could (one entry deleted, one edited,
two swapped with their times), written back into journal files by systemd-journal-remote
as a collector would hold them, and checked with `opsbot audit --verify --against`: the
untouched copy and the host's journal are intact, each tampered copy names its entry and
exits 5. In the booted systemd with opsbot installed as README says."""

from __future__ import annotations

import json
import struct
from typing import Any

from testbed.container import BootedSystemd
from testbed.host import wait_state
from tests.attacks.inside import apply_now, approved, cli

WEB = "demo-web.service"
REMOTE = "/lib/systemd/systemd-journal-remote"


def parse_export(data: bytes) -> list[list[tuple[bytes, bytes]]]:
    """journalctl's export format: entries of fields, text ``KEY=value`` lines or binary
    ``KEY``, a little-endian 64-bit size, the value; a blank line after each entry."""
    entries: list[list[tuple[bytes, bytes]]] = []
    fields: list[tuple[bytes, bytes]] = []
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        line = data[at:end]
        if not line:
            entries.append(fields)
            fields = []
            at = end + 1
        elif b"=" in line:
            key, _, value = line.partition(b"=")
            fields.append((key, value))
            at = end + 1
        else:
            (size,) = struct.unpack("<Q", data[end + 1 : end + 9])
            fields.append((line, data[end + 9 : end + 9 + size]))
            at = end + 9 + size + 1
    if fields:
        entries.append(fields)
    return entries


def render_export(entries: list[list[tuple[bytes, bytes]]]) -> bytes:
    out = bytearray()
    for fields in entries:
        for key, value in fields:
            if b"\n" in value:
                out += key + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
            else:
                out += key + b"=" + value + b"\n"
        out += b"\n"
    return bytes(out)


def field(entry: list[tuple[bytes, bytes]], key: bytes) -> bytes | None:
    return next((v for k, v in entry if k == key), None)


def with_field(
    entry: list[tuple[bytes, bytes]], key: bytes, value: bytes
) -> list[tuple[bytes, bytes]]:
    return [(k, value if k == key else v) for k, v in entry]


def verify_against(
    ct: BootedSystemd, plan_id: str, name: str, entries: list[list[tuple[bytes, bytes]]]
) -> tuple[int, dict[str, Any]]:
    """The entries as journal files under /srv/collector/NAME, and the verify of them."""
    where = f"/srv/collector/{name}"
    ct.run(["rm", "-rf", where])
    ct.run(["mkdir", "-p", where])
    export = ct.root / "srv" / "collector" / f"{name}.export"
    export.write_bytes(render_export(entries))
    ct.run(
        ["sh", "-c", f"{REMOTE} -o {where}/remote-host.journal - < /srv/collector/{name}.export"]
    )
    done = cli(ct, "audit", "--verify", plan_id, "--against", where, "--json", check=False)
    return done.returncode, json.loads(done.stdout)


def executor_problems(said: dict[str, Any]) -> list[str]:
    [chain] = [c for c in said["chains"] if c["chain"] == "executor"]
    problems: list[str] = chain["problems"]
    return problems


def test_deleting_editing_or_reordering_the_journal_is_named(opsbot: BootedSystemd) -> None:
    """A plan approved by root, applied and verified: both chains intact on the host and in
    an untouched copy; in a copy with one executor entry deleted, one edited, two swapped
    with their times, verify exits 5 and names that entry first."""
    ct = opsbot
    plan_id = approved(ct, WEB, "audit chain")
    apply_now(ct)
    assert wait_state(ct, plan_id, {"VERIFIED", "UNRESOLVED"}, timeout=90)
    ct.run(["journalctl", "--sync"])
    here = cli(ct, "audit", "--verify", plan_id, "--json")
    said = json.loads(here.stdout)
    assert here.returncode == 0 and said["intact"], said
    assert {c["chain"] for c in said["chains"]} == {"executor", "root"}, said
    exported = ct.run(["sh", "-c", f"journalctl -o export PLAN_ID={plan_id} > /srv/story.export"])
    assert exported.returncode == 0
    story = parse_export((ct.root / "srv" / "story.export").read_bytes())
    chained = [i for i, e in enumerate(story) if field(e, b"CHAIN") == b"executor"]
    assert len(chained) >= 4, [field(e, b"EVENT") for e in story]

    status, copy = verify_against(ct, plan_id, "untouched", story)
    assert status == 0 and copy["intact"], copy

    # One entry deleted from the middle of the executor's chain.
    gone = chained[1]
    gone_seq = field(story[gone], b"CHAIN_SEQ")
    status, said = verify_against(ct, plan_id, "deleted", story[:gone] + story[gone + 1 :])
    assert status == 5, said
    assert gone_seq is not None
    assert executor_problems(said)[0].startswith(f"missing: #{gone_seq.decode()}, after #"), said

    # One entry edited: its event named otherwise.
    edited = chained[2]
    seq = (field(story[edited], b"CHAIN_SEQ") or b"?").decode()
    changed = list(story)
    changed[edited] = with_field(story[edited], b"EVENT", b"step.skipped")
    status, said = verify_against(ct, plan_id, "edited", changed)
    assert status == 5, said
    assert executor_problems(said)[0].startswith(f"altered: #{seq} (step.skipped at"), said

    # Two entries swapped, each given the other's time.
    first, second = chained[1], chained[2]
    t1 = field(story[first], b"__REALTIME_TIMESTAMP") or b""
    t2 = field(story[second], b"__REALTIME_TIMESTAMP") or b""
    swapped = list(story)
    swapped[first] = with_field(story[second], b"__REALTIME_TIMESTAMP", t1)
    swapped[second] = with_field(story[first], b"__REALTIME_TIMESTAMP", t2)
    status, said = verify_against(ct, plan_id, "reordered", swapped)
    assert status == 5, said
    s1 = (field(story[first], b"CHAIN_SEQ") or b"?").decode()
    s2 = (field(story[second], b"CHAIN_SEQ") or b"?").decode()
    [problem] = executor_problems(said)
    assert problem.startswith(f"out of order: #{s1} (") and f"comes after #{s2} (" in problem
