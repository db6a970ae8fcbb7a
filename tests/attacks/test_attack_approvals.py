"""The approval gate under attack, in the booted systemd, against the real apply.

opsbot-apply.path and .timer are stopped for these tests; each runs opsbot-apply.service
by hand (the sandboxed unit, as user opsbot-executor) after its attack. opsbot-archive.path
stays on (root moves each used approval to used/ as on a host); its timer is stopped, so
that no catch-up run lands in the middle of a test. Every attack must
be refused with a reason an operator can read in `opsbot show ID` (or, for a tampered
plan that show refuses, in the journal), and nothing may run: the target unit keeps its
InvocationID.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from opsbot_cli.say import unfold
from shared_schema import canonical_json, sha256_hex
from testbed.container import BootedSystemd
from testbed.host import STEPS_RAN, TEST_CONFIG
from tests.attacks.inside import (
    APPROVALS,
    CONFIG,
    STATE,
    apply_now,
    approval_path,
    approved,
    audit_store,
    cli,
    cursor,
    detail,
    edited_file,
    entries,
    invocation,
    propose,
    reject_quietly,
    starts_of,
    state_and_reason,
)

DB = "demo-db.service"
WEB = "demo-web.service"


@pytest.fixture(scope="module")
def ct(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The container with opsbot-apply.path and .timer and opsbot-archive.timer stopped
    (and started again after): only the tests run the apply."""
    opsbot.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer", "opsbot-archive.timer")
    opsbot.wait_for(
        lambda: (
            opsbot.systemctl("is-active", "opsbot-apply.service", check=False).stdout.strip()
            != "activating"
        ),
        timeout=60,
        what="no apply running",
    )
    try:
        yield opsbot
    finally:
        opsbot.systemctl("start", "opsbot-apply.path", "opsbot-apply.timer", "opsbot-archive.timer")


def refused(
    ct: BootedSystemd, plan_id: str, unit: str, before: str, reason: str, state: str = "APPROVED"
) -> None:
    """After an apply: ``plan_id`` is in ``state`` with ``reason`` in its reason, no step
    of it was recorded, and ``unit`` kept its invocation."""
    seen_state, seen_reason = state_and_reason(ct, plan_id)
    assert seen_state == state and reason in seen_reason, (seen_state, seen_reason)
    assert invocation(ct, unit) == before, f"{unit} was restarted"
    assert detail(ct, plan_id)["steps"] == [], "a step record exists: something ran"


def test_no_approval_nothing_runs(ct: BootedSystemd) -> None:
    """A PROPOSED plan waits; an APPROVED plan whose approval file is gone (deleted after
    approval) is refused with "no approval"; neither runs."""
    before = invocation(ct, DB)
    waiting = propose(ct, DB, "never approved")
    gone = approved(ct, DB, "approval deleted")
    ct.run(["rm", approval_path(gone)])
    try:
        apply_now(ct)
        assert state_and_reason(ct, waiting) == ("PROPOSED", "")
        refused(ct, gone, DB, before, "no approval")
        dry = cli(ct, "apply", "--dry-run", check=False).stdout
        assert f"{waiting}  PROPOSED    would not run: not approved" in dry
    finally:
        reject_quietly(ct, waiting, gone)


def test_another_plans_approval_is_refused(ct: BootedSystemd) -> None:
    """Plan B's approval copied over plan A's file: refused, it names plan B. B's
    approval with its plan id rewritten to A: refused, its fingerprint is not A's."""
    before = invocation(ct, DB)
    plan_a = approved(ct, DB, "plan A")
    plan_b = approved(ct, WEB, "plan B")
    try:
        ct.run(["cp", approval_path(plan_b), approval_path(plan_a)])
        ct.run(["rm", approval_path(plan_b)])  # B must not run either
        web_before = invocation(ct, WEB)
        apply_now(ct)
        refused(ct, plan_a, DB, before, f"approval names plan {plan_b}, not {plan_a}")
        assert invocation(ct, WEB) == web_before

        forged = json.loads(ct.run(["cat", approval_path(plan_a)]).stdout)
        forged["plan_id"] = plan_a
        ct.write_file(approval_path(plan_a), json.dumps(forged))
        apply_now(ct)
        refused(ct, plan_a, DB, before, "approval is for fingerprint")
        assert f"but plan {plan_a} has" in state_and_reason(ct, plan_a)[1]
    finally:
        reject_quietly(ct, plan_a, plan_b)


