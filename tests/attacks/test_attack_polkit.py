"""polkit holds opsbot's users to the manage-units pairs the policy allows, and to nothing
else; `sudo opsbot apply` cannot step around it. In the booted systemd with opsbot
installed as README says.

The attack (issue 12, item 7): from an exact copy of opsbot-executor.service's sandbox,
the executor's user wrote a user unit under its home (then /var/lib/opsbot, writable
there) and asked logind for linger (`set-self-linger` allows any user by default):
logind started user@UID.service, its user manager ran the unit outside every sandbox,
and would again after each boot. Now the generated rule answers NO to opsbot's users for
every polkit action but the allowed (verb, unit) pairs, and neither user has a home it
can write.

Item 12: the rule file is root's (Debian's rules.d belongs to polkitd, and the rule used
to be given to it). Item 13: `opsbot apply` starts opsbot-apply.service instead of
running steps as root in its own process.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from testbed.container import BootedSystemd
from testbed.host import OPSBOT, PYTHON, TEST_CONFIG, approve
from testbed.skips import skip_unless
from tests.attacks.inside import (
    approved,
    cli,
    cursor,
    edited_file,
    entries,
    invocation,
    propose,
    reject_quietly,
    state_and_reason,
)

RULE = "/etc/polkit-1/rules.d/60-opsbot.rules"
EXECUTOR_UNIT = "/etc/systemd/system/opsbot-executor.service"
OPSBOT_USERS = ("opsbot-executor", "opsbot-diagnose")
LINGER = "/var/lib/systemd/linger"
#: [Service] settings of the executor's unit that say how it runs, not how it is confined.
NOT_SANDBOX = {
    "Type",
    "ExecStart",
    "ExecReload",
    "Restart",
    "RestartSec",
    "RestartPreventExitStatus",
}
MANAGE_UNITS = "org.freedesktop.systemd1.manage-units"
WEB = "demo-web.service"
DB = "demo-db.service"
NARROW_CONFIG = "/etc/opsbot/narrow.toml"


@pytest.fixture(scope="module")
def ct(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The container with logind running (the attack needs it: without it this module
    would prove nothing, so it may not skip under CI), and opsbot-apply.path and .timer
    stopped (started again after), so that only `opsbot apply` runs the apply."""
    opsbot.systemctl("start", "systemd-logind.service", check=False)
    state = opsbot.systemctl("is-active", "systemd-logind.service", check=False).stdout.strip()
    skip_unless(state == "active", f"systemd-logind is {state!r} in the container")
    opsbot.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer")
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
        opsbot.systemctl("start", "opsbot-apply.path", "opsbot-apply.timer")


def uid_of(ct: BootedSystemd, user: str) -> str:
    return ct.run(["id", "-u", user]).stdout.strip()


def executor_sandbox(ct: BootedSystemd) -> list[str]:
    """``-p KEY=VALUE`` for every sandbox setting of the installed executor unit (User=
    and Group= included): a transient service with these is confined exactly as it is."""
    text = ct.run(["cat", EXECUTOR_UNIT]).stdout
    section, props = "", []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key = line.split("=", 1)[0]
            if key not in NOT_SANDBOX:
                props += ["-p", line]
    for setting in ("User=opsbot-executor", "ProtectSystem=strict", "NoNewPrivileges=yes"):
        assert setting in props, props
    return props


def in_executor_sandbox(ct: BootedSystemd, script: str) -> tuple[int, str, str]:
    """``sh -c script`` as a transient service with the executor unit's sandbox (each
    ``$`` doubled: systemd expands ``${NAME}`` in a command line itself)."""
    result = ct.run(
        [
            "systemd-run",
            "--quiet",
            "--wait",
            "--pipe",
            "--collect",
            *executor_sandbox(ct),
            "--",
            "/bin/sh",
            "-c",
            script.replace("$", "$$"),
        ],
        check=False,
    )
    return result.returncode, result.stdout, result.stderr


def linger_call(uid: str) -> list[str]:
    """logind's SetUserLinger(uid, enable=true, interactive=false), over the system bus."""
    return [
        "busctl",
        "call",
        "org.freedesktop.login1",
        "/org/freedesktop/login1",
        "org.freedesktop.login1.Manager",
        "SetUserLinger",
        "ubb",
        uid,
        "true",
        "false",
    ]


def user_manager(ct: BootedSystemd, uid: str) -> str:
    return ct.systemctl("show", "-P", "ActiveState", f"user@{uid}.service").stdout.strip()


