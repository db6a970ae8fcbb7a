"""Small verbs the integration tests share: talk to the executor socket as some user,
read a unit's invocation, read a plan's state, wait for the apply to settle."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.conftest import EXECUTOR_SOCKET, PYTHON, REPO
from tests.integration.container import BootedSystemd


def send_raw(
    ct: BootedSystemd, data: bytes | str, user: str = "opsbot-diagnose"
) -> tuple[int, str, str]:
    """Send bytes to the executor socket as ``user``: (exit status, stdout, stderr)."""
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    proc = ct.run(
        [PYTHON, f"{REPO}/tests/integration/sock_client.py", EXECUTOR_SOCKET],
        user=user,
        input=text,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def request(
    ct: BootedSystemd, message: dict[str, Any], user: str = "opsbot-diagnose"
) -> dict[str, Any]:
    """One request, one parsed reply."""
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


def opsbot(ct: BootedSystemd, *args: str, check: bool = True, user: str | None = None):  # type: ignore[no-untyped-def]
    return ct.run(["/opt/opsbot/venv/bin/opsbot", *args], check=check, user=user)


def plan_state(ct: BootedSystemd, plan_id: str) -> str:
    detail = json.loads(opsbot(ct, "show", plan_id, "--json").stdout)
    return str(detail["summary"]["state"])


def wait_state(ct: BootedSystemd, plan_id: str, states: set[str], timeout: float = 60) -> str:
    return ct.wait_for(
        lambda: (s := plan_state(ct, plan_id)) in states and s,
        timeout=timeout,
        interval=0.5,
        what=f"plan {plan_id} in {sorted(states)}",
    )


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
        "tests.support.scripted_openai",
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
