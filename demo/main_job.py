"""The README's demo: opsbot's main job, end to end, in a throw-away systemd.

    sudo scripts/demo

Boots a real systemd in a container, installs the scenario stack (nginx -> app -> db)
and opsbot as an operator would (`systemctl enable --now ...`), kills the app behind
nginx, and shows, as it happens: the symptom, the diagnosis steps, the proposed plan as
argv, the approval, the apply (started by opsbot-apply.path), health coming back and
staying, and the audit trail from journalctl. It leaves nothing running.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

from testbed.container import BootedSystemd, can_boot
from testbed.faults import inject_app_killed
from testbed.host import REPO
from testbed.observe import http_probe
from testbed.stack import DEFAULT_STACK, install, reset

BOLD = "\033[1m" if sys.stdout.isatty() else ""
PLAIN = "\033[0m" if sys.stdout.isatty() else ""


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{PLAIN}", flush=True)


def show(ct: BootedSystemd, argv: list[str], user: str | None = None) -> str:
    """Run argv in the container, printing its output line by line as it comes."""
    prompt = "$ " if user is None else f"{user}$ "
    print(f"{prompt}{shlex.join(argv)}", flush=True)
    full = ["nsenter", "-t", str(ct.pid), "-a"]
    if user is not None:
        full += ["runuser", "-u", user, "--"]
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "SYSTEMD_COLORS": "0",
    }
    lines: list[str] = []
    with subprocess.Popen(
        [*full, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"  {line}", end="", flush=True)
            lines.append(line)
    if proc.returncode != 0:
        raise SystemExit(f"demo: {shlex.join(argv)} failed with exit status {proc.returncode}")
    return "".join(lines)


def main() -> int:
    ok, reason = can_boot()
    if not ok:
        print(f"demo: cannot boot a systemd container here: {reason}", file=sys.stderr)
        return 1
    stack = DEFAULT_STACK
    say("booting a real systemd in a throw-away container (systemd-nspawn)")
    with BootedSystemd() as ct:
        print(f"  systemd is {ct.boot_state} after {ct.boot_seconds:.1f}s")
        say("the scenario host: nginx on :80 -> app.service (127.0.0.1:8080) -> db.service")
        install(ct, stack)
        reset(ct, stack)
        ct.write_file("/etc/opsbot/opsbot.toml", stack.opsbot_config())
        show(ct, ["cat", "/etc/opsbot/opsbot.toml"])

        say("installing opsbot as an operator would")
        show(ct, ["bash", f"{REPO}/packaging/install.sh", "--offline"])
        show(
            ct,
            [
                "systemctl",
                "enable",
                "--now",
                "opsbot-executor.socket",
                "opsbot-diagnose.socket",
                "opsbot-apply.timer",
                "opsbot-apply.path",
            ],
        )
        show(ct, ["useradd", "--create-home", "-G", "opsbot-operators", "alice"])
        show(ct, ["opsbot", "check-config"])

        say("3 a.m.: the app dies (SIGKILL, no auto-restart)")
        fault = inject_app_killed(ct, stack)
        for action in fault.actions:
            print(f"  # {action}")
        show(
            ct,
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "GET http://127.0.0.1/ -> %{http_code}\n",
                "http://127.0.0.1/",
            ],
        )

        say("alice asks opsbot why nginx returns 502 (diagnosis runs as opsbot-diagnose)")
        show(ct, ["opsbot", "diagnose", "nginx", "--symptom", "nginx returns 502"], user="alice")
        plans = json.loads(ct.run(["opsbot", "plans", "--json"]).stdout)
        proposed = [p for p in plans if p["state"] == "PROPOSED"][-1]
        plan_id, sha256 = proposed["plan_id"], proposed["sha256"]

        say("the proposed plan, exactly as it will run (argv, no shell)")
        show(ct, ["opsbot", "show", plan_id], user="alice")
        show(ct, ["opsbot", "show", plan_id, "--argv"], user="alice")

        say("root approves the sha256 alice reviewed; opsbot-apply.path starts the apply")
        show(ct, ["opsbot", "approve", plan_id, "--sha256", sha256[:16]])
        ct.wait_for(
            lambda: (
                json.loads(ct.run(["opsbot", "show", plan_id, "--json"]).stdout)["summary"]["state"]
                in ("VERIFIED", "UNRESOLVED", "FAILED", "STALE")
            ),
            timeout=60,
            interval=0.5,
            what="the apply and its verification",
        )
        show(ct, ["journalctl", "--no-pager", "-o", "cat", "-u", "opsbot-apply.service"])
        say("opsbot-verify watched the app and nginx for the settle window: did it work?")
        show(ct, ["opsbot", "show", plan_id], user="alice")

        say("health comes back, and stays")
        for _ in range(6):
            proxy = http_probe(ct, stack.proxy_url).status
            app = http_probe(ct, stack.app_health_url).status
            print(
                f"  {time.strftime('%H:%M:%S')}  GET / via nginx -> {proxy}   "
                f"app /healthz -> {app}",
                flush=True,
            )
            time.sleep(1)

        say("the audit trail: opsbot audit, and journalctl PLAN_ID=")
        show(ct, ["opsbot", "audit", plan_id])
        show(ct, ["journalctl", "--no-pager", "-o", "short-iso", f"PLAN_ID={plan_id}"])
        say("powering the container off; nothing is left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
