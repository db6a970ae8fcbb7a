"""opsbot: the operator's command line.

    opsbot plans                  list plans and their states
    opsbot show ID [--argv]       one plan: its steps, as the argv each will run
    opsbot approve ID             (root) approve exactly this plan, bound to its sha256
    opsbot reject ID              (root) refuse it
    opsbot archive-approvals      (root) move used approvals out of the apply's reach
    opsbot apply [--dry-run]      (root) run approved plans now, in opsbot-apply.service
    opsbot audit ID               the plan's story from the journal
    opsbot diagnose UNIT          ask the diagnosis service why UNIT is down (live steps)
    opsbot watch UNIT             (root) diagnose UNIT automatically whenever it fails
    opsbot unwatch UNIT           (root) stop that
    opsbot check-config           validate /etc/opsbot/opsbot.toml, show the privilege mode
    opsbot polkit-rule [--write]  the polkit rule generated from the policy

Errors are one line on stderr and a non-zero exit status; --json where scripts read.
"""

from __future__ import annotations

import argparse
import sys

from opsbot_cli import (
    apply,
    approve,
    archive,
    audit,
    check_config,
    diagnose,
    plans,
    polkit_rule,
    reject,
    show,
    watch,
)
from shared_io import log as logsetup
from shared_io.errors import OpsbotError
from shared_io.paths import Paths

#: One module per command, in the order --help lists them.
COMMANDS = (
    plans,
    show,
    approve,
    reject,
    archive,
    apply,
    audit,
    diagnose,
    watch,
    check_config,
    polkit_rule,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsbot",
        description="Review, approve and apply the fixes opsbot proposes for failed "
        "systemd services. Nothing changes on the host until root approves a plan's exact "
        "sha256 with `opsbot approve`.",
        epilog="Typical session: opsbot plans; opsbot show ID; sudo opsbot approve ID; "
        "opsbot audit ID",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure("opsbot")
    try:
        status: int = args.func(args, Paths.from_env())
        return status
    except OpsbotError as exc:
        print(f"opsbot: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"opsbot: hint: {exc.hint}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
