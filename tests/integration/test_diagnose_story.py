"""The diagnosis half on a real systemd: an operator asks why a unit is down, the
diagnosis (unprivileged, read-only) proposes a plan, and the plan waits at the executor.

Also: a watched unit's failure starts a diagnosis by itself; the OpenAI-compatible
policy works against a local server speaking the real wire format; and the diagnose
service can neither restart a unit nor reach the executor's code or state.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from testbed.container import BootedSystemd
from testbed.host import LLM_URL, PYTHON, diagnose, opsbot as cli, plan_state, start_scripted_model


def _kill(ct: BootedSystemd, unit: str) -> None:
    # --kill-who=main: systemd 252 in a container sometimes reports EIO signalling the
    # (empty) rest of the cgroup after the main process is already dead.
    ct.systemctl("kill", "--kill-who=main", "-s", "KILL", unit)
    ct.wait_for(
        lambda: ct.run(["systemctl", "is-failed", unit], check=False).returncode == 0,
        timeout=15,
        what=f"{unit} failed",
    )


def _recover(ct: BootedSystemd, unit: str) -> None:
    ct.systemctl("reset-failed", unit, check=False)
    ct.systemctl("start", unit)


def test_operator_asks_and_a_crashed_service_gets_a_proposed_plan(opsbot: BootedSystemd) -> None:
    """`opsbot diagnose` by an operator: steps stream live, the embedded policy proposes to
    start the killed unit again (it is failed, not running), and the executor holds it as
    PROPOSED (nothing ran)."""
    ct = opsbot
    _kill(ct, "demo-db.service")
    try:
        out = diagnose(ct, "demo-db", "--symptom", "db is down", user="olivia").stdout
        assert "step 1 [policy] read_unit_status" in out
        match = re.search(r"plan (\S+) proposed", out)
        assert match, out
        assert "systemctl start --no-ask-password -- demo-db.service" in out
        plan_id = match.group(1)
        assert plan_state(ct, plan_id) == "PROPOSED"
        assert ct.run(["systemctl", "is-failed", "demo-db.service"], check=False).returncode == 0
        result = json.loads(diagnose(ct, "demo-db", "--json", user="olivia").stdout)
        assert result["verdict"]["kind"] == "plan"
        assert result["verdict"]["plan_id"] == plan_id  # same plan, same open id
        assert [e["event"] for e in result["events"]][0] == "diagnose.started"
        cli(ct, "reject", plan_id, "--reason", "test cleanup")
    finally:
        _recover(ct, "demo-db.service")


def test_watched_unit_failure_starts_a_diagnosis(opsbot: BootedSystemd) -> None:
    """`opsbot watch` adds OnFailure=; when the unit fails, opsbot-onfailure@ diagnoses it
    and a plan for it appears; `opsbot unwatch` removes the drop-in again."""
    ct = opsbot
    cli(ct, "watch", "demo-web.service")
    try:
        # One .service, not two (issue 13, item 9: it read @demo-web.service.service).
        assert (
            ct.systemctl("show", "-P", "OnFailure", "demo-web.service").stdout.strip()
            == "opsbot-onfailure@demo-web.service"
        )
        since = time.time()
        _kill(ct, "demo-web.service")

        def proposed() -> dict[str, Any] | None:
            plans = json.loads(cli(ct, "plans", "--json").stdout)
            for p in plans:
                submitted = p["submitted_at"]
                if (
                    "demo-web.service" in p["units"]
                    and p["state"] == "PROPOSED"
                    and _epoch(submitted) >= since - 1
                ):
                    return p  # type: ignore[no-any-return]
            return None

        plan = ct.wait_for(proposed, timeout=60, interval=1, what="a plan from OnFailure=")
        log = ct.journal("-u", "opsbot-onfailure@demo-web.service", "-o", "cat")
        assert "diagnose.finished" in log
        cli(ct, "reject", plan["plan_id"])
    finally:
        cli(ct, "unwatch", "demo-web.service")
        _recover(ct, "demo-web.service")
    assert ct.systemctl("show", "-P", "OnFailure", "demo-web.service").stdout.strip() == ""


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def test_openai_policy_against_a_local_scripted_server(opsbot: BootedSystemd) -> None:
    """With kind = "openai", the diagnose user's run talks to an OpenAI-compatible server
    (here a local one replaying scripted turns in the real wire format): tool calls run,
    the submitted plan reaches the executor, and the key travels only as a Bearer header."""
    ct = opsbot
    script = {
        "turns": [
            {"tool": "read_unit_status", "arguments": {"unit": "demo-db.service"}},
            {
                "tool": "submit_plan",
                "arguments": {
                    "plan": {
                        "goal": "bring demo-db back (scripted model)",
                        "steps": [
                            {
                                "tool": "restart_unit",
                                "args": {"unit": "demo-db.service"},
                                "expect": {"active_state": ["failed"]},
                                "reason": "killed by SIGKILL",
                            }
                        ],
                    }
                },
            },
        ]
    }
    ct.write_file("/etc/opsbot/openai.toml", '[diagnose.model]\nkind = "openai"\n')
    start_scripted_model(ct, script, record="/srv/llm/requests.jsonl")
    _kill(ct, "demo-db.service")
    try:
        run = ct.run(
            [
                "env",
                f"LLM_API_URL={LLM_URL}",
                "LLM_MODEL=scripted",
                "LLM_API_KEY=sk-test-secret-123",
                "/opt/opsbot/venv/bin/opsbot-diagnose",
                "run",
                "--json",
                "--config",
                "/etc/opsbot/openai.toml",
                "demo-db.service",
            ],
            user="opsbot-diagnose",
            check=False,
        )
        assert run.returncode == 0, run.stderr
        verdict = json.loads(run.stdout)
        assert verdict["kind"] == "plan", verdict
        assert verdict["plan"]["goal"] == "bring demo-db back (scripted model)"
        assert plan_state(ct, verdict["plan_id"]) == "PROPOSED"
        assert "sk-test-secret-123" not in run.stdout + run.stderr
        requests = [
            json.loads(line)
            for line in ct.run(["cat", "/srv/llm/requests.jsonl"]).stdout.splitlines()
        ]
        chats = [r for r in requests if r["path"].endswith("/chat/completions")]
        assert len(chats) == 2
        assert chats[0]["headers"]["authorization"] == "Bearer sk-test-secret-123"
        tools = {t["function"]["name"] for t in chats[0]["body"]["tools"]}
        assert {"read_unit_status", "submit_plan", "final_note"} <= tools
        assert not tools & {"restart_unit", "stop_unit"}
        cli(ct, "reject", verdict["plan_id"])
    finally:
        ct.systemctl("stop", "scripted-llm", check=False)
        _recover(ct, "demo-db.service")


def _in_diagnose_sandbox(ct: BootedSystemd, *argv: str) -> Any:
    """Run argv inside the running opsbot-diagnose.service's mount namespace, as its user."""
    ct.systemctl("start", "opsbot-diagnose.service")
    pid = ct.systemctl("show", "-P", "MainPID", "opsbot-diagnose.service").stdout.strip()
    uid = ct.run(["id", "-u", "opsbot-diagnose"]).stdout.strip()
    gid = ct.run(["id", "-g", "opsbot-diagnose"]).stdout.strip()
    return ct.run(["nsenter", "-t", pid, "-m", "-S", uid, "-G", gid, *argv], check=False)