def test_plan_edited_after_approval_is_refused(ct: BootedSystemd) -> None:
    """The stored plan rewritten after approval to restart another unit: with its bytes
    only changed, the apply refuses a plan that no longer matches its fingerprint (and
    show will not print it); with its fingerprint recomputed too, the approval's
    fingerprint no longer matches. Neither unit restarts."""
    db_before, web_before = invocation(ct, DB), invocation(ct, WEB)
    plan_id = approved(ct, DB, "edited after approval")
    path = f"{STATE}/plans/{plan_id}.json"
    original = ct.run(["cat", path]).stdout
    try:
        record = json.loads(original)
        record["plan"] = record["plan"].replace(DB, WEB)
        ct.write_file(path, json.dumps(record))
        since = cursor(ct)
        apply_now(ct)
        logged = entries(ct, since, f"PLAN_ID={plan_id}", "EVENT=approval.refused")
        assert any("modified after it was stored" in e.get("REASON", "") for e in logged), logged
        shown = cli(ct, "show", plan_id, check=False)
        assert shown.returncode != 0 and "modified after it was stored" in shown.stderr

        plan = json.loads(record["plan"])
        record["plan"] = canonical_json(plan).decode()
        record["sha256"] = sha256_hex(canonical_json(plan))
        ct.write_file(path, json.dumps(record))
        apply_now(ct)
        refused(ct, plan_id, WEB, web_before, "approval is for fingerprint")
        assert invocation(ct, DB) == db_before
    finally:
        ct.write_file(path, original)
        reject_quietly(ct, plan_id)


@pytest.mark.parametrize(
    ("attack", "reason"),
    [
        ("symlink", "is a symlink; approvals must be regular files"),
        ("hardlink", "has 2 hard links; expected 1"),
        ("owned-by-mallory", "not root"),
        ("group-writable", "is writable by group or others (mode 0664)"),
        ("world-writable", "is writable by group or others (mode 0646)"),
        ("directory", "is not a regular file"),
    ],
)
def test_an_approval_file_that_is_not_roots_own_is_refused(
    ct: BootedSystemd, attack: str, reason: str
) -> None:
    """A valid approval, but reached through a symlink, with a second hard link, owned by
    a user, writable by group or others, or replaced by a directory: refused, each with
    its own reason, and nothing runs."""
    before = invocation(ct, DB)
    plan_id = approved(ct, DB, f"approval {attack}")
    path = approval_path(plan_id)
    extra = f"{APPROVALS}/stash-{plan_id}"
    if attack == "symlink":
        ct.run(["mv", path, extra])
        ct.run(["ln", "-s", extra, path])
    elif attack == "hardlink":
        ct.run(["ln", path, extra])
    elif attack == "owned-by-mallory":
        ct.run(["chown", "mallory", path])
    elif attack == "group-writable":
        ct.run(["chmod", "0664", path])
    elif attack == "world-writable":
        ct.run(["chmod", "0646", path])
    else:
        ct.run(["mv", path, extra])
        ct.run(["mkdir", path])
    try:
        apply_now(ct)
        refused(ct, plan_id, DB, before, reason)
    finally:
        ct.run(["rm", "-rf", path, extra])
        reject_quietly(ct, plan_id)


def test_an_expired_approval_expires_the_plan(ct: BootedSystemd) -> None:
    """Approved with --ttl 1 and applied two seconds later: the plan becomes EXPIRED,
    with the moment it expired as the reason; nothing runs."""
    before = invocation(ct, DB)
    plan_id = approved(ct, DB, "expired approval", "1")
    time.sleep(2)
    apply_now(ct)
    refused(ct, plan_id, DB, before, "approval expired at", state="EXPIRED")


