"""Verbs the container attacks share: propose and approve a plan, apply by hand, read a
plan's state and reason, read the journal from a cursor, check the store holds
nothing the policy does not allow, and run code as the diagnose user inside its unit."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any

from testbed.container import BootedSystemd
from testbed.host import PYTHON, approve, invocation, opsbot as cli, restart_plan, submit

APPROVALS = "/var/lib/opsbot-approvals"
STATE = "/var/lib/opsbot"
CONFIG = "/etc/opsbot/opsbot.toml"
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"  # systemd's "Started unit" message id

__all__ = ["cli", "invocation"]


def propose(ct: BootedSystemd, unit: str, label: str, **expect: Any) -> str:
    """Submit (as the diagnose user) a restart of ``unit`` with a goal of its own; the id."""
    goal = f"attack: {label} {secrets.token_hex(3)}"
    reply = submit(ct, restart_plan(unit, goal=goal, **expect))
    assert reply["verdict"] == "ACCEPT" and not reply["duplicate"], reply
    return str(reply["plan_id"])


def approved(ct: BootedSystemd, unit: str, label: str, *ttl: str) -> str:
    plan_id = propose(ct, unit, label)
    approve(ct, plan_id, *(("--ttl", *ttl) if ttl else ()))
    return plan_id


def approval_path(plan_id: str) -> str:
    return f"{APPROVALS}/{plan_id}.approval"


def apply_now(ct: BootedSystemd) -> None:
    """Run opsbot-apply.service once, as the timer or the path unit would, and wait."""
    ct.systemctl("reset-failed", "opsbot-apply.service", check=False)
    ct.systemctl("start", "opsbot-apply.service")


def detail(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    shown = cli(ct, "show", plan_id, "--json")
    value: dict[str, Any] = json.loads(shown.stdout)
    return value


def state_and_reason(ct: BootedSystemd, plan_id: str) -> tuple[str, str]:
    summary = detail(ct, plan_id)["summary"]
    return str(summary["state"]), str(summary["reason"])


def cursor(ct: BootedSystemd) -> str:
    out = ct.run(["journalctl", "-n", "0", "--show-cursor", "--quiet"]).stdout
    for line in out.splitlines():
        if line.startswith("-- cursor: "):
            return line[len("-- cursor: ") :]
    raise AssertionError(f"no cursor in {out!r}")


def entries(ct: BootedSystemd, after: str, *matches: str) -> list[dict[str, Any]]:
    """Journal entries after the cursor ``after`` whose fields match ``matches``
    ("FIELD=value"). The matching is done here, not by journalctl: journalctl 252 given
    --after-cursor and a match skips the first matching entry after the cursor."""
    ct.run(["journalctl", "--sync"], check=False)
    out = ct.journal("-o", "json", f"--after-cursor={after}")
    wanted = [m.split("=", 1) for m in matches]
    found = []
    for line in out.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if all(entry.get(key) == value for key, value in wanted):
            found.append(entry)
    return found


def starts_of(ct: BootedSystemd, unit: str, after: str) -> int:
    """How many times systemd started ``unit`` since the cursor."""
    return len(entries(ct, after, "_PID=1", f"UNIT={unit}", f"MESSAGE_ID={UNIT_STARTED}"))


def reject_quietly(ct: BootedSystemd, *plan_ids: str) -> None:
    """Take plans a test left open out of later applies (final ones stay as they are)."""
    for plan_id in plan_ids:
        cli(ct, "reject", plan_id, "--reason", "attack test cleanup", check=False)


#: Run as root: move every stored plan naming one of argv's units into the store's
#: archive, as the retention does (plans.store.PlanStore.retire), owned as the store is.
RETIRE_PLANS_OF = """
import json, os, sys
from pathlib import Path
from plans.store import PlanStore
store = PlanStore(Path("/var/lib/opsbot"))
owner = os.stat(store.root)
units, moved = set(sys.argv[1:]), []
for plan_id in store.ids():
    try:
        named = set(store.verified_plan(store.load(plan_id)).units())
    except Exception:
        continue
    if not named & units:
        continue
    month = store.archive / f"{plan_id[:4]}-{plan_id[4:6]}"
    for made in (store.archive, month):
        if not made.exists():
            made.mkdir(mode=0o750)
            os.chown(made, owner.st_uid, owner.st_gid)
    os.rename(store.plans / f"{plan_id}.json", month / f"{plan_id}.json")
    status = store.status_dir / f"{plan_id}.json"
    if status.exists():
        os.rename(status, month / f"{plan_id}.status.json")
    moved.append(plan_id)
