"""``opsbot notify test [CHANNEL]``: (root) a test message on one channel of
``[notify.channels]``, or on each, and what each answered.

It is sent as the approvers' messages are, by ``opsbot-notify --test`` in
opsbot-notify.service's own sandbox: a transient unit (``systemd-run``) with every
[Service] setting the unit and its drop-ins give it (its user, its credentials from
/etc/opsbot/notify, the IP filter of ``opsbot firewall --write``), but how it starts and
runs. So a channel that answers here answers the notifier, and one its firewall does not
reach fails here as it would there. The console never reads a channel's secret, and
imports none of the notifier's code.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.output import json_out, out, require_root
from shared_io import exit_codes
from shared_io.errors import ConfigError
from shared_io.paths import Paths
from shared_io.run import run as run_program

SUMMARY = "(root) send a test message to a notification channel, or to each, and say its answer"
UNIT = "opsbot-notify.service"
EPILOG = f"""\
The message is sent by opsbot-notify in its own sandbox ({UNIT}'s user,
credentials and IP filter): a channel that answers here answers the approvers' messages.
Nothing waits for approval; the webhook's body says "event": "test".

exit status: 0 each channel delivered, 1 one did not (its answer is said), 2 a channel
[notify.channels] does not name (or none), 78 an invalid configuration.

examples:
  sudo opsbot notify test             every channel of [notify.channels]
  sudo opsbot notify test ops-hook    only ops-hook
  sudo opsbot notify test --json      [{{"channel", "kind", "delivered", "said"}}, ...]
"""
#: [Service] settings that say how the unit starts and runs, not as whom or in what
#: sandbox: the transient unit has its own.
NOT_SANDBOX = frozenset(
    {
        "Type",
        "ExecStart",
        "ExecStartPre",
        "ExecStartPost",
        "ExecReload",
        "ExecStop",
        "ExecStopPost",
        "Restart",
        "RestartSec",
        "RestartPreventExitStatus",
        "SuccessExitStatus",
        "RemainAfterExit",
        "TimeoutStartSec",
        "TimeoutStopSec",
    }
)
#: At most this long for the whole test (each channel's try is bounded by the config's
#: timeout_seconds; SMTP and Apprise by three times that).
TIMEOUT_SECONDS = 300.0
#: Characters read of `systemctl cat` and of the test's answer: far more than either.
OUTPUT_LIMIT = 256 * 1024


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "notify",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("verb", choices=("test",), metavar="VERB", help="test (the only one)")
    p.add_argument("channel", metavar="CHANNEL", nargs="?", help="the channel (default: each)")
    p.add_argument("--json", action="store_true", help="what each channel answered, as JSON")
    p.set_defaults(func=run)


def sandbox(unit_text: str) -> tuple[str, list[str]]:
    """From ``systemctl cat UNIT`` (the unit file, then its drop-ins): the program its
    ExecStart= runs, and each of its other [Service] settings, in order, as
    ``systemd-run --property`` takes them."""
    program = ""
    properties: list[str] = []
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key = line.split("=", 1)[0].strip()
        if key == "ExecStart":
            words = shlex.split(line.split("=", 1)[1])
            program = words[0].lstrip("-@:+!") if words else program
        elif key not in NOT_SANDBOX:
            properties.append(line)
    return program, properties


def trial_argv(unit_text: str, channel: str | None) -> list[str]:
    """The systemd-run command line that runs ``opsbot-notify --test [CHANNEL] --json`` in
    the unit's sandbox, waiting for it and passing its output through."""
    program, properties = sandbox(unit_text)
    if not program:
        raise ConsoleError(f"{UNIT} runs no program (no ExecStart= in `systemctl cat {UNIT}`)")
    return [
        "systemd-run",
        "--quiet",
        "--wait",
        "--pipe",
        "--collect",
        "--service-type=exec",
        f"--description=opsbot notify test, in {UNIT}'s sandbox",
        *(f"--property={p}" for p in properties),
        "--",
        program,
        "--test",
        *([channel] if channel else []),
        "--json",
    ]


def answers(stdout: str) -> list[dict[str, Any]] | None:
    """opsbot-notify's JSON list (its last line), or None when it printed none."""
    lines = stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return found if isinstance(found, list) else None


def said(tried: list[dict[str, Any]]) -> list[str]:
    """A line a channel (``ops-hook (webhook): delivered``), then the count."""
    lines = [f"{t['channel']} ({t['kind']}): {t['said']}" for t in tried]
    failed = sum(not t["delivered"] for t in tried)
    total = len(tried)
    channels = f"channel{'' if total == 1 else 's'}"
    lines.append(
        f"{failed} of {total} {channels} failed" if failed else f"{total} {channels} delivered"
    )
    return lines


def run(args: argparse.Namespace, paths: Paths) -> int:
    what = f"notify test{' ' + args.channel if args.channel else ''}"
    require_root(what)
    cat = run_program(["systemctl", "cat", "--", UNIT], timeout=30, output_limit=OUTPUT_LIMIT)
    if not cat.ok or cat.truncated:
        why = cat.failure() if not cat.ok else f"more than {OUTPUT_LIMIT} characters"
        raise ConsoleError(
            f"cannot read {UNIT}: {why}",
            hint="is opsbot installed here? (packaging/install.sh installs the unit)",
        )
    done = run_program(
        trial_argv(cat.stdout, args.channel), timeout=TIMEOUT_SECONDS, output_limit=OUTPUT_LIMIT
    )
    tried = answers(done.stdout) if done.exit_status in (0, 1) else None
    if tried is None:
        said_there = [line for line in done.stderr.splitlines() if line.strip()]
        reason = said_there[-1].removeprefix("opsbot-notify: ") if said_there else done.failure()
        if done.exit_status == exit_codes.USAGE:
            raise UsageError(reason)
        if done.exit_status == exit_codes.CONFIG:
            raise ConfigError(reason)
        raise ConsoleError(
            f"the test did not run: {reason}", hint=f"journalctl -u {UNIT} -n 20 says more"
        )
    if args.json:
        json_out(tried)
    else:
        for line in said(tried):
            out(line)
    return exit_codes.OK if all(t["delivered"] for t in tried) else exit_codes.ERROR