def test_a_replayed_approval_runs_nothing_again(ct: BootedSystemd) -> None:
    """After a successful apply (and root's archiver moving the used approval away), a
    copy of its approval put back (a fresh root-owned file) and a second apply: nothing
    runs. Put back once more, with the plan's status rolled back to APPROVED (what someone
    with the executor's uid could do), the apply refuses: its consumed marker says the
    approval was already used. The unit restarted exactly once."""
    since = cursor(ct)
    plan_id = approved(ct, DB, "replay")
    path = approval_path(plan_id)
    ct.run(["cp", path, f"/root/{plan_id}.approval"])
    apply_now(ct)
    assert state_and_reason(ct, plan_id)[0] in STEPS_RAN
    after_first = invocation(ct, DB)
    wait_archived(ct, plan_id)

    ct.run(["install", "-m", "0644", "-o", "root", f"/root/{plan_id}.approval", path])
    apply_now(ct)
    assert state_and_reason(ct, plan_id)[0] in STEPS_RAN
    assert invocation(ct, DB) == after_first
    wait_archived(ct, plan_id)  # the copy too: its marker says it is used

    ct.run(["install", "-m", "0644", "-o", "root", f"/root/{plan_id}.approval", path])
    status_path = f"{STATE}/status/{plan_id}.json"
    status = json.loads(ct.run(["cat", status_path]).stdout)
    status.update(state="APPROVED", steps=[], history=status["history"][:2])
    ct.write_file(status_path, json.dumps(status))
    apply_now(ct)
    state, reason = state_and_reason(ct, plan_id)
    assert (state, reason) == ("APPROVED", "approval was already used by an earlier apply")
    assert invocation(ct, DB) == after_first
    assert starts_of(ct, DB, since) == 1
    reject_quietly(ct, plan_id)


def test_a_plan_the_policy_no_longer_allows_goes_stale(ct: BootedSystemd) -> None:
    """Approved, then demo-db is taken out of restart_unit in /etc/opsbot/opsbot.toml:
    the apply marks the plan STALE, naming today's policy; nothing runs. The config is
    restored after."""
    before = invocation(ct, DB)
    plan_id = approved(ct, DB, "policy changed")
    narrower = TEST_CONFIG.replace(
        'restart_unit = ["demo-web.service", "demo-db.service"]',
        'restart_unit = ["demo-web.service"]',
    )
    assert narrower != TEST_CONFIG
    with edited_file(ct, CONFIG, narrower):
        apply_now(ct)
    state, reason = state_and_reason(ct, plan_id)
    assert state == "STALE"
    assert "today's policy refuses it" in reason and f"restart_unit may not touch {DB}" in reason
    assert invocation(ct, DB) == before
    consumed = ct.run(["test", "-e", f"{STATE}/consumed/{plan_id}.json"], check=False)
    assert consumed.returncode != 0, "the approval was consumed for a plan that did not run"


