"""Inside the container: set up failing services, then diagnose each with opsbot's loop
(run_diagnosis + OpenAICompatPolicy) and with the naive loop (bench.naive_react), both
against the scripted OpenAI-compatible server replaying the same turns, over the real read
tools. Then the runtime's own overhead per step. Prints JSON.

    cost_runs.py [--overhead-runs 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _util import run

APPS = Path("/usr/local/lib/bench")

INVENTORY = r"""
import sys, time
log = lambda level, msg: print(f"{level} inventory[{time.monotonic():.3f}]: {msg}", flush=True)
log("INFO", "inventory-api 2.14.1 starting (pid %d)" % __import__("os").getpid())
for mod in ("auth", "catalog", "pricing", "search", "reports", "webhooks", "audit"):
    log("INFO", f"loaded module {mod} from /usr/lib/inventory/modules/{mod}.so")
log("INFO", "reading configuration from /etc/inventory/inventory.ini")
log("DEBUG", "config sections: [server] [database] [cache] [auth] [logging] [features]")
print("Traceback (most recent call last):", file=sys.stderr, flush=True)
print('  File "/usr/lib/inventory/config.py", line 88, in load', file=sys.stderr)
print("    parser.read_file(fh)", file=sys.stderr)
print("configparser.ParsingError: Source contains parsing errors: "
      "'/etc/inventory/inventory.ini'\n\t[line 12]: 'listen = 0.0.0.0:8080 workers=4'",
      file=sys.stderr, flush=True)
log("ERROR", "cannot start: invalid configuration (see above)")
sys.exit(1)
"""
WORKER = r"""
import time
for i in range(60):
    print(f"INFO worker: job {1000 + i} (resize-image) done in {0.2 + i % 7 / 10:.1f}s, "
          f"queue depth {60 - i}, batch=thumbnails-2026-11-29 tenant=acme-{i % 5}", flush=True)
time.sleep(100000)
"""
DB = r"""
import sys
print("LOG:  starting benchdb 15.4 on x86_64-pc-linux-gnu", flush=True)
print("LOG:  configuration: listen_addresses='*' port=5432 max_connections=200 "
      "shared_buffers=2GB", flush=True)
print("LOG:  replication source: postgres://replicator:Zx9-hunter2-Qq@10.0.0.12:5432/app",
      flush=True)
for i in range(30):
    print(f"LOG:  checking relation file base/16384/{24576 + i}: ok ({i * 8} kB)", flush=True)
print('FATAL:  data directory "/var/lib/benchdb/15/main" has wrong ownership', flush=True)
print("HINT:  The server must be started by the user that owns the data directory.",
      flush=True)
sys.exit(1)
"""
CHATTY = r"""
import json, os, signal, time
for i in range(400):
    body = {"request_id": f"req-{i:05d}", "path": f"/v2/orders/{9000 + i}/items",
            "items": [{"sku": f"SKU-{i * 13 % 997:04d}", "qty": i % 4 + 1,
                       "price": round(3.5 + i % 50, 2)} for _ in range(3)],
            "customer": {"id": f"cust-{i % 211}", "tier": "gold" if i % 3 else "silver"}}
    print(f"DEBUG orders: handled POST {body['path']} in {i % 40 + 2} ms body={json.dumps(body)}",
          flush=True)
