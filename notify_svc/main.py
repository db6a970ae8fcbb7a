"""``opsbot-notify``: what opsbot-notify.service runs (Type=oneshot) when
opsbot-notify.path sees a plan stored: it asks root's opsbot-approver for the new
plans' links and sends each approver theirs (notify_svc.run). It is the one opsbot unit
that sends messages out; the executor never waits for it.

Exit status: 0 when every message went out (or there was nothing to send), 1 when any
failed or the approver could not be asked (the journal says which and why), 78 for a
bad config. No tracebacks: every failure is one line in the journal and on stderr.

``--test [CHANNEL]`` sends a test message instead (notify_svc.trial) on CHANNEL, or on
each channel of the config, and prints what each answered (``--json``: a JSON list);
0 when each was delivered, 1 when one was not, 2 for a channel the config does not
name (or none at all), 78 for a bad config. ``opsbot notify test`` runs it.
"""

from __future__ import annotations

import argparse
import json
import sys

import structlog

from notify_svc.credentials import Credentials
from notify_svc.run import notify
from notify_svc.trial import Tried, send_test
from shared_io import exit_codes, log as logsetup
from shared_io.config import load_config
from shared_io.errors import ConfigError
from shared_io.paths import approver_socket_path
from shared_schema.config import OpsbotConfig

log = structlog.get_logger("opsbot.notify")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-notify",
        description="Tell the approvers that a plan waits (what opsbot-notify.service runs).",
        epilog="exit status: 0 every message went out, 1 one failed or the approver is "
        "away, 2 --test of a channel the config does not name, 78 bad config",
    )
    parser.add_argument("--verbose", action="store_true", help="log debug events")
    parser.add_argument(
        "--test",
        nargs="?",
        const="",
        metavar="CHANNEL",
        help="send a test message on CHANNEL (or on every channel) and say what each answered",
    )
    parser.add_argument("--json", action="store_true", help="with --test: a JSON list")
    args = parser.parse_args(argv)
    logsetup.configure("opsbot-notify", verbose=args.verbose)
    try:
        config = load_config()
        if args.test is not None:
            return test(config, args.test, args.json)
        summary = notify(
            config, socket_path=approver_socket_path(), credentials=Credentials.from_env()
        )
    except ConfigError as exc:
        log.error("notify.config", error=exc.message, hint=exc.hint)
        print(f"opsbot-notify: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    if summary.error is not None:
        print(f"opsbot-notify: cannot ask the approver: {summary.error}", file=sys.stderr)
        return exit_codes.ERROR
    if not summary.ok:
        print(
            f"opsbot-notify: {summary.failed} of {summary.sent + summary.failed} messages "
            "did not go out (journalctl -u opsbot-notify says why)",
            file=sys.stderr,
        )
        return exit_codes.ERROR
    return exit_codes.OK


def test(config: OpsbotConfig, channel: str, as_json: bool) -> int:
    """``--test [CHANNEL]``: the test message on CHANNEL or on each channel, and what each
    answered, a line each (or JSON)."""
    names = list(config.notify.channels)
    if channel and channel not in names:
        known = ", ".join(names) or "none"
        print(
            f"opsbot-notify: no channel {channel!r} in [notify.channels] (channels: {known})",
            file=sys.stderr,
        )
        return exit_codes.USAGE
    if not names:
        print(
            "opsbot-notify: no channel to test: add [notify.channels.NAME] to opsbot.toml "
            "(docs/operating.md, 'Approving from your phone')",
            file=sys.stderr,
        )
        return exit_codes.USAGE
    tried = send_test(config, [channel] if channel else names, Credentials.from_env())
    if as_json:
        print(json.dumps([t.as_json() for t in tried]))
    else:
        for line in said(tried):
            print(line)
    return exit_codes.OK if all(t.delivered for t in tried) else exit_codes.ERROR


def said(tried: list[Tried]) -> list[str]:
    """A line a channel, then the count: ``ops-hook (webhook): delivered``."""
    lines = [f"{t.channel} ({t.kind}): {t.said}" for t in tried]
    failed = sum(not t.delivered for t in tried)
    total = len(tried)
    if failed:
        lines.append(f"{failed} of {total} channel{'' if total == 1 else 's'} failed")
    else:
        lines.append(f"{total} channel{'' if total == 1 else 's'} delivered")
    return lines


if __name__ == "__main__":
    sys.exit(main())