def test_plan_ids_with_path_separators_go_nowhere(ct: BootedSystemd) -> None:
    """`opsbot approve ../x`, `opsbot show a/b` and friends are usage errors that touch
    no file. An approval under a crafted name (a backup copy, other case, a leading dot)
    is not an approval; one whose plan_id is a path is invalid; a plan file that is a
    symlink to another plan's record cannot be approved. Nothing runs."""
    for argv in (
        ["approve", "../x"],
        ["approve", f"../../{STATE}/plans/x"],
        ["show", "a/b"],
        ["show", ".."],
        ["reject", "x/../y"],
        ["audit", "../../etc/passwd"],
    ):
        result = cli(ct, *argv, check=False)
        assert result.returncode == 2, (argv, result)
        assert "is not a plan id" in "\n".join(unfold(result.stderr))

    before = invocation(ct, DB)
    plan_id = approved(ct, DB, "crafted names")
    path = approval_path(plan_id)
    good = ct.run(["cat", path]).stdout
    crafted = [
        f"{path}.bak",
        f"{path}~",
        f"{APPROVALS}/.{plan_id}.approval",
        f"{APPROVALS}/{plan_id}.APPROVAL",
        f"{APPROVALS}/{plan_id}.json",
    ]
    ct.run(["rm", path])
    for name in crafted:
        ct.write_file(name, good)
    try:
        apply_now(ct)
        refused(ct, plan_id, DB, before, "no approval")
        bad_id = json.loads(good)
        bad_id["plan_id"] = f"../plans/{plan_id}"
        ct.write_file(path, json.dumps(bad_id))
        apply_now(ct)
        refused(ct, plan_id, DB, before, "approval is not valid: plan_id")
    finally:
        ct.run(["rm", "-f", *crafted])
        reject_quietly(ct, plan_id)

    other = propose(ct, DB, "symlinked record")
    alias = "20000101-000000-0badc0de"
    ct.run(["ln", "-s", f"{STATE}/plans/{other}.json", f"{STATE}/plans/{alias}.json"])
    try:
        result = cli(ct, "approve", alias, "--sha256", "0" * 12, check=False)
        assert result.returncode != 0 and "is a symlink; refusing it" in "\n".join(
            unfold(result.stderr)
        )
        assert ct.run(["test", "-e", approval_path(alias)], check=False).returncode != 0
    finally:
        ct.run(["rm", "-f", f"{STATE}/plans/{alias}.json"])
        reject_quietly(ct, other)


def test_racing_applies_restart_the_unit_exactly_once(ct: BootedSystemd) -> None:
    """Four `opsbot-apply` processes (what opsbot-apply.service runs, here as its user
    opsbot-executor outside the unit) started at the same moment for one approved plan:
    the unit restarts exactly once (one "Started" from systemd, one step.started in the
    plan's journal), the plan is APPLIED, exactly one apply ran it."""
    plan_id = approved(ct, DB, "racing applies")
    before = invocation(ct, DB)
    since = cursor(ct)
    argv = [
        "nsenter",
        "-t",
        str(ct.pid),
        "-a",
        "runuser",
        "-u",
        "opsbot-executor",
        "--",
        "/opt/opsbot/venv/bin/opsbot-apply",
        "--json",
    ]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    ran = [o for out, _ in outputs for o in json.loads(out) if o["plan_id"] == plan_id and o["ran"]]
    assert len(ran) == 1, outputs
    assert state_and_reason(ct, plan_id)[0] in STEPS_RAN
    assert invocation(ct, DB) != before
    assert starts_of(ct, DB, since) == 1
    started = entries(ct, since, f"PLAN_ID={plan_id}", "EVENT=step.started")
    assert len(started) == 1, started


def test_the_store_holds_only_allowed_plans_after_the_matrix(ct: BootedSystemd) -> None:
    """After every attack above: each stored plan loads, matches its fingerprint, and
    uses only the executor's tools on units the policy allows."""
    audit = audit_store(ct)
    assert audit["bad"] == [] and audit["plans"] == audit["files"], audit


def test_the_executors_user_cannot_turn_roots_approve_against_root(ct: BootedSystemd) -> None:
    """Someone with the executor's uid owns /var/lib/opsbot, where root's `opsbot
    approve` takes a lock and writes status. They plant apply.lock, then the plan's
    status file, as symlinks to /etc/shadow: approve refuses to follow either (no
    approval is written) and /etc/shadow keeps its owner, mode and content. A hard link
    to /etc/shadow cannot even be made (the kernel's protected_hardlinks)."""
    plan_id = propose(ct, DB, "approve against root")
    sha = ["--sha256", detail(ct, plan_id)["summary"]["sha256"]]
    shadow = ["stat", "-c", "%U %G %a %s %Y", "/etc/shadow"]
    before = ct.run(shadow).stdout
    as_executor = ["runuser", "-u", "opsbot-executor", "--"]
    lock, status = f"{STATE}/apply.lock", f"{STATE}/status/{plan_id}.json"
    try:
        ct.run([*as_executor, "ln", "-sfn", "/etc/shadow", lock])
        result = cli(ct, "approve", plan_id, *sha, check=False)
        assert result.returncode == 1, result  # a store opsbot cannot use: an error
        assert f"cannot open {lock}" in "\n".join(unfold(result.stderr))
        ct.run(["rm", "-f", lock])

        ct.run([*as_executor, "ln", "-sfn", "/etc/shadow", status])
        result = cli(ct, "approve", plan_id, *sha, check=False)
        assert result.returncode == 1 and f"cannot read {status}" in "\n".join(
            unfold(result.stderr)
        ), result
        assert ct.run(["test", "-e", approval_path(plan_id)], check=False).returncode != 0

        link = ct.run([*as_executor, "ln", "/etc/shadow", f"{STATE}/shadow"], check=False)
        assert link.returncode != 0 and "Operation not permitted" in link.stderr
        assert ct.run(shadow).stdout == before
    finally:
        ct.run(["rm", "-f", lock, status, f"{STATE}/shadow"])
        reject_quietly(ct, plan_id)