@contextlib.contextmanager
def no_linger_left(ct: BootedSystemd, *users: str) -> Iterator[None]:
    """Whatever the block did (an old rule lets it through), no linger and no user manager
    of ``users`` outlive it."""
    try:
        yield
    finally:
        for user in users:
            ct.run(["loginctl", "disable-linger", user], check=False)
            ct.systemctl("stop", f"user@{uid_of(ct, user)}.service", check=False)


def test_a_plain_user_may_linger_here_so_the_refusals_below_mean_something(
    ct: BootedSystemd,
) -> None:
    """The control: in this container logind answers, polkit's default lets a plain user
    (mallory) linger, and logind then starts her user manager. So when opsbot's users are
    refused below, it is the rule that refuses them, not a logind or a polkit that is
    not there."""
    uid = uid_of(ct, "mallory")
    with no_linger_left(ct, "mallory"):
        said = ct.run(linger_call(uid), user="mallory", check=False)
        assert said.returncode == 0, said.stderr
        assert ct.run(["test", "-e", f"{LINGER}/mallory"], check=False).returncode == 0
        assert ct.wait_for(
            lambda: user_manager(ct, uid) in ("active", "failed"),
            timeout=30,
            what="mallory's user manager started",
        )


def test_the_executor_cannot_plant_a_user_unit_or_linger_from_its_sandbox(
    ct: BootedSystemd,
) -> None:
    """From an exact copy of opsbot-executor.service's sandbox, the attack of item 7: its
    home is / and cannot be written (no ~/.config/systemd/user/evil.service), and logind's
    SetUserLinger is refused by polkit ("Access denied", not a prompt). No linger file,
    and no user manager for the executor."""
    uid = uid_of(ct, "opsbot-executor")
    with no_linger_left(ct, "opsbot-executor"):
        status, out, err = in_executor_sandbox(
            ct,
            'home=$(getent passwd "$(id -un)" | cut -d: -f6); echo "home=$home"; '
            'mkdir -p "${home%/}/.config/systemd/user" && '
            'echo "[Service]" > "${home%/}/.config/systemd/user/evil.service"',
        )
        assert "home=/\n" in out, (out, err)
        assert status != 0 and "Read-only file system" in err, (out, err)
        status, out, err = in_executor_sandbox(ct, shlex.join(linger_call(uid)))
        assert status != 0 and "Access denied" in err, (status, out, err)
        assert ct.run(["test", "-e", f"{LINGER}/opsbot-executor"], check=False).returncode != 0
        assert user_manager(ct, uid) == "inactive"


@pytest.mark.parametrize("user", OPSBOT_USERS)
def test_neither_opsbot_user_has_a_writable_home_or_may_linger(
    ct: BootedSystemd, user: str
) -> None:
    """Outside any sandbox too: each of opsbot's users has / as its home, cannot write it,
    and is refused linger for itself by polkit; no user manager runs for it."""
    uid = uid_of(ct, user)
    home = ct.run(["getent", "passwd", user]).stdout.split(":")[5]
    assert home == "/"
    assert ct.run(["test", "-w", home], user=user, check=False).returncode != 0
    with no_linger_left(ct, user):
        said = ct.run(linger_call(uid), user=user, check=False)
        assert said.returncode != 0 and "Access denied" in said.stderr, said
        assert ct.run(["test", "-e", f"{LINGER}/{user}"], check=False).returncode != 0
        assert user_manager(ct, uid) == "inactive"


#: Asks polkitd (as root, for a process running as user $1) about every action it knows
#: when $2 is "all", then about manage-units for each VERB:UNIT that follows, with the
#: details systemd passes; prints "ACTION DETAIL STATUS" (pkcheck: 0 yes, 1 no, 2 prompt).
PKCHECK = r"""
set -u
user=$1 every=$2
shift 2
setpriv --reuid="$user" --regid="$user" --init-groups sleep 300 &
pid=$!
trap 'kill $pid' EXIT
uid=$(id -u "$user")
for _ in $(seq 100); do [ "$(stat -c %u /proc/$pid)" = "$uid" ] && break; sleep 0.05; done
if [ "$every" = all ]; then
    for action in $(pkaction); do
        pkcheck --action-id "$action" --process "$pid" >/dev/null 2>&1
        echo "$action - $?"
    done
fi
for pair in "$@"; do
    pkcheck --action-id org.freedesktop.systemd1.manage-units --process "$pid" \
        --detail verb "${pair%%:*}" --detail unit "${pair#*:}" >/dev/null 2>&1
    echo "org.freedesktop.systemd1.manage-units $pair $?"
done
"""
PAIRS = (
    "restart:demo-web.service",
    "stop:demo-web.service",
    "restart:demo-other.service",
    "restart:systemd-journald.service",
    "start:demo-flaky.service",
)


