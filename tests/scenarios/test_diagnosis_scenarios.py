"""opsbot at 3 a.m.: each fault injected into the real stack, diagnosed by opsbot, judged.

For every scenario the verdict is compared with what an experienced operator would do,
and any harmful step fails the test. Plans are carried on: approved, applied by the path
unit, and then health must hold for a sustained period and `opsbot audit` must tell the
story from diagnosis to last step. The embedded policy runs on the default stack and on a
renamed one (api.service on another port) to show nothing is keyed to names. A plan is
judged step by step, each step's precondition included; a note by its structured cause.

The OpenAI-compatible policy runs against a local scripted server whose script is made
from the fault's own answer: those runs cannot be wrong about the fault, so they check
plumbing only (the verdict that comes out is the one the model sent, through the real
wire format, the loop and the executor's validation) and are reported apart, never in
verdict accuracy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.faults import INJECTORS, Fault
from testbed.host import LLM_PORT, diagnose as run_diagnose, start_scripted_model
from testbed.observe import http_probe
from testbed.stack import DEFAULT_STACK, Stack, reset, wait_healthy
from tests.scenarios.report import RECORDS, ScenarioRecord

HEALTH_HOLD_SECONDS = 6.0
OPENAI_DROPIN = f"""\
[Service]
Environment=LLM_API_URL=http://127.0.0.1:{LLM_PORT}/v1 LLM_MODEL=scripted-model
LoadCredential=llm_api_key:/etc/opsbot/llm_api_key
"""


def _cli(ct: BootedSystemd, *args: str, check: bool = True) -> Any:
    return ct.run(["/opt/opsbot/venv/bin/opsbot", *args], check=check, timeout=120)


def _configure(ct: BootedSystemd, stack: Stack, policy: str) -> None:
    config = stack.opsbot_config()
    dropin = "/etc/systemd/system/opsbot-diagnose.service.d/50-llm.conf"
    if policy == "openai":
        config += '\n[diagnose.model]\nkind = "openai"\n'
        ct.write_file(dropin, OPENAI_DROPIN)
    else:
        ct.run(["rm", "-f", dropin])
    ct.write_file("/etc/opsbot/opsbot.toml", config)
    _cli(ct, "polkit-rule", "--write")
    ct.systemctl("daemon-reload")
    # Both daemons read the config at start: stop them; their sockets start them again.
    ct.systemctl("stop", "opsbot-executor.service", "opsbot-diagnose.service")


@pytest.fixture(scope="session", params=["embedded", "openai"])
def policy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def configured(
    opsbot_installed: BootedSystemd, installed_stack: Stack, policy: str
) -> Iterator[tuple[BootedSystemd, Stack, str]]:
    """opsbot configured for this stack and policy, stack healthy, no plan left open."""
    _configure(opsbot_installed, installed_stack, policy)
    yield opsbot_installed, installed_stack, policy
    for plan in json.loads(_cli(opsbot_installed, "plans", "--json").stdout):
        if plan["state"] in ("PROPOSED", "APPROVED"):
            _cli(opsbot_installed, "reject", plan["plan_id"], "--reason", "test cleanup")


def _stack_name(stack: Stack) -> str:
    return "default" if stack == DEFAULT_STACK else "renamed"


def _script_for(fault: Fault, unit: str) -> dict[str, Any]:
    """Scripted model turns that read the evidence and send the fault's own answer."""
    turns: list[dict[str, Any]] = []
    units = [s.unit for s in fault.expected_steps] or [unit]
    for u in dict.fromkeys(units):
        turns.append({"tool": "read_unit_status", "arguments": {"unit": u}})
    if fault.expected_kind == "plan":
        plan = {
            "goal": f"scripted answer to scenario {fault.scenario}",
            "steps": [
                {"tool": s.tools[0], "args": {"unit": s.unit}, "reason": "scripted"}
                for s in fault.expected_steps
            ],
        }
        turns.append({"tool": "submit_plan", "arguments": {"plan": plan}})
    else:
        cause = {"kind": fault.cause, "unit": fault.cause_unit or None, "fact": "scripted"}
        text = "scripted: " + "; ".join(fault.note_must_contain or (fault.cause,))
        turns.append({"tool": "final_note", "arguments": {"text": text, "cause": cause}})
    return {"turns": turns}


def _plumbing_problems(fault: Fault, verdict: dict[str, Any]) -> list[str]:
    """What did not come through of what the scripted model sent."""
    if verdict["kind"] != fault.expected_kind:
        return [f"the model sent a {fault.expected_kind}, the verdict is a {verdict['kind']}"]
    if verdict["kind"] == "plan":
        sent = [(s.tools[0], s.unit) for s in fault.expected_steps]
        got = [(s["tool"], s["args"]["unit"]) for s in verdict["plan"]["steps"]]
        return [] if got == sent else [f"the model sent {sent}, the plan has {got}"]
    cause = verdict.get("cause") or {}
    if verdict.get("ended_by") != "final_note" or cause.get("kind") != fault.cause:
        return [f"the model sent a {fault.cause} note; got {verdict.get('ended_by')} {cause}"]
    return []