# -- a subverted executor against root's decisions ------------------------------------------

EXECUTOR = "opsbot-executor"
USED = f"{APPROVALS}/used"


def as_executor_write(ct: BootedSystemd, path: str, text: str) -> None:
    """Rewrite a file of the executor's state in place, as its user (no root involved)."""
    ct.run(["tee", path], input=text, user=EXECUTOR)


def exists(ct: BootedSystemd, path: str) -> bool:
    return ct.run(["test", "-e", path], check=False).returncode == 0


def wait_archived(ct: BootedSystemd, plan_id: str) -> None:
    """Until root's archiver (opsbot-archive.path, on the consumed markers) has moved the
    plan's used approval from where the apply reads it to used/."""
    ct.wait_for(
        lambda: not exists(ct, approval_path(plan_id)) and exists(ct, f"{USED}/{plan_id}.approval"),
        timeout=30,
        interval=0.2,
        what=f"the approval of {plan_id} archived",
    )


def rolled_back_to_approved(ct: BootedSystemd, plan_id: str) -> None:
    """As the executor's user: the status file says APPROVED again, with no steps."""
    path = f"{STATE}/status/{plan_id}.json"
    status = json.loads(ct.run(["cat", path]).stdout)
    status.update(state="APPROVED", steps=[], history=status["history"][:2], refusal="")
    as_executor_write(ct, path, json.dumps(status))


def test_approve_binds_only_the_plan_that_was_reviewed(ct: BootedSystemd) -> None:
    """An operator reviews plan P with `opsbot show` (restart demo-db, sha256 S). Before
    they approve, someone with the executor's uid rewrites the stored plan to restart
    demo-web, sha256 recomputed (S'), and logs a plan.accepted naming S' from a shell.
    `opsbot approve P --sha256 S` refuses: the plan changed since the review. `--sha256 S'`
    (what a second `opsbot show` prints) refuses too: opsbot-executor.service's own entry
    names S, the forged entry does not count. Without a terminal and without --sha256,
    approve refuses in one line. No approval is written; neither unit restarts."""
    db_before, web_before = invocation(ct, DB), invocation(ct, WEB)
    plan_id = propose(ct, DB, "rewritten before approval")
    reviewed = detail(ct, plan_id)["summary"]["sha256"]
    path = f"{STATE}/plans/{plan_id}.json"
    original = ct.run(["cat", path]).stdout
    try:
        record = json.loads(original)
        plan = json.loads(record["plan"].replace(DB, WEB))
        record["plan"] = canonical_json(plan).decode()
        record["sha256"] = rewritten = sha256_hex(canonical_json(plan))
        as_executor_write(ct, path, json.dumps(record))
        assert detail(ct, plan_id)["summary"]["sha256"] == rewritten  # what show says now
        forge = (
            "from systemd import journal; journal.send('plan.accepted', EVENT='plan.accepted',"
            f" PLAN_ID='{plan_id}', PLAN_SHA256='{rewritten}', SYSLOG_IDENTIFIER='opsbot-executor')"
        )
        ct.run(["/opt/opsbot/venv/bin/python", "-c", forge], user=EXECUTOR)

        result = cli(ct, "approve", plan_id, "--sha256", reviewed[:12], check=False)
        assert result.returncode == 5, result
        said = "\n".join(unfold(result.stderr))
        assert f"not the {reviewed[:12]} you reviewed: it changed since" in said

        result = cli(ct, "approve", plan_id, "--sha256", rewritten[:12], check=False)
        assert result.returncode == 5, result
        assert (
            f"opsbot-executor.service logged accepting {reviewed[:16]}...: the stored plan was "
            "rewritten after it was accepted"
        ) in "\n".join(unfold(result.stderr))

        result = cli(ct, "approve", plan_id, check=False)
        assert result.returncode == 2, result
        assert unfold(result.stderr) == [
            "opsbot: error: no terminal to confirm on: pass --sha256 PREFIX",
            "opsbot: hint: at least 12 hex digits of the sha256 you reviewed "
            f"(`opsbot show {plan_id}`)",
        ]
        assert not exists(ct, approval_path(plan_id))
        apply_now(ct)
        assert (invocation(ct, DB), invocation(ct, WEB)) == (db_before, web_before)
    finally:
        ct.write_file(path, original, mode=0o640)
        ct.run(["chown", f"{EXECUTOR}:{EXECUTOR}", path])
        reject_quietly(ct, plan_id)