print("WARNING orders: RSS 1.9 GiB of 2.0 GiB limit, cache not shrinking", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

UNITS = {
    "inventory.service": (
        "[Unit]\nDescription=inventory API\nStartLimitIntervalSec=60\nStartLimitBurst=3\n"
        "[Service]\nExecStart=/usr/bin/python3 /usr/local/lib/bench/inventory.py\n"
        "Restart=on-failure\nRestartSec=100ms\n"
    ),
    "worker.service": (
        "[Unit]\nDescription=image worker\n"
        "[Service]\nExecStart=/usr/bin/python3 /usr/local/lib/bench/worker.py\n"
    ),
    "benchdb.service": (
        "[Unit]\nDescription=bench database\n"
        "[Service]\nType=notify\nExecStart=/usr/bin/python3 /usr/local/lib/bench/db.py\n"
    ),
    "web.service": (
        "[Unit]\nDescription=web front end\nRequires=benchdb.service\nAfter=benchdb.service\n"
        "[Service]\nExecStart=/bin/sleep infinity\n"
    ),
    "orders.service": (
        "[Unit]\nDescription=orders API\n"
        "[Service]\nExecStart=/usr/bin/python3 /usr/local/lib/bench/chatty.py\n"
    ),
}


def restart_plan(unit: str, why: str) -> dict[str, Any]:
    return {
        "goal": f"Restart {unit} after {why}",
        "steps": [
            {
                "tool": "restart_unit",
                "args": {"unit": unit},
                "expect": {"active_state": ["failed"]},
                "reason": why,
            }
        ],
    }


#: name -> (unit, symptom, turns as (tool, arguments)).
SCENARIOS: dict[str, tuple[str, str, list[tuple[str, dict[str, Any]]]]] = {
    "config-error-crashloop": (
        "inventory.service",
        "inventory API returns 502",
        [
            ("read_unit_status", {"unit": "inventory.service"}),
            ("tail_journal", {"unit": "inventory.service", "lines": 100}),
            (
                "final_note",
                {
                    "text": "inventory.service fails at start: configparser cannot parse "
                    "/etc/inventory/inventory.ini line 12 ('listen = 0.0.0.0:8080 "
                    "workers=4'). A restart will not help: fix that line, then start it."
                },
            ),
        ],
    ),
    "killed-worker": (
        "worker.service",
        "",
        [
            ("read_unit_status", {"unit": "worker.service"}),
            ("tail_journal", {"unit": "worker.service", "lines": 50}),
            (
                "submit_plan",
                restart_plan("worker.service", "its main process was killed (SIGKILL)"),
            ),
        ],
    ),
    "failed-dependency": (
        "web.service",
        "site down",
        [
            ("read_unit_status", {"unit": "web.service"}),
            ("read_unit_status", {"unit": "benchdb.service"}),
            ("tail_journal", {"unit": "benchdb.service", "lines": 100}),
            ("list_failed_units", {}),
            (
                "final_note",
                {
                    "text": "web.service is down because benchdb.service failed: its data "
                    "directory /var/lib/benchdb/15/main has the wrong owner. Fix the "
                    "ownership, then start benchdb.service and web.service."
                },
            ),
        ],
    ),
    "chatty-oom-kill": (
        "orders.service",
        "orders API timing out",
        [
            ("read_unit_status", {"unit": "orders.service"}),
            ("tail_journal", {"unit": "orders.service", "lines": 200}),
            ("tail_journal", {"unit": "orders.service", "lines": 20, "since": "1h"}),
            ("submit_plan", restart_plan("orders.service", "it was killed near its memory limit")),
        ],
    ),
}


def setup() -> dict[str, str]:
    APPS.mkdir(parents=True, exist_ok=True)
    for name, code in (
        ("inventory.py", INVENTORY),
        ("worker.py", WORKER),
        ("db.py", DB),
        ("chatty.py", CHATTY),
    ):
        (APPS / name).write_text(code)
    for unit, text in UNITS.items():
        Path(f"/etc/systemd/system/{unit}").write_text(text)
    run(["systemctl", "daemon-reload"])
    for unit in ("inventory.service", "worker.service", "orders.service"):
        run(["systemctl", "start", "--no-block", unit])
    run(["systemctl", "start", "--no-block", "web.service"])
    time.sleep(3)
    run(["systemctl", "kill", "-s", "KILL", "worker.service"])
    time.sleep(1)
    run(["journalctl", "--sync"])
    return {u: run(["systemctl", "show", "-P", "ActiveState", u]).stdout.strip() for u in UNITS}


class AcceptingSubmitter:
    """The executor boundary, answered in-process: ACCEPT with the plan's fingerprint."""

    def submit(self, plan: Any, run_id: str, symptom: str, evidence: Sequence[str] = ()) -> Any:
        from shared_schema import Accept

        return Accept(plan_id="20261129-220000-0a1b2c3d", sha256=plan.fingerprint())


def turns_for(script: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    from testbed.scripted_openai import ToolCall

    return [ToolCall(name, args) for name, args in script]


def server_prompt_tokens(server: Any) -> list[int]:
    """prompt_tokens the server reported for each request (recomputed the same way)."""
    from testbed.scripted_openai import approx_tokens

    return [
        approx_tokens({"messages": r.body.get("messages", []), "tools": r.body.get("tools", [])})
        for r in server.chat_requests
    ]


def opsbot_run(unit: str, symptom: str, script: Sequence[tuple[str, dict[str, Any]]]) -> Any:
    from diagnose_svc.model_settings import ModelEndpoint
    from diagnose_svc.policies.openai_compat import OpenAICompatPolicy
    from diagnose_svc.runtime import run_diagnosis
    from diagnose_svc.tools import READ_TOOLS
    from shared_schema import DiagnoseSettings
    from testbed.scripted_openai import ScriptedOpenAI

    with ScriptedOpenAI(turns_for(script)) as server:
        settings = ModelEndpoint(api_url=server.base_url, model="scripted-model", max_retries=0)
        with OpenAICompatPolicy(settings) as policy:
            verdict = run_diagnosis(
                unit, symptom, policy, READ_TOOLS, AcceptingSubmitter(), DiagnoseSettings()
            )
        tokens = server_prompt_tokens(server)
        observations = [len(r.body["messages"][-1]["content"]) for r in server.chat_requests[1:]]
    kind = verdict.kind
    return {
        "kind": kind,
        "steps": verdict.steps_used,
        "ended_by": verdict.ended_by,
        "plan_sha256": getattr(verdict, "sha256", None),
        "note": getattr(verdict, "text", None) if kind == "note" else None,
        "prompt_tokens": sum(tokens),
        "per_request": tokens,
        "observation_chars": observations,
    }


def naive_run(
    unit: str, symptom: str, script: Sequence[tuple[str, dict[str, Any]]], unbounded: bool
) -> Any:
    import contextlib

    from bench.naive_react import naive_diagnosis, unbounded_tools
    from diagnose_svc.tools import READ_TOOLS, ToolContext
    from shared_schema import DiagnoseSettings
    from testbed.scripted_openai import ScriptedOpenAI

    lifted: list[str] = []
    with ScriptedOpenAI(turns_for(script)) as server:
        with unbounded_tools() if unbounded else contextlib.nullcontext([]) as lifted:
            result = naive_diagnosis(
                unit,
                symptom,
                server.base_url,
                READ_TOOLS,
                ToolContext(settings=DiagnoseSettings()),
                AcceptingSubmitter(),
            )
        tokens = server_prompt_tokens(server)
    if sum(tokens) != result.prompt_tokens:
        raise RuntimeError("the naive loop's usage sum differs from the server's count")
    return {
        "kind": result.kind,
        "steps": result.steps,
        "plan_sha256": result.plan_sha256,
        "note": result.note,
        "prompt_tokens": result.prompt_tokens,
        "per_request": tokens,
        "observation_chars": result.observation_chars,
        "lifted": lifted,
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--overhead-runs", type=int, default=300)
    args = p.parse_args()
    from shared_io import log as diagnose_log

    diagnose_log.configure("opsbot-diagnose")  # as the daemon does: events to journald
    states = setup()
    out: dict[str, Any] = {"unit_states": states, "scenarios": {}}
    for name, (unit, symptom, script) in SCENARIOS.items():
        out["scenarios"][name] = {
            "unit": unit,
            "opsbot": opsbot_run(unit, symptom, script),
            "naive_unbounded": naive_run(unit, symptom, script, unbounded=True),
            "naive_tool_bounds": naive_run(unit, symptom, script, unbounded=False),
        }
    from bench._overhead import measure_overhead

    out["overhead"] = measure_overhead(args.overhead_runs)
    out["overhead_median_step_ms"] = statistics.median(out["overhead"]["per_step_ms"])
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