def _diagnose(ct: BootedSystemd, unit: str, symptom: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    out = run_diagnose(ct, unit, "--symptom", symptom, "--json").stdout
    return json.loads(out)["verdict"], time.monotonic() - started


def _health_holds(ct: BootedSystemd, stack: Stack, seconds: float) -> float:
    """Probe both health endpoints every half second for ``seconds``; all must be 200."""
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        for url in (stack.proxy_health_url, stack.app_health_url):
            status = http_probe(ct, url).status
            assert status == 200, f"{url} answered {status} after the apply"
        time.sleep(0.5)
    return time.monotonic() - started


@pytest.mark.parametrize("scenario", [i + 1 for i in range(len(INJECTORS))])
def test_scenario(configured: tuple[BootedSystemd, Stack, str], scenario: int) -> None:
    """Inject the fault, ask opsbot, judge the verdict; carry a plan through to health."""
    ct, stack, policy = configured
    reset(ct, stack)
    fault = INJECTORS[scenario - 1](ct, stack)
    unit = fault.asked_about
    if policy == "openai":
        start_scripted_model(ct, _script_for(fault, unit))
    verdict, seconds = _diagnose(ct, unit, fault.symptom)
    steps = verdict["plan"]["steps"] if verdict["kind"] == "plan" else []
    pairs = [(s["tool"], s["args"]["unit"]) for s in steps]
    if policy == "openai":
        problems = _plumbing_problems(fault, verdict)
    elif verdict["kind"] == "plan":
        problems = fault.plan_problems(steps)
    else:
        problems = fault.note_problems(verdict)
    harm = fault.harm_in(pairs)
    record = ScenarioRecord(
        policy=policy,
        stack=_stack_name(stack),
        scenario=scenario,
        name=fault.name,
        unit=unit,
        verdict=verdict["kind"] + (f": {verdict['cause']['kind']}" if verdict.get("cause") else ""),
        expected=fault.expected_kind + (f": {fault.cause}" if fault.cause else ""),
        matches=not problems,
        harmful=bool(harm),
        steps_used=verdict["steps_used"],
        tokens=verdict["tokens"],
        seconds_to_verdict=round(seconds, 2),
        plan_steps=[f"{t} {u}" for t, u in pairs],
        problems=problems,
        check="plumbing" if policy == "openai" else "verdict",
    )
    RECORDS.append(record)
    assert not harm, f"{harm}\nverdict: {json.dumps(verdict, indent=2)[:4000]}"
    assert not problems, f"{problems}\nverdict: {json.dumps(verdict, indent=2)[:3000]}"
    if verdict["kind"] != "plan" or policy != "embedded":
        return

    plan_id = verdict["plan_id"]
    _cli(ct, "approve", plan_id, "--sha256", verdict["sha256"])
    state = ct.wait_for(
        lambda: (
            (s := json.loads(_cli(ct, "show", plan_id, "--json").stdout)["summary"]["state"])
            in ("VERIFIED", "UNRESOLVED", "FAILED", "STALE", "EXPIRED")
            and s
        ),
        timeout=90,
        interval=0.5,
        what=f"plan {plan_id} applied",
    )
    record.applied = state
    assert state == "VERIFIED", _cli(ct, "show", plan_id).stdout
    wait_healthy(ct, stack)
    record.health_held_seconds = round(_health_holds(ct, stack, HEALTH_HOLD_SECONDS), 1)

    audit = json.loads(_cli(ct, "audit", plan_id, "--json").stdout)
    events = [e["event"] for e in audit["entries"]]
    assert events[0] == "diagnose.started", events  # the story starts with the diagnosis
    for needed in (
        "diagnose.step",
        "diagnose.finished",
        "plan.accepted",
        "plan.approved",
        "approval.consumed",
        "step.finished",
        "plan.applied",
        "plan.verified",
    ):
        assert needed in events, f"{needed} missing from opsbot audit: {events}"
    last_steps = [e for e in audit["entries"] if e["event"] == "step.finished"]
    assert len(last_steps) == len(verdict["plan"]["steps"])


def test_plan_for_a_fault_that_healed_meanwhile_is_stale(
    configured: tuple[BootedSystemd, Stack, str],
) -> None:
    """The app is killed and diagnosed; before approval someone starts it by hand. The
    approved plan's precondition no longer holds: STALE, and nothing runs."""
    ct, stack, policy = configured
    if policy != "embedded":
        pytest.skip("one policy is enough to prove the apply-time check")
    reset(ct, stack)
    fault = INJECTORS[1](ct, stack)
    verdict, _ = _diagnose(ct, stack.proxy_unit, fault.symptom)
    assert verdict["kind"] == "plan", verdict
    ct.systemctl("start", stack.app_unit)
    healed = ct.systemctl("show", "-P", "InvocationID", stack.app_unit).stdout.strip()
    _cli(ct, "approve", verdict["plan_id"], "--sha256", verdict["sha256"])
    state = ct.wait_for(
        lambda: (
            (
                s := json.loads(_cli(ct, "show", verdict["plan_id"], "--json").stdout)["summary"][
                    "state"
                ]
            )
            in ("APPLIED", "FAILED", "STALE")
            and s
        ),
        timeout=60,
        interval=0.5,
        what="plan settled",
    )
    assert state == "STALE"
    assert ct.systemctl("show", "-P", "InvocationID", stack.app_unit).stdout.strip() == healed
