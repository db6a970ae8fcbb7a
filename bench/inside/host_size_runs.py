"""Inside the container: a proxy -> app -> db chain whose db is down, found only through
configuration, and a healthy service; then, level by level, more loaded services on the
host (instances of one oneshot template), and at each level diagnoses of the failed
front and of the healthy unit over the diagnose socket (as ``opsbot diagnose`` asks),
each checked (verdict, the db found, tool errors), and ``systemctl list-units --all`` as
the baseline; before them, the same diagnoses with the daemon reading systemd by
``systemctl show`` only (OPSBOT_SYSTEMD_READ=systemctl), the baseline of its reads over
D-Bus. Last, the diagnose daemon's VmRSS over many diagnoses. Prints JSON.

    host_size_runs.py --levels 0,500,2000 --runs 10 --rss-diagnoses 200

The chain (units named and configured as on a real host; no unit file names another):

* ``nginx.service``: Debian's nginx, a site in sites-enabled/ listening on 127.0.0.1:8081
  whose ``proxy_pass`` reaches the app's port;
* ``ledger-api.service``: the scenario stack's app (testbed/services/app.py), HTTP on
  127.0.0.1:8082, its db's port in ``/etc/default/ledger-api`` (``EnvironmentFile=``);
  ``/healthz`` is 503 while the db does not answer;
* ``ledger-db.service``: a database server configured with ``--listen 127.0.0.1:5441``
  that fails at start (exit 1, PostgreSQL's words for a data directory of the wrong owner);
* ``status-page.service``: ``python3 -m http.server`` on 127.0.0.1:8083, healthy.

Extra services: ``bench-extra@PORT.service`` instances of a template in
/run/systemd/system (oneshot, RemainAfterExit=yes, ``/bin/true``, a ``LISTEN_PORT=``
each), started in chunks; levels are cumulative.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from typing import Any

from _util import as_user, main_pid, run, timed, vmrss_kb

from shared_io import framing
from shared_schema import MAX_MESSAGE_BYTES
from testbed.container import REPO_MOUNT

DIAGNOSE_SOCKET = "/run/opsbot/diagnose.sock"
APPS = "/usr/local/lib/ledger"

FRONT = "nginx.service"
APP = "ledger-api.service"
DB = "ledger-db.service"
HEALTHY = "status-page.service"
FRONT_PORT, APP_PORT, DB_PORT, HEALTHY_PORT = 8081, 8082, 5441, 8083
#: Extra services are named by the port each says it listens on: 20001, 20002, ...
DB_DATA = "/var/lib/ledgerdb/15/main"
EXTRA_FIRST_PORT = 20001
EXTRA_CHUNK = 250
EXTRA_TEMPLATE = "/run/systemd/system/bench-extra@.service"

DB_PROGRAM = r"""#!/usr/bin/python3
# ledgerdb: what a PostgreSQL-like server says when its data directory changed owner.
import os, sys, time
args = sys.argv[1:]
listen = args[args.index("--listen") + 1] if "--listen" in args else "127.0.0.1:5432"
data = args[args.index("-D") + 1] if "-D" in args else "/var/lib/ledgerdb/main"
stamp = lambda: time.strftime("%Y-%m-%d %H:%M:%S.000 UTC", time.gmtime())
pid = os.getpid()
print(f"{stamp()} [{pid}] LOG:  starting ledgerdb 15.6 on x86_64-pc-linux-gnu", flush=True)
print(f"{stamp()} [{pid}] LOG:  listening on IPv4 address \"{listen.split(':')[0]}\", "
      f"port {listen.split(':')[1]}", flush=True)
print(f"{stamp()} [{pid}] FATAL:  data directory \"{data}\" has wrong ownership", flush=True)
print(f"{stamp()} [{pid}] HINT:  The server must be started by the user that owns the data "
      "directory.", flush=True)
print(f"{stamp()} [{pid}] LOG:  database system is shut down", flush=True)
sys.exit(1)
"""

UNITS = {
    DB: f"""\
