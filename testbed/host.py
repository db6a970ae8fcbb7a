"""opsbot installed in a booted container, and the small verbs tests, the demo and the
benchmarks use on it: install it as an operator would, talk to its sockets as some user,
run its console, read a plan's state, wait for an apply, start the scripted model.

Usage::

    with BootedSystemd() as ct:
        install_opsbot(ct, TEST_CONFIG)
        reply = submit(ct, restart_plan("demo-web.service"))
        wait_state(ct, reply["plan_id"], STEPS_RAN)
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from testbed.container import REPO_MOUNT, BootedSystemd

#: The checkout, as the container sees it (read-only).
REPO = REPO_MOUNT
#: The venv opsbot runs from: on the host's /, so in every container too.
PYTHON = "/opt/opsbot/venv/bin/python"
OPSBOT = "/opt/opsbot/venv/bin/opsbot"
EXECUTOR_SOCKET = "/run/opsbot/executor.sock"
DIAGNOSE_SOCKET = "/run/opsbot/diagnose.sock"
#: The units opsbot may act on in these tests; anything else must stay out of reach.
TEST_CONFIG = """\
[executor]
step_timeout_seconds = 30
approval_ttl_seconds = 600
# The tests restart the same demo units again and again within minutes; the budget's own
# test lowers it.
restart_budget = 100
settle_seconds = 3
# The suite leaves hundreds of plans waiting on one host within a day; the flood's own
# test lowers these.
max_waiting_plans_per_submitter = 1000
max_waiting_plans = 5000

[executor.allow]
restart_unit = ["demo-web.service", "demo-db.service"]
start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service"]
reset_failed_unit = ["demo-web.service"]

[diagnose]
# Not allowlisted, but operators may have it diagnosed (tests/attacks: the executor must
# refuse what the diagnosis of it proposes).
scope = ["demo-evil.service"]
"""
DEMO_UNIT = """\
[Unit]
Description=opsbot test target {name}

[Service]
ExecStart=/bin/sleep infinity
"""
DEMO_UNITS = ("demo-web", "demo-db", "demo-other")
#: The states of a plan whose steps all ran: APPLIED until opsbot-verify has looked, then
#: VERIFIED or UNRESOLVED (within settle_seconds, 3 s here, of the last step).
STEPS_RAN = frozenset({"APPLIED", "VERIFIED", "UNRESOLVED"})
#: The daemons an upgrade restarts where their code changed.
DAEMONS = (
    "opsbot-executor.service",
    "opsbot-diagnose.service",
    "opsbot-approver.service",
    "opsbot-web.service",
)
#: Holds an apply before it runs its plan until APPLY_GO exists (60 s at most), so that one
#: runs while opsbot is upgraded or removed, for as long as the test says.
SLOW_APPLY = "/etc/systemd/system/opsbot-apply.service.d/90-test-slow.conf"
APPLY_GO = "/run/test-apply-go"
SLOW_APPLY_TEXT = f"""\
[Service]
ExecStartPre=/bin/sh -c 'i=0; while [ ! -e {APPLY_GO} ] && [ $$i -lt 300 ]; do \\
    sleep 0.2; i=$$((i+1)); done'