def test_a_rejected_plan_does_not_run_when_the_executor_flips_its_status_back(
    ct: BootedSystemd,
) -> None:
    """Root approves a plan, then rejects it: its approval file is gone. Someone with the
    executor's uid rewrites the status file back to APPROVED: the apply refuses it (root
    rejected it), nothing runs, and `opsbot approve` refuses it as rejected."""
    before = invocation(ct, DB)
    plan_id = approved(ct, DB, "rejected, then flipped back")
    sha = detail(ct, plan_id)["summary"]["sha256"]
    cli(ct, "reject", plan_id, "--reason", "not during business hours")
    assert not exists(ct, approval_path(plan_id))
    rolled_back_to_approved(ct, plan_id)
    apply_now(ct)
    refused(ct, plan_id, DB, before, "rejected by root: not during business hours; it never runs")
    as_proposed = f"{STATE}/status/{plan_id}.json"
    status = json.loads(ct.run(["cat", as_proposed]).stdout)
    status.update(state="PROPOSED", history=status["history"][:1])
    as_executor_write(ct, as_proposed, json.dumps(status))
    again = cli(ct, "approve", plan_id, "--sha256", sha, check=False)
    assert again.returncode == 5 and "was rejected by root" in again.stderr, again
    assert not exists(ct, approval_path(plan_id))


def test_after_an_apply_deleting_the_marker_and_rewriting_the_status_replays_nothing(
    ct: BootedSystemd,
) -> None:
    """A plan is applied once. Root's archiver moves its used approval to used/ (root's,
    0700: the executor's uid cannot even list it). Someone with the executor's uid then
    deletes the consumed marker and rewrites the status to APPROVED: the next apply finds
    no approval, and demo-db is not restarted a second time."""
    since = cursor(ct)
    plan_id = approved(ct, DB, "replay without the marker")
    apply_now(ct)
    assert state_and_reason(ct, plan_id)[0] in STEPS_RAN
    after = invocation(ct, DB)
    wait_archived(ct, plan_id)
    assert ct.run(["stat", "-c", "%U %a", USED]).stdout.split() == ["root", "700"]
    listing = ct.run(["ls", USED], user=EXECUTOR, check=False)
    assert listing.returncode != 0 and "Permission denied" in listing.stderr

    ct.run(["rm", f"{STATE}/consumed/{plan_id}.json"], user=EXECUTOR)
    rolled_back_to_approved(ct, plan_id)
    apply_now(ct)
    assert state_and_reason(ct, plan_id) == ("APPROVED", "no approval")
    assert invocation(ct, DB) == after
    assert starts_of(ct, DB, since) == 1
    reject_quietly(ct, plan_id)