def polkit_answers(
    ct: BootedSystemd, user: str, *pairs: str, every_action: bool = False
) -> dict[tuple[str, str], int]:
    argv = ["bash", "-c", PKCHECK, "pkcheck", user, "all" if every_action else "-", *pairs]
    answers = {}
    for line in ct.run(argv, timeout=120).stdout.splitlines():
        action, detail, status = line.split()
        answers[(action, detail)] = int(status)
    return answers


def executor_may(ct: BootedSystemd, verb: str, unit: str) -> bool:
    """What polkitd answers now for the executor's user doing ``verb`` on ``unit``."""
    [status] = polkit_answers(ct, "opsbot-executor", f"{verb}:{unit}").values()
    return status == 0


@pytest.mark.parametrize("user", OPSBOT_USERS)
def test_polkit_says_no_to_opsbots_users_for_every_action_but_the_allowed_pairs(
    ct: BootedSystemd, user: str
) -> None:
    """Every action polkitd knows (logind's, systemd's, hostnamed's, packagekit's, ...),
    asked for a process of this user: "not authorized" (pkcheck's 1, the rule's NO, not
    2, a prompt that no one answers). The executor's user alone gets YES for the
    allowlisted (verb, unit) pairs (restart demo-web, start demo-flaky), and NO for any
    other verb or unit."""
    answers = polkit_answers(ct, user, *PAIRS, every_action=True)
    assert len(answers) > 50, answers  # polkitd answered, for every action it has
    assert ("org.freedesktop.login1.set-self-linger", "-") in answers
    allowed = {
        (MANAGE_UNITS, "restart:demo-web.service"),
        (MANAGE_UNITS, "start:demo-flaky.service"),
    }
    expected = {key: 0 if user == "opsbot-executor" and key in allowed else 1 for key in answers}
    assert answers == expected


def test_the_rule_file_is_roots_and_0644(ct: BootedSystemd) -> None:
    """`opsbot polkit-rule --write`: the file is root:root 0644 in a directory polkitd
    owns, and holds exactly what `opsbot polkit-rule` prints."""
    assert ct.run(["stat", "-c", "%U", "/etc/polkit-1/rules.d"]).stdout.strip() == "polkitd"
    ct.run(["chown", "polkitd:polkitd", RULE])  # as the old code left it
    said = cli(ct, "polkit-rule", "--write").stdout
    assert f"wrote {RULE}" in said
    assert ct.run(["stat", "-c", "%U %G %a", RULE]).stdout.split() == ["root", "root", "644"]
    assert ct.run(["cat", RULE]).stdout == cli(ct, "polkit-rule").stdout
    left = ct.run(["ls", "-A", "/etc/polkit-1/rules.d"]).stdout.split()
    assert [name for name in left if name.startswith(".tmp-")] == []


def test_sudo_opsbot_apply_runs_the_step_as_the_executor_in_its_unit(ct: BootedSystemd) -> None:
    """Root runs `opsbot apply` for an approved restart: the console prints the step and
    the plan's outcome, and the journal says who ran the step: a process of
    opsbot-apply.service with the executor's uid, not root's console."""
    plan_id = approved(ct, WEB, "apply as the executor")
    before = invocation(ct, WEB)
    since = cursor(ct)
    try:
        applied = cli(ct, "apply", check=False)
        shown = applied.stdout
        # 0, or 3 where another story's plan still waits for approval on this host.
        assert applied.returncode in (0, 3), applied
        assert f"{plan_id}  step 1 changed: systemctl restart --no-ask-password -- {WEB}" in shown
        assert f"{plan_id}  APPLIED     1 step ran" in shown
        assert "VERIFIED" in shown
        assert invocation(ct, WEB) != before
        [finished] = entries(ct, since, f"PLAN_ID={plan_id}", "EVENT=step.finished")
        assert finished["_SYSTEMD_UNIT"] == "opsbot-apply.service"
        assert finished["_UID"] == uid_of(ct, "opsbot-executor")
        as_json = json.loads(cli(ct, "apply", "--json", check=False).stdout)
        assert all(o["plan_id"] != plan_id or not o["ran"] for o in as_json)
    finally:
        reject_quietly(ct, plan_id)


