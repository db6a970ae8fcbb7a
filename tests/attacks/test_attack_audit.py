"""The audit trail against someone who rewrites the journal: a plan's whole story as the
real daemons chain it (approved by root, applied by the executor, verified), then the
journal's own export of it, tampered with as root could (one entry deleted, one edited,
two swapped with their times), written back into journal files by systemd-journal-remote
as a collector would hold them, and checked with `opsbot audit --verify --against`: the
untouched copy and the host's journal are intact, each tampered copy names its entry and
exits 5. In the booted systemd with opsbot installed as README says.

Then the diagnose user, from inside opsbot-diagnose.service (a process moved into the
unit's cgroup, then dropped to its uid and groups, so that journald records the unit and
the uid as it would for the service itself): it logs that bob approved a plan root
rejected, that a step ran and that the plan is VERIFIED, and `opsbot audit` tells none of
it as the plan's history; it reads the executor's last link and logs the next, and
`--verify --against` (the collector's copy) refuses it, and refuses it too where the copy
says the executor's own unit sent it: past the writer's head, without its key's mark."""

from __future__ import annotations

import json
import struct
from typing import Any

from testbed.container import BootedSystemd
from testbed.host import wait_state
from tests.attacks.inside import (
    apply_now,
    approved,
    as_diagnose_in_its_unit,
    cli,
    propose,
    reject_quietly,
)

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


#: The diagnose user says bob approved the plan argv[1], its step ran and it is VERIFIED.
FORGE_HISTORY = """
import sys, time
from systemd import journal
plan_id = sys.argv[1]
argv = "systemctl restart --no-ask-password -- demo-web.service"
for event, fields in [
    ("plan.approved", {"APPROVER": "bob"}),
    ("step.finished", {"STEP": "1", "ARGV": argv, "EXIT_STATUS": "0", "OUTCOME": "ok"}),
    ("plan.verified", {"STATE": "VERIFIED"}),
]:
    journal.send(event, EVENT=event, PLAN_ID=plan_id, SYSLOG_IDENTIFIER="opsbot-apply", **fields)
time.sleep(1)  # journald reads the sender's cgroup while it lives
"""

#: The diagnose user (group systemd-journal) reads the executor's last link of the plan
#: argv[1] and logs the next: a step.finished the executor never ran, number, link and
#: hash right. Prints its number.
FORGE_LINK = """
import json, subprocess, sys, time
from systemd import journal
from shared_io.audit_chain import entry_hash
plan_id = sys.argv[1]
read = ["journalctl", "-o", "json", "--all", "PLAN_ID=" + plan_id, "CHAIN=executor"]
lines = subprocess.run(read, capture_output=True, text=True, check=True).stdout.splitlines()
last = max((json.loads(line) for line in lines if line), key=lambda e: int(e["CHAIN_SEQ"]))
seq = int(last["CHAIN_SEQ"]) + 1
fields = {
    "MESSAGE": "step.finished step=1 outcome=ok",
    "PRIORITY": "6",
    "SYSLOG_IDENTIFIER": "opsbot-apply",
    "EVENT": "step.finished",
    "PLAN_ID": plan_id,
    "STEP": "1",
    "ARGV": "systemctl restart --no-ask-password -- demo-web.service",
    "EXIT_STATUS": "0",
    "OUTCOME": "ok",
    "CHAIN": "executor",
    "CHAIN_SEQ": str(seq),
    "CHAIN_PREV": last["AUDIT_HASH"],
    "AUDIT_DAY": last["AUDIT_DAY"],
    "DAY_SEQ": str(int(last["DAY_SEQ"]) + 1),
    "DAY_PREV": last["AUDIT_HASH"],
}
fields["AUDIT_HASH"] = entry_hash(fields)
journal.send(fields.pop("MESSAGE"), **fields)
time.sleep(1)
print(seq)
"""


def sent_from_the_diagnose_unit(ct: BootedSystemd, plan_id: str, event: str) -> dict[str, Any]:
    """The entry ``event`` of ``plan_id`` the diagnose user logged, as journald recorded
    it: opsbot-diagnose.service, the diagnose uid (else the attack proves nothing)."""
    out = ct.journal("-o", "json", f"PLAN_ID={plan_id}", f"EVENT={event}")
    uid = ct.run(["id", "-u", "opsbot-diagnose"]).stdout.strip()
    [entry] = [e for e in map(json.loads, out.splitlines()) if e.get("_UID") == uid]
    assert entry["_SYSTEMD_UNIT"] == "opsbot-diagnose.service", entry
    return dict(entry)