print(json.dumps(moved))
"""


def retire_plans_of(ct: BootedSystemd, *units: str) -> list[str]:
    """A test that allowed its own units for a while leaves no plan of them in the store
    once they are out of the allowlist again (the store audit of the other attacks holds
    every stored plan to today's policy): they are archived, as the retention would."""
    out = ct.run([PYTHON, "-c", RETIRE_PLANS_OF, *units]).stdout
    moved: list[str] = json.loads(out)
    return moved


def ruled(ct: BootedSystemd, plan_id: str) -> dict[str, Any]:
    """What the rules decided about ``plan_id``, as root's ``opsbot policy report`` says:
    the running approver asks them as the plan is stored (approver_svc/watch.py, and
    opsbot-rules.service is then skipped), a run of opsbot-rules that began once the plan
    was stored where it does not run."""
    ct.wait_for(
        lambda: (
            ct.systemctl("show", "-P", "ActiveState", "opsbot-rules.service").stdout.strip()
            != "activating"
        ),
        timeout=120,
        interval=0.2,
        what="opsbot-rules.service idle",
    )
    ct.systemctl("start", "opsbot-rules.service")

    def decided() -> dict[str, Any] | None:
        recent = json.loads(cli(ct, "policy", "report", "--json").stdout)["recent"]
        found = [d for d in recent if d["plan_id"] == plan_id]
        assert len(found) <= 1, found
        return dict(found[0]) if found else None

    decision = ct.wait_for(decided, timeout=30, interval=0.5, what=f"the rules on {plan_id}")
    assert decision is not None
    return decision


@contextlib.contextmanager
def edited_file(ct: BootedSystemd, path: str, text: str) -> Iterator[None]:
    """``path`` holds ``text`` inside the block, and its old content after."""
    old = ct.run(["cat", path]).stdout
    ct.write_file(path, text)
    try:
        yield
    finally:
        ct.write_file(path, old)


STORE_AUDIT = """
import json, os
from pathlib import Path
from shared_io.config import load_config
from plans.policy import policy_errors
from plans.store import PlanStore
from plans.tools import TOOLS
store = PlanStore(Path("/var/lib/opsbot"))
policy = load_config(Path("/etc/opsbot/opsbot.toml")).executor
bad, seen = [], 0
names = [n for n in (os.listdir(store.plans) if store.plans.exists() else [])
         if not n.startswith(".tmp-")]
for plan_id in store.ids():
    seen += 1
    plan = store.verified_plan(store.load(plan_id))
    for step in plan.steps:
        if step.tool not in TOOLS or not policy.allows(step.tool, step.args.unit):
            bad.append((plan_id, step.tool, step.args.unit))
print(json.dumps({"plans": seen, "files": len(names), "bad": bad}))
"""


def audit_store(ct: BootedSystemd) -> dict[str, Any]:
    """As root in the container: every stored plan loads, verifies, and uses only tools
    from the executor's table on units today's policy allows."""
    out = ct.run([PYTHON, "-c", STORE_AUDIT]).stdout
    result: dict[str, Any] = json.loads(out)
    return result


#: Run as root: move this process into a unit's cgroup (argv[1], its ControlGroup), drop
#: to the diagnose user's uid, gid and groups, then run the payload file argv[2] with the
#: arguments after it. journald then records what it logs as that unit's, from that uid.
IN_DIAGNOSE_UNIT = """
import grp, os, pwd, sys
cgroup, payload = sys.argv[1], sys.argv[2]
code = compile(open(payload).read(), payload, "exec")
for root in ("/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
    procs = root + cgroup + "/cgroup.procs"
    if os.path.exists(procs):
        with open(procs, "w") as moved:
            moved.write(str(os.getpid()))
user = pwd.getpwnam("opsbot-diagnose")
os.setgroups([g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem])
os.setgid(user.pw_gid)
os.setuid(user.pw_uid)
sys.argv = sys.argv[2:]
exec(code)
"""


def as_diagnose_in_its_unit(ct: BootedSystemd, payload: str, *args: str) -> str:
    """``payload`` run as the diagnose user from inside opsbot-diagnose.service; its
    output."""
    ct.systemctl("start", "opsbot-diagnose.service")
    cgroup = ct.systemctl("show", "-P", "ControlGroup", "opsbot-diagnose.service").stdout.strip()
    assert cgroup.endswith("/opsbot-diagnose.service"), cgroup
    ct.write_file("/srv/attack/in_unit.py", IN_DIAGNOSE_UNIT)
    ct.write_file("/srv/attack/payload.py", payload)
    argv = [PYTHON, "/srv/attack/in_unit.py", cgroup, "/srv/attack/payload.py", *args]
    done = ct.run(argv)
    ct.run(["journalctl", "--sync"])
    return done.stdout