def test_sudo_opsbot_apply_cannot_run_what_the_polkit_rule_does_not_allow(
    ct: BootedSystemd,
) -> None:
    """The policy allows restarting demo-db, but the polkit rule in force does not (it was
    generated from a narrower config after root approved: approve itself writes the rule
    again when it does not match the config). A restart of demo-db, applied by root's
    `opsbot apply`: the step runs as the executor, polkit refuses it, the plan is FAILED,
    `opsbot apply` exits 6 and demo-db keeps its invocation. Root's shell lends the step
    none of root's rights."""
    narrow = TEST_CONFIG.replace(
        'restart_unit = ["demo-web.service", "demo-db.service"]',
        'restart_unit = ["demo-web.service"]',
    )
    assert narrow != TEST_CONFIG
    ct.write_file(NARROW_CONFIG, narrow)
    before = invocation(ct, DB)
    plan_id = ""
    try:
        plan_id = approved(ct, DB, "beyond the rule")
        ct.run([OPSBOT, "polkit-rule", "--write"], env={"OPSBOT_CONFIG": NARROW_CONFIG})
        ct.wait_for(lambda: not executor_may(ct, "restart", DB), what="polkit read the rule")
        applied = cli(ct, "apply", check=False)
        assert applied.returncode == 6, applied
        assert f"{plan_id}  step 1 failed: systemctl restart" in applied.stdout
        assert f"{plan_id}  FAILED" in applied.stdout
        state, reason = state_and_reason(ct, plan_id)
        assert state == "FAILED" and "Access denied" in reason, (state, reason)
        assert invocation(ct, DB) == before
    finally:
        if plan_id:
            reject_quietly(ct, plan_id)
        ct.run(["rm", "-f", NARROW_CONFIG])
        cli(ct, "polkit-rule", "--write")
        ct.wait_for(lambda: executor_may(ct, "restart", DB), what="polkit read the rule")


GRANTS = "/etc/polkit-1/rules.d"
CONFIG = "/etc/opsbot/opsbot.toml"


def with_window(start: datetime, minutes: int) -> str:
    """The test config with one apply window, ``start`` (UTC) for ``minutes``."""
    return (
        TEST_CONFIG
        + f'\n[[executor.apply_window]]\nstart = "{start:%Y-%m-%d %H:%M:%S} UTC"\n'
        + f'duration = "{minutes}min"\n'
    )


def restart_as_executor(ct: BootedSystemd, unit: str) -> subprocess.CompletedProcess[str]:
    """``systemctl restart`` of ``unit`` by the executor's user itself, as a subverted
    executor would (no opsbot code in the way: only polkit decides)."""
    return ct.run(
        ["systemctl", "restart", "--no-ask-password", unit], user="opsbot-executor", check=False
    )


def test_the_windows_bind_the_executor_user_in_polkit(ct: BootedSystemd) -> None:
    """Apply windows used to bind opsbot's code only: a subverted executor could restart
    an allowed unit at any hour. Now the rule carries the windows (absolute UTC intervals
    of the next 14 days) and reads polkit's clock. As opsbot-executor, by hand:
    `systemctl restart demo-web` inside a window restarts it; outside every window it is
    "Access denied" and demo-web keeps its invocation; then root's `approve --now` of a
    restart of demo-web writes a grant for exactly that plan, with which the restart is
    allowed outside the window; once the plan is applied and its approval archived, the
    grant is gone and the restart is refused again."""
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        with edited_file(ct, CONFIG, with_window(now - timedelta(minutes=30), 90)):
            said = json.loads(cli(ct, "polkit-rule", "--write", "--json").stdout)
            assert len(said["windows"]) == 1, said
            ct.wait_for(lambda: executor_may(ct, "restart", WEB), timeout=20, what="in window")
            before = invocation(ct, WEB)
            inside = restart_as_executor(ct, WEB)
            assert inside.returncode == 0, inside.stderr
            assert invocation(ct, WEB) != before
        outside_config = with_window(now + timedelta(hours=3), 60)
        with edited_file(ct, CONFIG, outside_config):
            cli(ct, "polkit-rule", "--write")
            ct.wait_for(lambda: not executor_may(ct, "restart", WEB), timeout=20, what="outside")
            before = invocation(ct, WEB)
            outside = restart_as_executor(ct, WEB)
            assert outside.returncode != 0 and "Access denied" in outside.stderr, outside
            assert invocation(ct, WEB) == before
            # root overrides the window for one plan: a grant for it, until it expires.
            plan_id = propose(ct, WEB, "approve --now outside the window")
            approve(ct, plan_id, "--now")
            grant = f"{GRANTS}/59-opsbot-now-{plan_id}.rules"
            assert ct.run(["stat", "-c", "%U %G %a", grant]).stdout.split() == [
                "root",
                "root",
                "644",
            ]
            ct.wait_for(lambda: executor_may(ct, "restart", WEB), timeout=20, what="granted")
            assert not executor_may(ct, "restart", DB)  # that plan's unit only
            applied = cli(ct, "apply", check=False)
            assert f"{plan_id}  APPLIED" in applied.stdout, applied.stdout
            ct.wait_for(
                lambda: ct.run(["test", "-e", grant], check=False).returncode != 0,
                timeout=60,
                what="the grant removed once the approval is archived",
            )
            ct.wait_for(lambda: not executor_may(ct, "restart", WEB), timeout=20, what="grant gone")
            assert restart_as_executor(ct, WEB).returncode != 0
    finally:
        cli(ct, "polkit-rule", "--write")