[Unit]
Description=ledger database server
After=network.target

[Service]
Type=notify
User=ledgerdb
ExecStart=/usr/bin/python3 -u {APPS}/ledgerdb --listen 127.0.0.1:{DB_PORT} \
-D {DB_DATA}
SyslogIdentifier=ledgerdb
TimeoutStartSec=30

[Install]
WantedBy=multi-user.target
""",
    APP: f"""\
[Unit]
Description=ledger API (HTTP on 127.0.0.1:{APP_PORT})
After=network.target

[Service]
Type=notify
Environment=APP_NAME=ledger-api APP_PORT={APP_PORT} APP_MODE=prod
EnvironmentFile=/etc/default/ledger-api
ExecStart=/usr/bin/python3 -u {APPS}/app.py
SyslogIdentifier=ledger-api
Restart=on-failure

[Install]
WantedBy=multi-user.target
""",
    HEALTHY: f"""\
[Unit]
Description=status page (static files on 127.0.0.1:{HEALTHY_PORT})
After=network.target

[Service]
ExecStart=/usr/bin/python3 -m http.server {HEALTHY_PORT} --bind 127.0.0.1 \
--directory /srv/status
DynamicUser=yes

[Install]
WantedBy=multi-user.target
""",
}
APP_DEFAULTS = f"""\
# Settings for ledger-api.service
DB_HOST=127.0.0.1
DB_PORT={DB_PORT}
APP_GREETING="ledger api"
"""
NGINX_SITE = f"""\
# ledger: the public front of ledger-api
server {{
    listen 127.0.0.1:{FRONT_PORT};
    server_name ledger.example;

    location / {{
        proxy_pass http://127.0.0.1:{APP_PORT};
        proxy_connect_timeout 2s;
        proxy_read_timeout 3s;
    }}
}}
"""
EXTRA_UNIT = """\
[Unit]
Description=bench filler service on port %i (issue 40: many units on one host)