def test_diagnose_cannot_restart_or_reach_the_executor(opsbot: BootedSystemd) -> None:
    """As the diagnose user, systemd refuses a restart (polkit says no); inside the
    diagnose unit's sandbox the executor's code cannot be imported and its state and
    approvals cannot be read."""
    ct = opsbot
    denied = ct.run(
        ["systemctl", "restart", "demo-web.service"], user="opsbot-diagnose", check=False
    )
    assert denied.returncode != 0
    # opsbot's polkit rule answers NO for its users (not "ask for a password").
    assert "Access denied" in denied.stderr, denied.stderr

    ok = _in_diagnose_sandbox(ct, PYTHON, "-c", "import diagnose_svc.runtime; print('ok')")
    assert ok.stdout.strip() == "ok", ok.stderr
    blocked = _in_diagnose_sandbox(ct, PYTHON, "-c", "import executor_svc.apply")
    assert blocked.returncode != 0
    assert "executor_svc" in blocked.stderr
    for path in ("/var/lib/opsbot", "/var/lib/opsbot-approvals"):
        listing = _in_diagnose_sandbox(ct, "ls", path)
        assert listing.returncode != 0 and "Permission denied" in listing.stderr
    write = _in_diagnose_sandbox(ct, "touch", "/var/lib/opsbot-approvals/x.approval")
    assert write.returncode != 0


def test_diagnose_units_verify_and_exposure_is_at_most_2(opsbot: BootedSystemd) -> None:
    """systemd-analyze verify is clean for the diagnose units; exposure <= 2.0."""
    units = [
        f"/etc/systemd/system/{u}"
        for u in (
            "opsbot-diagnose.socket",
            "opsbot-diagnose.service",
            "opsbot-onfailure@.service",
            "opsbot-verify.service",
            "opsbot-verify.path",
            "opsbot-verify.timer",
        )
    ]
    verify = opsbot.run(["systemd-analyze", "verify", *units], check=False)
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr
    out = opsbot.run(["systemd-analyze", "security", "opsbot-diagnose.service"]).stdout
    score = float(re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out).group(1))  # type: ignore[union-attr]
    assert score <= 2.0, out