def test_a_marker_deleted_before_the_archiver_ran_does_not_keep_the_approval(
    ct: BootedSystemd,
) -> None:
    """Someone with the executor's uid runs the apply's own program outside its unit (no
    root step after it), and deletes the consumed marker the moment it is written (here:
    with opsbot-archive.path held back, so the archiver surely comes after). The
    archiver's next run (its timer's; started by hand here) still moves the approval: the
    apply logged approval.consumed, and the journal is not the executor's to edit. The
    replay through opsbot-apply.service runs nothing."""
    since = cursor(ct)
    ct.systemctl("stop", "opsbot-archive.path")
    try:
        plan_id = approved(ct, DB, "marker deleted early")
        ct.run(["/opt/opsbot/venv/bin/opsbot-apply"], user=EXECUTOR)
        assert state_and_reason(ct, plan_id)[0] in STEPS_RAN
        after = invocation(ct, DB)
        ct.run(["rm", f"{STATE}/consumed/{plan_id}.json"], user=EXECUTOR)
        assert exists(ct, approval_path(plan_id))
        ct.systemctl("start", "opsbot-archive.service")
    finally:
        ct.systemctl("start", "opsbot-archive.path")
    assert not exists(ct, approval_path(plan_id))
    rolled_back_to_approved(ct, plan_id)
    apply_now(ct)
    assert state_and_reason(ct, plan_id) == ("APPROVED", "no approval")
    assert invocation(ct, DB) == after
    assert starts_of(ct, DB, since) == 1
    reject_quietly(ct, plan_id)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("dated-30-days-ahead", "approval is dated"),
        ("expires-in-2099", "more than approval_ttl_seconds=600"),
    ],
)
def test_an_approval_beyond_its_lifetime_runs_nothing(
    ct: BootedSystemd, how: str, reason: str
) -> None:
    """Root's pen writes an approval (forged here by root in the container; the point is
    the executor's check): dated 30 days ahead of the apply's clock (what an apply sees
    when the clock was set back 30 days), or expiring in 2099. The apply refuses it with
    the reason; demo-db keeps its invocation."""
    before = invocation(ct, DB)
    plan_id = approved(ct, DB, f"lifetime {how}")
    approval = json.loads(ct.run(["cat", approval_path(plan_id)]).stdout)
    now = datetime.now(UTC)
    if how == "dated-30-days-ahead":
        approval["approved_at"] = (now + timedelta(days=30)).isoformat()
        approval["expires_at"] = (now + timedelta(days=30, seconds=600)).isoformat()
    else:
        approval["expires_at"] = datetime(2099, 1, 1, tzinfo=UTC).isoformat()
    ct.write_file(approval_path(plan_id), json.dumps(approval))
    try:
        apply_now(ct)
        refused(ct, plan_id, DB, before, reason)
    finally:
        reject_quietly(ct, plan_id)


def test_on_a_terminal_approve_shows_the_plan_root_reads_and_asks(ct: BootedSystemd) -> None:
    """`sudo opsbot approve ID` on a terminal (a pty from script(1)): it prints the plan as
    root reads it now, its sha256 (the first 16 digits, and where the whole one is) and
    each step's argv, then asks. "n" approves nothing; "y" writes the approval, bound to
    the whole sha256 of the plan it showed."""
    plan_id = propose(ct, DB, "approved on a terminal")
    sha = detail(ct, plan_id)["summary"]["sha256"]
    command = ["script", "-qec", f"/opt/opsbot/venv/bin/opsbot approve {plan_id}", "/dev/null"]
    try:
        declined = ct.run(command, input="n\n", check=False)
        assert f"sha256    {sha[:16]}… (whole in `opsbot show {plan_id}`" in declined.stdout
        assert f"run: systemctl restart --no-ask-password -- {DB}" in declined.stdout
        assert "was not approved: the answer was not yes" in declined.stdout
        assert not exists(ct, approval_path(plan_id))

        accepted = ct.run(command, input="y\n", check=False)
        assert f"approved plan {plan_id} (sha256 {sha[:16]}...)" in accepted.stdout, accepted
        assert json.loads(ct.run(["cat", approval_path(plan_id)]).stdout)["sha256"] == sha
    finally:
        ct.run(["rm", "-f", approval_path(plan_id)])
        reject_quietly(ct, plan_id)
