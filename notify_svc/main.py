"""``opsbot-notify``: what opsbot-notify.service runs (Type=oneshot) when
opsbot-notify.path sees a plan stored: it asks root's opsbot-approver for the new
plans' links and sends each approver theirs (notify_svc.run). It is the one opsbot unit
that sends messages out; the executor never waits for it.

Exit status: 0 when every message went out (or there was nothing to send), 1 when any
failed or the approver could not be asked (the journal says which and why), 78 for a
bad config. No tracebacks: every failure is one line in the journal and on stderr.
"""

from __future__ import annotations

import argparse
import sys

import structlog

from notify_svc.credentials import Credentials
from notify_svc.run import notify
from shared_io import exit_codes, log as logsetup
from shared_io.config import load_config
from shared_io.errors import ConfigError
from shared_io.paths import approver_socket_path

log = structlog.get_logger("opsbot.notify")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-notify",
        description="Tell the approvers that a plan waits (what opsbot-notify.service runs).",
        epilog="exit status: 0 every message went out, 1 one failed or the approver is "
        "away, 78 bad config",
    )
    parser.add_argument("--verbose", action="store_true", help="log debug events")
    args = parser.parse_args(argv)
    logsetup.configure("opsbot-notify", verbose=args.verbose)
    try:
        config = load_config()
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


if __name__ == "__main__":
    sys.exit(main())