"""
#: A plan that will not change by itself any more (but for APPLIED's verification).
SETTLED = STEPS_RAN | {"FAILED", "STALE", "EXPIRED", "REJECTED", "INTERRUPTED"}


def install_opsbot(ct: BootedSystemd, config: str | None = None) -> None:
    """opsbot installed as an operator would: ``packaging/install.sh --offline --enable``
    (units, users, directories, the polkit rule, the sockets, timer and path enabled),
    with ``config`` as /etc/opsbot/opsbot.toml when given."""
    if config is not None:
        ct.write_file("/etc/opsbot/opsbot.toml", config)
    ct.run(["bash", f"{REPO}/packaging/install.sh", "--offline", "--enable"], timeout=300)


def install_demo_units(ct: BootedSystemd) -> None:
    """demo-web, demo-db and demo-other: idle services for opsbot to act on, started."""
    for name in DEMO_UNITS:
        ct.write_file(f"/etc/systemd/system/{name}.service", DEMO_UNIT.format(name=name))
    ct.systemctl("daemon-reload")
    ct.systemctl("start", *(f"{name}.service" for name in DEMO_UNITS))


def send_raw(
    ct: BootedSystemd,
    data: bytes | str,
    user: str = "opsbot-diagnose",
    socket: str = EXECUTOR_SOCKET,
) -> tuple[int, str, str]:
    """Send bytes to a socket as ``user`` and read every line back until it closes:
    (exit status, stdout, stderr) of testbed/inside/socket_client.py (3: refused)."""
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    proc = ct.run(
        [PYTHON, f"{REPO}/testbed/inside/socket_client.py", socket],
        user=user,
        input=text,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def request(
    ct: BootedSystemd, message: dict[str, Any], user: str = "opsbot-diagnose"
) -> dict[str, Any]:
    """One request to the executor socket, one parsed reply."""
    status, out, err = send_raw(ct, json.dumps(message) + "\n", user)
    assert status == 0, f"socket client failed ({status}): {err}"
    lines = out.splitlines()
    assert lines, f"no reply; stderr: {err}"
    reply: dict[str, Any] = json.loads(lines[0])
    return reply


def submit(
    ct: BootedSystemd, plan: dict[str, Any], user: str = "opsbot-diagnose"
) -> dict[str, Any]:
    return request(ct, {"v": 1, "op": "submit", "plan": plan}, user)


def restart_plan(unit: str, goal: str | None = None, **expect: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "tool": "restart_unit",
        "args": {"unit": unit},
        "reason": f"{unit} needs a restart",
    }
    if expect:
        step["expect"] = expect
    return {"goal": goal or f"restart {unit}", "steps": [step]}


def invocation(ct: BootedSystemd, unit: str) -> str:
    return ct.run(["systemctl", "show", "-P", "InvocationID", unit]).stdout.strip()


def opsbot(
    ct: BootedSystemd,
    *args: str,
    check: bool = True,
    user: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """The console, ``opsbot ARGS``, as root or as ``user``."""
    return ct.run([OPSBOT, *args], check=check, user=user, timeout=timeout)


def pause_applies(ct: BootedSystemd) -> None:
    """Stop opsbot-apply.path and .timer, and wait for a run they started to end: a
    ``systemctl start opsbot-apply.service`` while one runs joins that run, which may
    have read the plans before the test's approval, instead of starting another."""
    ct.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer")
    ct.wait_for(
        lambda: (
            ct.systemctl("show", "-P", "ActiveState", "opsbot-apply.service").stdout.strip()
            in ("inactive", "failed")
        ),
        timeout=120,
        interval=0.2,
        what="opsbot-apply.service idle",
    )


def resume_applies(ct: BootedSystemd) -> None:
    ct.systemctl("start", "opsbot-apply.path", "opsbot-apply.timer")


#: ``opsbot diagnose`` ended with a verdict: no change (0), a plan waits (3), a human must
#: act (4), or the executor refused the plan (5) (shared_io/exit_codes.py).
VERDICT_STATUSES = frozenset({0, 3, 4, 5})


def diagnose(
    ct: BootedSystemd, *args: str, user: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``opsbot diagnose ARGS``, which must end in a verdict (any of VERDICT_STATUSES):
    the exit status says which kind, the tests read the verdict itself."""
    done = ct.run([OPSBOT, "diagnose", *args], check=False, user=user, timeout=timeout)
    assert done.returncode in VERDICT_STATUSES, (
        f"opsbot diagnose {' '.join(args)} exited {done.returncode}: "
        f"{done.stdout[-2000:]} {done.stderr[-2000:]}"
    )
    return done


def approve(
    ct: BootedSystemd, plan_id: str, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``opsbot approve ID --sha256 PREFIX ARGS`` as root, with the sha256 ``opsbot show
    --json`` reports: what an operator who reviewed the plan runs from a script (approve
    asks on a terminal; without one it binds only a sha256 given)."""
    sha = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)["summary"]["sha256"]
    return opsbot(ct, "approve", plan_id, "--sha256", str(sha)[:16], *args, check=check)


