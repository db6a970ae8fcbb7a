"""The README's demo: opsbot's main job, end to end, in a throw-away systemd.

    sudo scripts/demo [--verbose]

Boots a real systemd in a container, installs the scenario stack (nginx -> app -> db)
and opsbot exactly as README.md's install section says (testbed/readme.py), kills the app
behind nginx, and shows, as it happens: the symptom, the diagnosis steps, the proposed
plan as argv, the approval, the apply (started by opsbot-apply.path), health coming back
and staying, and the audit trail from the journal. It leaves nothing running.

Every line it prints fits 100 columns: longer output lines wrap, and journal entries are
shown one line each (UTC time, identifier, the message with each sha256 cut to 12 digits,
cut with "..."). ``--verbose`` prints the journal as ``journalctl`` does and
nothing wrapped or cut.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

from testbed.container import CONTAINER_PATH, BootedSystemd, can_boot
from testbed.faults import inject_app_killed
from testbed.host import REPO
from testbed.observe import http_probe
from testbed.readme import CONFIG, block, commands, install_argv
from testbed.stack import DEFAULT_STACK, install, reset

WIDTH = 100
#: Output starts in column 1, as in a terminal: opsbot fits its own lines to WIDTH.
INDENT = ""
BOLD = "\033[1m" if sys.stdout.isatty() else ""
PLAIN = "\033[0m" if sys.stdout.isatty() else ""
_SHA256 = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")
#: The operator the README's install adds to opsbot-operators (an existing login).
OPERATOR = "alice"


class Screen:
    """What the demo prints: every line within WIDTH columns unless ``verbose``."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose

    def say(self, text: str) -> None:
        print(f"\n{BOLD}== {text}{PLAIN}", flush=True)

    def line(self, text: str, indent: str = INDENT) -> None:
        """One line of output, wrapped to WIDTH (continuations indented 4 more)."""
        text = text.rstrip("\n").expandtabs()
        if self.verbose or len(indent) + len(text) <= WIDTH:
            print(f"{indent}{text}", flush=True)
            return
        for part in textwrap.wrap(
            text,
            width=WIDTH,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_on_hyphens=False,
            drop_whitespace=True,
        ):
            print(part, flush=True)

    def cut(self, text: str, indent: str = INDENT) -> None:
        """One line, cut at WIDTH with "..." (the whole line with --verbose)."""
        text = text.rstrip("\n").expandtabs()
        room = WIDTH - len(indent)
        if not self.verbose and len(text) > room:
            text = text[: room - 3] + "..."
        print(f"{indent}{text}", flush=True)


def show(
    screen: Screen,
    ct: BootedSystemd,
    argv: list[str],
    user: str | None = None,
    cwd: str | None = None,
    ok: tuple[int, ...] = (0,),
) -> str:
    """Run argv in the container (in ``cwd``), printing its output line by line as it
    comes; an exit status not in ``ok`` ends the demo."""
    prompt = "$ " if user is None else f"{user}$ "
    screen.line(f"{prompt}{shlex.join(argv)}", indent="")
    full = ["nsenter", "-t", str(ct.pid), "-a"]
    if user is not None:
        full += ["runuser", "-u", user, "--"]
    if cwd is not None:
        full += ["env", f"--chdir={cwd}"]
    env = {"PATH": CONTAINER_PATH, "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0"}
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
            screen.line(line)
            lines.append(line)
    if proc.returncode not in ok:
        raise SystemExit(f"demo: {shlex.join(argv)} failed with exit status {proc.returncode}")
    return "".join(lines)


def journal_line(entry: dict[str, object]) -> str:
    """One journal entry in one line: UTC time, identifier, message, each sha256 cut to
    its first 12 hex digits."""
    micros = int(str(entry.get("__REALTIME_TIMESTAMP", "0")))
    at = datetime.fromtimestamp(micros / 1e6, UTC).strftime("%H:%M:%SZ")
    who = entry.get("SYSLOG_IDENTIFIER") or entry.get("_SYSTEMD_UNIT") or "?"
    message = entry.get("MESSAGE", "")
    if isinstance(message, list):  # journald's form for a message that is not UTF-8
        message = bytes(int(b) for b in message).decode("utf-8", "replace")
    short = _SHA256.sub("\\1...", str(message))
    return f"{at} {who}: {short}"


def show_journal(screen: Screen, ct: BootedSystemd, *args: str) -> None:
    """``journalctl ARGS``: in full with --verbose, else one cut line per entry."""
    if screen.verbose:
        show(screen, ct, ["journalctl", "--no-pager", "-o", "short-iso", *args])
        return
    argv = ["journalctl", "--no-pager", "-o", "json", *args]
    screen.line(f"$ {shlex.join(argv)}", indent="")
    screen.line("# one line an entry: UTC time, who, the message, cut (--verbose: all of it)")
    for raw in ct.run(argv).stdout.splitlines():
        screen.cut(journal_line(json.loads(raw)))