def test_a_config_edit_reaches_polkit_before_the_next_approval(ct: BootedSystemd) -> None:
    """The allowlist and the windows live in the rule too: an edit of opsbot.toml that
    allows nothing for demo-web takes effect in polkit by itself (opsbot-polkit-rule.path),
    and so does the edit back; root's approve also writes a stale rule again before it
    approves, so an apply is never held to yesterday's config."""
    narrowed = TEST_CONFIG.replace(
        'restart_unit = ["demo-web.service", "demo-db.service"]',
        'restart_unit = ["demo-db.service"]',
    )
    assert narrowed != TEST_CONFIG
    try:
        with edited_file(ct, CONFIG, narrowed):
            ct.wait_for(
                lambda: not executor_may(ct, "restart", WEB), timeout=30, what="rule follows"
            )
        ct.wait_for(lambda: executor_may(ct, "restart", WEB), timeout=30, what="and back")
        # A stale rule (written from another config) is repaired by root's approve.
        ct.write_file(NARROW_CONFIG, narrowed)
        ct.run([OPSBOT, "polkit-rule", "--write"], env={"OPSBOT_CONFIG": NARROW_CONFIG})
        ct.wait_for(lambda: not executor_may(ct, "restart", WEB), what="stale rule in force")
        plan_id = approved(ct, WEB, "approve repairs the rule")
        ct.wait_for(lambda: executor_may(ct, "restart", WEB), what="approve wrote it again")
        reject_quietly(ct, plan_id)
    finally:
        ct.run(["rm", "-f", NARROW_CONFIG])
        cli(ct, "polkit-rule", "--write")


APPROVER_UNIT = "/etc/systemd/system/opsbot-approver.service"


def grant_of(plan_id: str) -> str:
    return f"{GRANTS}/59-opsbot-now-{plan_id}.rules"


def exists(ct: BootedSystemd, path: str) -> bool:
    return ct.run(["test", "-e", path], check=False).returncode == 0


@contextlib.contextmanager
def window_closed_now(ct: BootedSystemd) -> Iterator[None]:
    """The config with one apply window, three hours from now, and polkit's rule written
    from it: outside every window, the executor's user gets NO for everything."""
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        with edited_file(ct, CONFIG, with_window(now + timedelta(hours=3), 60)):
            cli(ct, "polkit-rule", "--write")
            ct.wait_for(lambda: not executor_may(ct, "restart", WEB), timeout=20, what="closed")
            yield
    finally:
        cli(ct, "polkit-rule", "--write")


def granted_now(ct: BootedSystemd, label: str, *ttl: str) -> str:
    """A restart of demo-web, approved by root with `--now` outside the window: its grant
    is written, root's, and in force in polkit."""
    plan_id = propose(ct, WEB, label)
    approve(ct, plan_id, "--now", *(("--ttl", *ttl) if ttl else ()))
    assert exists(ct, grant_of(plan_id))
    ct.wait_for(lambda: executor_may(ct, "restart", WEB), timeout=20, what="granted")
    return plan_id


