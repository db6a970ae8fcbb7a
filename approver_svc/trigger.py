"""opsbot-rules.service: one ``rules`` request to root's opsbot-approver, journaled.

Started by opsbot-rules.path when a plan is stored (and by its timer, to catch up), it
only asks: the approver reads the rules, decides and writes any approval. It imports
no more than the request takes (``python -m approver_svc.trigger``), as it stands
between a stored plan and its rule's approval."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from shared_io import log as logsetup
from shared_io.approver_client import ask_approver
from shared_io.errors import OpsbotError
from shared_schema.approver_socket import ApplyRules, RulesApplied

log = structlog.get_logger("opsbot.approver")


#: After a request that decided nothing, one more after this long: a plan stored while
#: this run goes on starts no second run (systemd merges it into this one), so the run
#: itself looks once more before it ends.
QUIET_SECONDS = 1.0
#: Requests per run at most (each decides up to the approver's batch).
MAX_ROUNDS = 20


def apply_rules(
    socket_path: Path | None = None,
    *,
    verbose: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Ask the approver to put each plan that waits to the rules, until a request after
    :data:`QUIET_SECONDS` of quiet decides nothing; log what they decided."""
    logsetup.configure("opsbot-approver", verbose=verbose)
    total, quiet = 0, False
    for _ in range(MAX_ROUNDS):
        try:
            reply = ask_approver(ApplyRules(), RulesApplied, path=socket_path)
        except OpsbotError as exc:
            log.error("rules.unavailable", error=exc.message, hint=exc.hint)
            print(f"opsbot-rules: {exc}", file=sys.stderr)
            return exc.exit_status
        for decision in reply.decided:
            log.info(
                "rules.decided",
                plan_id=decision.plan_id,
                outcome=decision.outcome,
                rule=decision.rule or None,
                units=" ".join(decision.units),
            )
        total += len(reply.decided)
        if reply.decided:
            quiet = False
        elif quiet:
            break
        else:
            quiet = True
            sleep(QUIET_SECONDS)
    log.info("rules.done", plans=total, paused=reply.paused or None)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m approver_svc.trigger",
        description="Ask root's opsbot-approver to put each plan that waits to the standing "
        "rules ([[approve.rule]]) and log what they decided (opsbot-rules.service).",
    )
    parser.add_argument("--socket", type=Path, help="the approver's socket (default: its own)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    return apply_rules(args.socket, verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