def install_as_the_readme_says(screen: Screen, ct: BootedSystemd, config: str) -> None:
    """README.md's install block, line by line, as root in the checkout; the edit of
    /etc/opsbot/opsbot.toml writes ``config`` (testbed.readme.install_argv)."""
    for argv in commands(block("install-commands")):
        run = install_argv(argv)
        if run is None:
            screen.line(f"$ {shlex.join(argv)}   # the demo writes the stack's config:", "")
            ct.write_file(CONFIG, config)
            show(screen, ct, ["cat", CONFIG])
        else:
            show(screen, ct, run, cwd=REPO)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="the journal as journalctl prints it, and no line wrapped or cut",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    screen = Screen(args.verbose)
    ok, reason = can_boot()
    if not ok:
        print(f"demo: cannot boot a systemd container here: {reason}", file=sys.stderr)
        return 1
    stack = DEFAULT_STACK
    screen.say("booting a real systemd in a throw-away container (systemd-nspawn)")
    with BootedSystemd() as ct:
        screen.line(f"systemd is {ct.boot_state} after {ct.boot_seconds:.1f}s")
        screen.say("the scenario host: nginx on :80 -> app.service (127.0.0.1:8080) -> db.service")
        install(ct, stack)
        reset(ct, stack)
        show(screen, ct, ["useradd", "--create-home", OPERATOR])

        screen.say("installing opsbot as README.md says (as root, in the checkout)")
        install_as_the_readme_says(screen, ct, stack.opsbot_config())

        screen.say("3 a.m.: the app dies (SIGKILL, no auto-restart)")
        fault = inject_app_killed(ct, stack)
        for action in fault.actions:
            screen.line(f"# {action}")
        curl = ["curl", "-s", "-o", "/dev/null", "-w", "GET / -> %{http_code}"]
        show(screen, ct, [*curl, "http://127.0.0.1/"])

        screen.say(f"{OPERATOR} asks opsbot why nginx returns 502 (diagnosis: opsbot-diagnose)")
        diagnose = ["opsbot", "diagnose", "nginx", "--symptom", "nginx returns 502"]
        proc = ct.run(["opsbot", "plans", "--json"])
        before = {p["plan_id"] for p in json.loads(proc.stdout)}
        # 3: a plan waits for approval (shared_io/exit_codes.py).
        show(screen, ct, diagnose, user=OPERATOR, ok=(0, 3))
        plans = json.loads(ct.run(["opsbot", "plans", "--json"]).stdout)
        proposed = [p for p in plans if p["state"] == "PROPOSED" and p["plan_id"] not in before]
        if not proposed:
            proposed = [p for p in plans if p["state"] == "PROPOSED"]
        plan_id, sha256 = proposed[-1]["plan_id"], proposed[-1]["sha256"]

        screen.say("the proposed plan, exactly as it will run (argv, no shell)")
        show(screen, ct, ["opsbot", "show", plan_id], user=OPERATOR)
        show(screen, ct, ["opsbot", "show", plan_id, "--argv"], user=OPERATOR)

        screen.say(
            f"root approves the sha256 {OPERATOR} reviewed; opsbot-apply.path starts the apply"
        )
        show(screen, ct, ["opsbot", "approve", plan_id, "--sha256", sha256[:16]])
        ct.wait_for(
            lambda: (
                json.loads(ct.run(["opsbot", "show", plan_id, "--json"]).stdout)["summary"]["state"]
                in ("VERIFIED", "UNRESOLVED", "FAILED", "STALE")
            ),
            timeout=60,
            interval=0.5,
            what="the apply and its verification",
        )
        show_journal(screen, ct, "-u", "opsbot-apply.service")
        screen.say("opsbot-verify watched the app and nginx for the settle window: did it work?")
        show(screen, ct, ["opsbot", "show", plan_id], user=OPERATOR)

        screen.say("health comes back, and stays")
        for _ in range(6):
            proxy = http_probe(ct, stack.proxy_url).status
            app = http_probe(ct, stack.app_health_url).status
            at = datetime.now(UTC).strftime("%H:%M:%SZ")
            screen.line(f"{at}  GET / via nginx -> {proxy}   app /healthz -> {app}")
            time.sleep(1)

        screen.say("the audit trail: opsbot audit, and the journal's PLAN_ID=")
        show(screen, ct, ["opsbot", "audit", plan_id])
        show_journal(screen, ct, f"PLAN_ID={plan_id}")
        screen.say("powering the container off; nothing is left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