def test_a_rejected_plan_s_grant_is_gone_and_polkit_refuses_its_verb(ct: BootedSystemd) -> None:
    """Issue 39: `opsbot reject` removed the approval of an `approve --now` plan but not
    its polkit grant, so a subverted executor kept `systemctl restart demo-web` outside
    every window until the approval expired (up to approval_ttl_seconds). Outside the
    window, root approves a restart of demo-web with --now, the executor's user cannot
    remove the grant itself; then root rejects the plan: the grant is gone when reject
    returns, and the executor's own `systemctl restart demo-web` is "Access denied",
    demo-web keeping its invocation."""
    with window_closed_now(ct):
        plan_id = granted_now(ct, "rejected after --now")
        try:
            taken = ct.run(["rm", "-f", grant_of(plan_id)], user="opsbot-executor", check=False)
            assert taken.returncode != 0 and exists(ct, grant_of(plan_id)), taken
            said = cli(ct, "reject", plan_id, "--reason", "not outside the window after all")
            assert f"rejected plan {plan_id}" in said.stdout
            ct.wait_for(lambda: not executor_may(ct, "restart", WEB), timeout=20, what="refused")
            before = invocation(ct, WEB)
            tried = restart_as_executor(ct, WEB)
            assert tried.returncode != 0 and "Access denied" in tried.stderr, tried
            assert invocation(ct, WEB) == before
            assert not exists(ct, grant_of(plan_id))
        finally:
            reject_quietly(ct, plan_id)


def test_an_expired_grant_is_refused_by_polkit_and_then_swept(ct: BootedSystemd) -> None:
    """`approve --now --ttl 20s` outside the window: once the approval expires polkit
    refuses the grant by itself (its JavaScript reads the clock), and once the apply has
    marked the plan EXPIRED the archive moves the dead approval and the sweep removes the
    grant's file: nothing is left in rules.d that a clock set back could wake."""
    with window_closed_now(ct):
        plan_id = granted_now(ct, "expires after --now", "20s")
        try:
            ct.wait_for(
                lambda: not executor_may(ct, "restart", WEB), timeout=60, what="grant expired"
            )
            assert restart_as_executor(ct, WEB).returncode != 0
            cli(ct, "apply", check=False)
            assert state_and_reason(ct, plan_id)[0] == "EXPIRED"
            ct.systemctl("start", "opsbot-archive.service")
            ct.wait_for(
                lambda: not exists(ct, grant_of(plan_id)),
                timeout=60,
                what="the expired grant swept",
            )
            assert exists(ct, f"/var/lib/opsbot-approvals/used/{plan_id}.approval")
        finally:
            reject_quietly(ct, plan_id)


def approver_sandbox(ct: BootedSystemd) -> list[str]:
    """``-p KEY=VALUE`` for every sandbox setting of the installed approver unit."""
    text = ct.run(["cat", APPROVER_UNIT]).stdout
    section, props = "", []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            if line.split("=", 1)[0] not in NOT_SANDBOX:
                props += ["-p", line]
    assert "ProtectSystem=strict" in props and "User=root" in props, props
    return props


#: What root's approver does with a reject link (approver_svc/service.py): plans.reject.
APPROVER_REJECTS = """
import sys
from pathlib import Path
from plans import PlanStore, reject, utcnow
reject(PlanStore(Path("/var/lib/opsbot")), Path("/var/lib/opsbot-approvals"), sys.argv[1],
       by="alice", now=utcnow(), reason="rejected by alice from the approval page")
"""


def test_a_reject_link_relayed_to_root_s_approver_ends_the_grant(ct: BootedSystemd) -> None:
    """A reject link goes through root's opsbot-approver, in its own sandbox (everything
    read-only but the store and the approvals): from an exact copy of that sandbox, its
    reject of an `approve --now` plan removes the grant too, and polkit refuses the
    executor's restart of demo-web."""
    with window_closed_now(ct):
        plan_id = granted_now(ct, "rejected from the phone after --now")
        try:
            done = ct.run(
                [
                    "systemd-run", "--quiet", "--wait", "--pipe", "--collect",
                    *approver_sandbox(ct),
                    "--", PYTHON, "-c", APPROVER_REJECTS.replace("$", "$$"), plan_id,
                ],
                check=False,
            )  # fmt: skip
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert state_and_reason(ct, plan_id)[0] == "REJECTED"
            assert not exists(ct, grant_of(plan_id))
            ct.wait_for(lambda: not executor_may(ct, "restart", WEB), timeout=20, what="refused")
            assert restart_as_executor(ct, WEB).returncode != 0
        finally:
            reject_quietly(ct, plan_id)