def plan_state(ct: BootedSystemd, plan_id: str) -> str:
    detail = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)
    return str(detail["summary"]["state"])


def wait_state(ct: BootedSystemd, plan_id: str, states: set[str], timeout: float = 60) -> str:
    """Until ``plan_id`` is in one of ``states``; TimeoutError names the state it stayed in,
    with its reason, and what the apply and verify units did meanwhile."""
    seen: list[str] = []

    def settled() -> str:
        detail = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)["summary"]
        seen[:] = [f"{detail['state']} ({detail.get('reason') or 'no reason'})"]
        return str(detail["state"]) if detail["state"] in states else ""

    try:
        return ct.wait_for(
            settled, timeout=timeout, interval=0.5, what=f"plan {plan_id} in {sorted(states)}"
        )
    except TimeoutError as exc:
        units = ct.run(
            ["journalctl", "--no-pager", "-n", "40", "-u", "opsbot-apply.service", "-u"]
            + ["opsbot-verify.service", "-u", "opsbot-apply.path", "-u", "opsbot-verify.path"],
            check=False,
        ).stdout
        raise TimeoutError(f"{exc}; it stayed {seen[0] if seen else '?'}\n{units}") from exc


LLM_PORT = 18080
LLM_URL = f"http://127.0.0.1:{LLM_PORT}/v1"


def start_scripted_model(
    ct: BootedSystemd, script: dict[str, Any], record: str | None = None
) -> None:
    """(Re)start the local OpenAI-compatible server in the container as the transient
    unit scripted-llm.service, replaying ``script``; wait until it answers."""
    ct.systemctl("stop", "scripted-llm.service", check=False)
    ct.systemctl("reset-failed", "scripted-llm.service", check=False)
    ct.write_file("/srv/llm/script.json", json.dumps(script))
    argv = [
        "systemd-run",
        "--unit=scripted-llm",
        "-p",
        f"Environment=PYTHONPATH={REPO}",
        PYTHON,
        "-m",
        "testbed.scripted_openai",
        "--script",
        "/srv/llm/script.json",
        "--port",
        str(LLM_PORT),
    ]
    if record is not None:
        argv += ["--record", record]
    ct.run(argv)

    def answers() -> bool:
        probe = ct.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "2",
                f"{LLM_URL}/models",
            ],
            check=False,
        )
        return probe.stdout.strip() == "200"

    ct.wait_for(answers, timeout=20, interval=0.2, what="scripted model listening")


_READ_TOOL_CALL = """
import json
from diagnose_svc.errors import DiagnoseError
from diagnose_svc.tools import READ_TOOLS, ToolContext
from shared_schema import DiagnoseSettings
tool = READ_TOOLS[{tool!r}]
try:
    out = tool(tool.parse_args({args!r}), ToolContext(settings=DiagnoseSettings()))
    print(json.dumps(out.model_dump(mode="json")))
except DiagnoseError as exc:
    print(json.dumps({{"error": exc.message}}))
"""


def read_tool_code(tool: str, args: dict[str, Any]) -> str:
    """A Python program that runs one read tool and prints its answer as JSON (or
    {"error": message})."""
    return _READ_TOOL_CALL.format(tool=tool, args=args)


def call_read_tool(
    ct: BootedSystemd, tool: str, args: dict[str, Any], user: str | None = None
) -> Any:
    """One diagnosis read tool run inside the container (as ``user``) from the checkout:
    its output as JSON, or {"error": message} for a tool error."""
    result = ct.run(
        [PYTHON, "-c", read_tool_code(tool, args)],
        user=user,
        env={"PYTHONPATH": REPO_MOUNT},
        timeout=60,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