def test_the_diagnose_users_own_unit_writes_no_line_of_a_plans_history(
    opsbot: BootedSystemd,
) -> None:
    """Root rejects a plan. The diagnose user, from inside opsbot-diagnose.service, logs
    that bob approved it, that its step ran ok and that it is VERIFIED: `opsbot audit`
    says root rejected it and nothing ran, its story holds none of the three, and they
    are shown apart, "not from its writer", each with whose event it is."""
    ct = opsbot
    plan_id = propose(ct, WEB, "rejected, then forged")
    cli(ct, "reject", plan_id, "--reason", "not this one")
    as_diagnose_in_its_unit(ct, FORGE_HISTORY, plan_id)
    for event in ("plan.approved", "step.finished", "plan.verified"):
        sent_from_the_diagnose_unit(ct, plan_id, event)

    told = cli(ct, "audit", plan_id, "--no-pager").stdout.splitlines()
    assert told[0].endswith("root rejected it; nothing ran: REJECTED"), told
    apart = told.index("not from its writer (3): another writer's events, not the plan's history")
    assert not any("bob" in line or "plan.verified" in line for line in told[:apart]), told
    assert "    (only root writes it)" in told[apart:], told

    said = json.loads(cli(ct, "audit", plan_id, "--json").stdout)
    events = [e["event"] for e in said["entries"]]
    assert "plan.rejected" in events, events
    assert not {"plan.approved", "step.finished", "plan.verified"} & set(events), events
    assert [e["event"] for e in said["not_from_its_writer"]] == [
        "plan.approved",
        "step.finished",
        "plan.verified",
    ]
    assert all("opsbot-diagnose.service" in e["source"] for e in said["not_from_its_writer"])


def test_the_diagnose_user_cannot_extend_the_executors_chain(opsbot: BootedSystemd) -> None:
    """The diagnose user reads the executor's last link of a plan and logs the next (a
    step the executor never ran) from inside its unit. The collector's copy of the
    journal, checked on the host with `--verify --against`: the link is not believed
    (the diagnose uid in opsbot-diagnose.service is not the executor), and the executor's
    chain is what the executor wrote, intact, its keys checked. The same copy edited to
    say the executor's own unit sent it: refused, exit 5, as past the head the executor
    keeps and without its key's mark."""
    ct = opsbot
    plan_id = propose(ct, WEB, "a link made up")
    try:
        seq = int(as_diagnose_in_its_unit(ct, FORGE_LINK, plan_id).strip())
        made_up = sent_from_the_diagnose_unit(ct, plan_id, "step.finished")
        assert made_up["CHAIN_SEQ"] == str(seq)
        exported = ct.run(
            ["sh", "-c", f"journalctl -o export PLAN_ID={plan_id} > /srv/forged.export"]
        )
        assert exported.returncode == 0
        story = parse_export((ct.root / "srv" / "forged.export").read_bytes())
        [at] = [i for i, e in enumerate(story) if field(e, b"CHAIN_SEQ") == str(seq).encode()]

        status, said = verify_against(ct, plan_id, "forged", story)
        [chain] = [c for c in said["chains"] if c["chain"] == "executor"]
        assert status == 0 and chain["intact"] and chain["keyed"], said
        assert chain["entries"] == seq - 1, said
        [not_believed] = chain["not_from_its_writer"]
        assert not_believed.startswith(f"#{seq} (step.finished at "), not_believed
        assert not_believed.endswith("wrote it in opsbot-diagnose.service: not believed")

        executor_uid = ct.run(["id", "-u", "opsbot-executor"]).stdout.strip().encode()
        as_if_the_apply = list(story)
        for key, value in (
            (b"_UID", executor_uid),
            (b"_GID", executor_uid),
            (b"_SYSTEMD_UNIT", b"opsbot-apply.service"),
            (b"_SYSTEMD_CGROUP", b"/system.slice/opsbot-apply.service"),
        ):
            as_if_the_apply[at] = with_field(as_if_the_apply[at], key, value)
        status, said = verify_against(ct, plan_id, "as-the-apply", as_if_the_apply)
        assert status == 5, said
        problems = executor_problems(said)
        assert any(p.startswith(f"past the head: #{seq} (step.finished at ") for p in problems)
        assert any(p.startswith(f"unkeyed: #{seq} (step.finished at ") for p in problems)
    finally:
        reject_quietly(ct, plan_id)
