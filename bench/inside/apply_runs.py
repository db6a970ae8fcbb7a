"""Inside the container: restart three units with opsbot apply, Ansible and a bare loop,
interleaved, and print the wall times as JSON.

    apply_runs.py --runs N --ansible PATH UNIT UNIT UNIT

opsbot: a fresh plan each run (its goal carries the run number) submitted over the socket
as opsbot-diagnose, ``opsbot approve``d, then only ``opsbot apply`` is timed (as root: the
apply, then opsbot-verify's verdict, which it waits for), and separately ``systemctl start
opsbot-apply.service`` (the apply alone, what the timer and path start: the sandboxed
service, as opsbot-executor, authorised by polkit). Each opsbot run starts from an empty
plan history (:func:`reset_history`): every round restarts the same three units with the
same steps, which the restart budget, and the refusal of steps that ended UNRESOLVED (as
the next method's restarts make them), would refuse from the second round on. Every timed
run is checked afterwards: all three units have a new InvocationID, the plan ran. Between
rounds, with every plan ended, ``opsbot apply`` is timed with nothing approved (it must
say so and start no unit), beside ``python -c pass`` and ``systemctl is-active``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from _util import (
    ENV,
    EXECUTOR_SOCKET,
    as_user,
    exchange,
    invocation_ids,
    restart_plan,
    run,
    submit_line,
    timed,
)

PYTHON = "/opt/opsbot/venv/bin/python"
STATE = Path("/var/lib/opsbot")
OPSBOT = "/opt/opsbot/venv/bin/opsbot"
WORK = Path("/root/bench-ansible")

PLAYBOOK_HEAD = """\
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
"""
TASK = """\
    - name: restart {unit}
      ansible.builtin.systemd_service:
        name: {unit}
        state: restarted
"""


def submit(goal: str, units: list[str]) -> tuple[str, str]:
    """The plan id and sha256 of a fresh plan (approve binds that sha256: no terminal)."""
    line = submit_line(restart_plan(goal, units))
    reply = json.loads(as_user("opsbot-diagnose", lambda: exchange(EXECUTOR_SOCKET, line)))
    if reply.get("verdict") != "ACCEPT":
        raise RuntimeError(f"submit was not accepted: {reply}")
    return str(reply["plan_id"]), str(reply["sha256"])


def reset_history() -> None:
    """opsbot's plan history emptied: the executor and any verification stopped, every
    stored plan, status, consumed approval and verification marker removed (each is
    started again on the next request). Not timed."""
    run(["systemctl", "stop", "opsbot-executor.service", "opsbot-verify.service"])
    for name in ("plans", "status", "consumed", "verify"):
        directory = STATE / name
        for path in directory.iterdir() if directory.exists() else ():
            path.unlink()


def apply_starts() -> str:
    """When opsbot-apply.service last began a run (it changes with each start)."""
    said = run(["systemctl", "show", "-P", "ExecMainStartTimestampMonotonic", "opsbot-apply"])
    return str(said.stdout).strip()


def plan_state(plan_id: str) -> str:
    detail = json.loads(run([OPSBOT, "show", plan_id, "--json"]).stdout)
    return str(detail["summary"]["state"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--ansible", required=True)
    p.add_argument("units", nargs=3)
    args = p.parse_args()
    units: list[str] = args.units

    WORK.mkdir(exist_ok=True)
    (WORK / "inventory.ini").write_text(
        "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
    )
    (WORK / "restart.yml").write_text(PLAYBOOK_HEAD + "".join(TASK.format(unit=u) for u in units))
    ansible_env = dict(ENV, HOME="/root", ANSIBLE_NOCOLOR="1")
    loop = f"for u in {' '.join(units)}; do systemctl restart $u; done"
    counter = {"n": 0}

    def opsbot_apply() -> tuple[float, str]:
        reset_history()
        counter["n"] += 1
        plan_id, sha = submit(f"bench run {counter['n']}: restart three units", units)
        run([OPSBOT, "approve", plan_id, "--sha256", sha])
        elapsed, proc = timed([OPSBOT, "apply"])
        if "APPLIED" not in proc.stdout or "VERIFIED" not in proc.stdout:
            raise RuntimeError(f"opsbot apply did not apply {plan_id}: {proc.stdout}")
        return elapsed, plan_id

    def opsbot_apply_service() -> tuple[float, str]:
        reset_history()
        counter["n"] += 1
        plan_id, sha = submit(f"bench run {counter['n']}: restart three units (service)", units)
        run([OPSBOT, "approve", plan_id, "--sha256", sha])
        elapsed, _ = timed(["systemctl", "start", "opsbot-apply.service"])
        state = plan_state(plan_id)
        if state not in ("APPLIED", "VERIFIED", "UNRESOLVED"):
            raise RuntimeError(f"opsbot-apply.service left {plan_id} {state}")
        return elapsed, plan_id

    def ansible() -> tuple[float, str]:
        elapsed, _ = timed(
            [args.ansible, "-i", str(WORK / "inventory.ini"), str(WORK / "restart.yml")],
            env=ansible_env,
        )
        return elapsed, ""

    def bare() -> tuple[float, str]:
        elapsed, _ = timed(["bash", "-c", loop])
        return elapsed, ""

    methods = {
        "opsbot_apply": opsbot_apply,
        "opsbot_apply_service": opsbot_apply_service,
        "ansible": ansible,
        "bare_loop": bare,
    }
    # What the CLI's own start-up costs, for reading the opsbot figure (not restarts), and
    # `opsbot apply` with nothing approved (every plan of the rounds has ended) against
    # the floors of the same run: the interpreter, and systemd's own quickest answer.
    probes = {
        "python_startup": [PYTHON, "-c", "pass"],
        "systemctl_is_active": ["systemctl", "is-active", "--quiet", units[0]],
        "import_opsbot_cli": [PYTHON, "-c", "import opsbot_cli.main"],
        "opsbot_apply_nothing_open": [OPSBOT, "apply"],
    }
    times: dict[str, list[float]] = {name: [] for name in [*methods, *probes]}
    problems: list[str] = []
    names = list(methods)
    for i in range(-1, args.runs):  # run -1 warms every path up and is not counted
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            before = invocation_ids(units)
            elapsed, _ = methods[name]()
            after = invocation_ids(units)
            if any(a == b for a, b in zip(before, after, strict=True)) or len(after) != 3:
                problems.append(f"run {i} {name}: not every unit was restarted")
            if i >= 0:
                times[name].append(elapsed)
        for name, argv in probes.items():
            nothing = name == "opsbot_apply_nothing_open"
            starts = apply_starts() if nothing else ""
            elapsed, proc = timed(argv)
            if nothing and ("nothing approved" not in proc.stdout or apply_starts() != starts):
                problems.append(f"run {i}: opsbot apply with nothing approved started the unit")
            if i >= 0:
                times[name].append(elapsed)
    plans = len(os.listdir(STATE / "plans"))
    print(
        json.dumps(
            {
                "times": times,
                "problems": problems,
                "plans_in_store": plans,
                "ansible_version": run([args.ansible, "--version"]).stdout.splitlines()[0],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