[Service]
Type=oneshot
RemainAfterExit=yes
Environment=LISTEN_PORT=%i WORKER_NAME=filler-%i LOG_LEVEL=info
ExecStart=/bin/true
"""


# -- the chain --------------------------------------------------------------------------------


def http_status(url: str, timeout: float = 2.0) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def wait(what: str, ok: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def state(unit: str) -> str:
    return run(["systemctl", "show", "-P", "ActiveState", unit]).stdout.strip()


def setup_chain() -> dict[str, Any]:
    """Write and start the chain; the db fails, the front and app answer 503."""
    os.makedirs(APPS, exist_ok=True)
    shutil.copy(f"{REPO_MOUNT}/testbed/services/app.py", f"{APPS}/app.py")
    with open(f"{APPS}/ledgerdb", "w") as fh:
        fh.write(DB_PROGRAM)
    os.chmod(f"{APPS}/ledgerdb", 0o755)
    # The data directory left to root by a restore: the server's user may not use it.
    if timed(["id", "ledgerdb"], check=False)[1].returncode != 0:
        run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "ledgerdb"])
    os.makedirs(DB_DATA, mode=0o700, exist_ok=True)
    os.makedirs("/srv/status", exist_ok=True)
    with open("/srv/status/healthz", "w") as fh:
        fh.write("ok\n")
    with open("/etc/default/ledger-api", "w") as fh:
        fh.write(APP_DEFAULTS)
    with open("/etc/nginx/sites-available/ledger", "w") as fh:
        fh.write(NGINX_SITE)
    if not os.path.lexists("/etc/nginx/sites-enabled/ledger"):
        os.symlink("/etc/nginx/sites-available/ledger", "/etc/nginx/sites-enabled/ledger")
    for unit, text in UNITS.items():
        with open(f"/etc/systemd/system/{unit}", "w") as fh:
            fh.write(text)
    with open(EXTRA_TEMPLATE, "w") as fh:
        fh.write(EXTRA_UNIT)
    run(["systemctl", "daemon-reload"])
    run(["systemctl", "enable", "--quiet", DB, APP, HEALTHY])
    run(["nginx", "-t", "-q"])
    run(["systemctl", "start", HEALTHY, APP])
    run(["systemctl", "reload-or-restart", FRONT])
    run(["systemctl", "start", "--no-block", DB])
    wait(f"{DB} failed", lambda: state(DB) == "failed")
    front_url = f"http://127.0.0.1:{FRONT_PORT}/healthz"
    app_url = f"http://127.0.0.1:{APP_PORT}/healthz"
    healthy_url = f"http://127.0.0.1:{HEALTHY_PORT}/healthz"
    wait("the front's 5xx", lambda: http_status(front_url) >= 500)
    wait("the status page's 200", lambda: http_status(healthy_url) == 200)
    run(["journalctl", "--sync"])
    return {
        "states": {u: state(u) for u in (FRONT, APP, DB, HEALTHY)},
        "health": {
            "front": http_status(front_url),
            "app": http_status(app_url),
            "healthy": http_status(healthy_url),
        },
    }


def add_extras(have: int, want: int) -> float:
    """Start instances ``have`` .. ``want - 1``; the seconds it took."""
    started = time.perf_counter()
    for first in range(have, want, EXTRA_CHUNK):
        last = min(first + EXTRA_CHUNK, want)
        names = [f"bench-extra@{EXTRA_FIRST_PORT + i}.service" for i in range(first, last)]
        run(["systemctl", "start", "--", *names], timeout=600)
    return time.perf_counter() - started


def loaded_units() -> dict[str, int]:
    out = run(["systemctl", "list-units", "--all", "--no-legend", "--plain", "--no-pager"]).stdout
    rows = [line.split()[0] for line in out.splitlines() if line.strip()]
    return {"all": len(rows), "services": sum(1 for r in rows if r.endswith(".service"))}


# -- one diagnosis over the socket ----------------------------------------------------------


def diagnose(unit: str) -> dict[str, Any]:
    """One diagnosis, as `opsbot diagnose UNIT` asks for it: the seconds from connect to
    the verdict, each step's tools and the seconds until its event arrived, the verdict
    in outline and the tool errors."""
    request = json.dumps({"v": 1, "op": "diagnose", "unit": unit}).encode() + b"\n"
    started = time.perf_counter()
    last = started
    steps: list[dict[str, Any]] = []
    verdict: dict[str, Any] | None = None
    for line in framing.stream(DIAGNOSE_SOCKET, request, limit=MAX_MESSAGE_BYTES, timeout=120):
        now = time.perf_counter()
        doc = json.loads(line)
        event = doc.get("event")
        if event == "diagnose.step":
            if steps and steps[-1]["step"] == doc["step"]:
                steps[-1]["calls"].append(_call(doc))
            else:
                steps.append({"step": doc["step"], "s": now - last, "calls": [_call(doc)]})
                last = now
        elif event == "diagnose.verdict":
            verdict = doc["verdict"]
        elif event == "diagnose.error":
            raise RuntimeError(f"diagnosis of {unit} refused: {doc}")
    seconds = time.perf_counter() - started
    if verdict is None:
        raise RuntimeError(f"no verdict for {unit}")
    return {"seconds": seconds, "steps": steps, **outline(verdict)}


def _call(doc: dict[str, Any]) -> dict[str, Any]:
    summary = str(doc.get("summary", ""))
    return {
        "tool": doc.get("tool") or doc.get("action"),
        "error": summary.startswith("error: "),
        "summary": summary[:160],
    }


def outline(verdict: dict[str, Any]) -> dict[str, Any]:
    """What a verdict says, in a few fields: its kind, the units it names as data (the
    cause's unit, the plan's steps'), the tool errors of its evidence."""
    cause = verdict.get("cause") or {}
    plan_units = [
        s.get("args", {}).get("unit") for s in (verdict.get("plan") or {}).get("steps", [])
    ]
    errors = [e for e in verdict.get("evidence", []) if e.get("error")]
    units = [u for u in [cause.get("unit"), *plan_units] if u]
    return {
        "kind": verdict["kind"],
        "ended_by": verdict.get("ended_by"),
        "cause_kind": cause.get("kind"),
        "units": units,
        "text": (verdict.get("text") or (verdict.get("plan") or {}).get("goal") or "")[:300],
        "steps_used": verdict.get("steps_used"),
        "tool_errors": len(errors),
        "errors": sorted({f"{e['tool']}: {e['summary'][:200]}" for e in errors}),
    }


def diagnose_runs(unit: str, runs: int) -> dict[str, Any]:
    samples = [diagnose(unit) for _ in range(runs)]
    kinds = sorted({(s["kind"], s["cause_kind"], tuple(s["units"])) for s in samples})
    slowest_step = max(
        (st for s in samples for st in s["steps"]), key=lambda st: st["s"], default=None
    )
    return {
        "seconds": [s["seconds"] for s in samples],
        "verdicts": [list(k) for k in kinds],
        "db_found": sum(1 for s in samples if DB in s["units"]),
        "db_named": sum(1 for s in samples if DB in s["units"] or DB in s["text"]),
        "tool_errors": sum(s["tool_errors"] for s in samples),
        "errors": sorted({e for s in samples for e in s["errors"]}),
        "step_seconds_median": _step_medians(samples),
        "slowest_step": slowest_step,
        "example": samples[-1],
    }


def _step_medians(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step number: its tools (in the last sample) and its median seconds."""
    by_step: dict[int, list[float]] = {}
    tools: dict[int, list[str]] = {}
    for s in samples:
        for st in s["steps"]:
            by_step.setdefault(st["step"], []).append(st["s"])
            tools[st["step"]] = [c["tool"] for c in st["calls"]]
    return [
        {"step": n, "tools": tools[n], "median_s": statistics.median(v), "n": len(v)}
        for n, v in sorted(by_step.items())
    ]


def list_units_seconds(runs: int = 7) -> list[float]:
    """``systemctl list-units --all --no-pager``, after one run not counted."""
    argv = ["systemctl", "list-units", "--all", "--no-pager"]
    timed(argv)
    return [timed(argv)[0] for _ in range(runs)]


#: The read tools a diagnosis of the front calls, each timed on its own.
TOOL_CALLS: tuple[tuple[str, dict[str, str]], ...] = (
    ("read_unit_status", {"unit": FRONT}),
    ("list_failed_units", {}),
    ("read_connections", {}),
    ("read_config_edges", {}),
    ("read_baseline", {}),
    ("read_changes", {"unit": DB}),
    ("tail_journal", {"unit": DB}),
    ("read_unit_file", {"unit": DB}),
    ("disk_usage", {"unit": DB}),
    ("read_process_state", {"unit": APP}),
)


def tool_seconds(repeat: int = 3) -> dict[str, Any]:
    """Each of TOOL_CALLS run ``repeat`` times as the diagnose user, in one process, each
    with a context of its own (nothing shared between tools): median seconds, and the
    error a tool answered, if any."""

    def measure() -> bytes:
        from diagnose_svc.tools import READ_TOOLS, ToolContext
        from shared_io.errors import OpsbotError
        from shared_schema import DiagnoseSettings

        out: dict[str, Any] = {}
        for name, tool_args in TOOL_CALLS:
            tool = READ_TOOLS[name]
            samples, error, summary = [], "", ""
            for _ in range(repeat):
                started = time.perf_counter()
                try:
                    result = tool(
                        tool.parse_args(tool_args), ToolContext(settings=DiagnoseSettings())
                    )
                    summary = result.summary()[:200]
                except OpsbotError as exc:
                    error = exc.message[:300]
                samples.append(time.perf_counter() - started)
            out[name] = {"median_s": statistics.median(samples), "error": error, "summary": summary}
        return json.dumps(out).encode()

    return dict(json.loads(as_user("opsbot-diagnose", measure)))


def console_seconds(unit: str, runs: int) -> list[float]:
    """`opsbot diagnose UNIT --json` as an operator runs it (console start-up included)."""
    out = []
    for _ in range(runs):
        elapsed, _ = timed(["/opt/opsbot/venv/bin/opsbot", "diagnose", unit, "--json"], check=False)
        out.append(elapsed)
    return out


def rss_over(diagnoses: int) -> dict[str, Any]:
    """VmRSS of the diagnose daemon before ``diagnoses`` diagnoses, after each and at the
    end, the failed front and the healthy unit alternating (it must stay one process)."""
    unit = "opsbot-diagnose.service"
    time.sleep(1.0)
    pid = main_pid(unit)
    before = vmrss_kb(pid)
    trajectory = []
    started = time.perf_counter()
    for i in range(diagnoses):
        diagnose(FRONT if i % 2 == 0 else HEALTHY)
        trajectory.append(vmrss_kb(pid))
    seconds = time.perf_counter() - started
    time.sleep(1.0)  # let finished connection threads go
    after_pid = main_pid(unit)
    if after_pid != pid:
        raise RuntimeError(f"the diagnose daemon restarted during the run ({pid} -> {after_pid})")
    return {
        "pid": pid,
        "diagnoses": diagnoses,
        "before_kb": before,
        "after_kb": vmrss_kb(pid),
        "trajectory_kb": trajectory,
        "seconds": seconds,
    }


#: The diagnose daemon reading systemd with ``systemctl show`` only (shared_io/unit_bus.py's
#: switch): the same run's baseline for reads over D-Bus.
READ_BY_SYSTEMCTL = "/run/systemd/system/opsbot-diagnose.service.d/60-bench-read.conf"


def read_by_systemctl(on: bool) -> None:
    """Restart the diagnose daemon reading systemd with systemctl (``on``) or over D-Bus,
    then warm it (imports, the page cache; not measured) with one diagnosis of each unit."""
    if on:
        os.makedirs(os.path.dirname(READ_BY_SYSTEMCTL), exist_ok=True)
        with open(READ_BY_SYSTEMCTL, "w") as f:
            f.write("[Service]\nEnvironment=OPSBOT_SYSTEMD_READ=systemctl\n")
    elif os.path.exists(READ_BY_SYSTEMCTL):
        os.remove(READ_BY_SYSTEMCTL)
    run(["systemctl", "daemon-reload"])
    run(["systemctl", "restart", "opsbot-diagnose.service"])
    diagnose(FRONT)
    diagnose(HEALTHY)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--levels", default="0,500,2000", help="extra services, cumulative")
    p.add_argument("--runs", type=int, default=10, help="diagnoses of each unit per level")
    p.add_argument("--console-runs", type=int, default=2)
    p.add_argument("--rss-diagnoses", type=int, default=200)
    args = p.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    out: dict[str, Any] = {"chain": setup_chain(), "levels": {}}
    have = 0
    for level in levels:
        add_seconds = add_extras(have, level) if level > have else 0.0
        have = max(have, level)
        run(["journalctl", "--sync"])
        # The baseline first, each road measured right after a restart and the same warm-up:
        # the daemon then serves the level's diagnoses as before, the RSS run last.
        read_by_systemctl(True)
        by_systemctl = {
            "front": diagnose_runs(FRONT, args.runs),
            "healthy": diagnose_runs(HEALTHY, args.runs),
        }
        read_by_systemctl(False)
        out["levels"][str(level)] = {
            "by_systemctl": by_systemctl,
            "add_seconds": add_seconds,
            "loaded": loaded_units(),
            "list_units_s": list_units_seconds(),
            "front": diagnose_runs(FRONT, args.runs),
            "healthy": diagnose_runs(HEALTHY, args.runs),
            "console_front_s": console_seconds(FRONT, args.console_runs),
            "chain_states": {u: state(u) for u in (FRONT, APP, DB, HEALTHY)},
            "daemon_rss_kb": vmrss_kb(main_pid("opsbot-diagnose.service")),
            "tools": tool_seconds(),
        }
    out["rss"] = rss_over(args.rss_diagnoses)
    out["rss_level"] = have
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
