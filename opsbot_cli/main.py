"""opsbot: the operator's command line.

    opsbot plans                  list plans and their states
    opsbot show ID [--argv]       one plan: its steps, as the argv each will run
    opsbot approve ID             (root) approve exactly this plan, bound to its sha256
    opsbot reject ID              (root) refuse it
    opsbot approvers add NAME     (root) an approver for the approval page: TOTP secret, QR
    opsbot archive-approvals      (root) move used approvals out of the apply's reach
    opsbot apply [--dry-run]      (root) run approved plans now, in opsbot-apply.service
    opsbot audit ID               the plan's story from the journal
    opsbot diagnose UNIT          ask the diagnosis service why UNIT is down (live steps)
    opsbot replay [ID...]         (root) recorded diagnoses asked again of today's policy
    opsbot mcp                    the read verbs for an agent client (MCP over stdio)
    opsbot watch UNIT             (root) diagnose UNIT automatically whenever it fails
    opsbot unwatch UNIT           (root) stop that
    opsbot check-config           validate /etc/opsbot/opsbot.toml, show the privilege mode
    opsbot policy VERB            the standing approval rules: check, test ID which would
                                  approve a plan; (root) report, pause, resume them all
    opsbot polkit-rule [--write]  the polkit rule generated from the policy
    opsbot firewall [--write]     IP filters and the page's socket, from the config
    opsbot notify test [CHANNEL]  (root) a test message on the channels, and their answers
    opsbot help [VERB]            a command's help, as `opsbot VERB --help` prints it

Errors are an ``opsbot: error:`` message on stderr (and an ``opsbot: hint:`` saying what
to do), each folded to 100 columns (opsbot_cli/say.py), and a non-zero exit status, for
every user: 1 an error (a daemon away, permission denied, a file opsbot cannot use, an
internal error), 2 usage (bad arguments, or a root-only command as another user), 78 an
invalid configuration; never a traceback (OPSBOT_DEBUG=1 shows one for an internal
error). --json where scripts read.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NamedTuple

from opsbot_cli.errors import RootRequired, again_as_root, from_os_error, internal_error
from opsbot_cli.say import Parser, error_lines
from shared_io.errors import ConfigError, OpsbotError
from shared_io.exit_codes import ERROR, TABLE, help_text
from shared_io.paths import Paths
from shared_io.startup import imports_done, start_lean


class Command(NamedTuple):
    name: str
    module: str
    summary: str


#: Every command, in the order --help lists them: its name, the module that parses and
#: runs it, and its line in --help (the module's own words; a test checks they agree).
#: Only the module of the command being run is imported, so `opsbot --help` imports
#: none of them and `opsbot plans` does not pay for the models or the plan store.
COMMANDS = (
    Command("plans", "opsbot_cli.plans", "list plans with their states"),
    Command("show", "opsbot_cli.show", "show one plan: goal, steps as argv, history"),
    Command(
        "approve",
        "opsbot_cli.approve",
        "(root) approve a plan: binds an approval to its sha256, with expiry",
    ),
    Command(
        "reject",
        "opsbot_cli.reject",
        "(root) refuse a plan and remove its approval; it will never run",
    ),
    Command(
        "approvers",
        "opsbot_cli.approvers",
        "(root) add an approver of the approval page (a TOTP secret, its QR code); list them",
    ),
    Command(
        "archive-approvals",
        "opsbot_cli.archive",
        "(root) move used approvals where no apply reads them (opsbot-archive.service)",
    ),
    Command(
        "apply",
        "opsbot_cli.apply",
        "run approved plans now (opsbot-apply.timer and .path do this)",
    ),
    Command(
        "audit", "opsbot_cli.audit", "tell a plan's story from the journal (trusted entries only)"
    ),
    Command(
        "diagnose",
        "opsbot_cli.diagnose",
        "ask the diagnosis service why a unit is down; shows each step live",
    ),
    Command(
        "replay",
        "opsbot_cli.replay",
        "replay recorded diagnoses through today's policy, answered from the record",
    ),
    Command(
        "mcp",
        "opsbot_cli.mcp_server",
        "serve diagnose, plans, show and audit to an agent client (MCP over stdio)",
    ),
    Command(
        "watch",
        "opsbot_cli.watch",
        "(root) diagnose UNIT automatically when it fails (OnFailure= drop-in)",
    ),
    Command("unwatch", "opsbot_cli.watch", "(root) remove the drop-in `opsbot watch` wrote"),
    Command(
        "check-config",
        "opsbot_cli.check_config",
        "validate the config and report the privilege mode",
    ),
    Command(
        "policy",
        "opsbot_cli.policy",
        "the standing approval rules: check, test a plan; report, pause, resume them",
    ),
    Command(
        "polkit-rule",
        "opsbot_cli.polkit_rule",
        "print (or --write) the polkit rule generated from the policy",
    ),
    Command(
        "firewall",
        "opsbot_cli.firewall",
        "print (or --write) the IP filters of opsbot-web and opsbot-notify, and where the "
        "page listens, from the config",
    ),
    Command(
        "notify",
        "opsbot_cli.notify",
        "(root) send a test message to a notification channel, or to each, and say its answer",
    ),
    Command(
        "help", "opsbot_cli.help", "print a command's help, the same as `opsbot COMMAND --help`"
    ),
)


EPILOG = """\
a session (as an operator in group opsbot-operators; approve as root):
  opsbot diagnose app.service     why it is down; proposes a plan (exit 3) or a note
  opsbot plans                    what waits
  opsbot show ID                  its steps as argv, each precondition against live state
  opsbot approve ID --wait        (root) approve, follow the apply and its verification
  opsbot audit ID                 the story (needs group systemd-journal, or root); on a
                                  journal collector, each sending host's own (root)

""" + help_text()


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            said = version("opsbot")
        except PackageNotFoundError:
            said = "unknown (not installed)"
        print(f"opsbot {said}")
        parser.exit()


def _module_to_run(argv: Sequence[str]) -> str | None:
    """The module of the command ``argv`` names (its first word that is a command)."""
    modules = {c.name: c.module for c in COMMANDS}
    return next((modules[word] for word in argv if word in modules), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command (``argv`` None: for tests and the man page), or the
    one ``argv`` needs: the real parser of the command it names, and for every other
    command only its line in --help (the same --help, without importing its module)."""
    parser = Parser(
        prog="opsbot",
        description="Review, approve and apply the fixes opsbot proposes for failed systemd\n"
        "services. Nothing changes on the host until root approves a plan's exact sha256\n"
        "with `opsbot approve`.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="print opsbot's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = None if argv is None else _module_to_run(argv)
    added: set[str] = set()
    for command in COMMANDS:
        if command.module in added:
            continue  # its module added it with the one before (watch, unwatch)
        if argv is None or command.module == wanted:
            import_module(command.module).add_parser(sub)
            added.add(command.module)
        else:
            sub.add_parser(command.name, help=command.summary, description=command.summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    start_lean()  # before a command's module loads structlog or builds a model
    program = argv is None  # run as ``opsbot``, not called by a test
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    if program:
        imports_done()  # the command's module is loaded
    if "structlog" in sys.modules:  # the command's modules log (plans, show do not)
        from shared_io import log as logsetup

        logsetup.configure("opsbot")
    try:
        status: int = _run(args, argv)
        return status
    except OpsbotError as exc:
        # The message first, the hint on its own line; each folds to 100 columns.
        print("\n".join(error_lines(exc.message, exc.hint)), file=sys.stderr)
        return documented(exc.exit_status)
    except KeyboardInterrupt:
        return 130


def documented(status: int) -> int:
    """``status`` if the exit-status table has it, else 1: a daemon's own sysexits value
    (74 a store that cannot be written, 69 away) is an error to a script."""
    return status if status in {code for code, _ in TABLE} else ERROR


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command, with what it raises from outside opsbot's error tree translated at
    this boundary (:func:`as_console_error`): one line that says what to do, never a
    traceback; ``OPSBOT_DEBUG=1`` lets an unexpected error show its traceback."""
    try:
        status: int = args.func(args, Paths.from_env())
        return status
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        said = as_console_error(exc, argv)
        if said is exc:
            raise
        if os.environ.get("OPSBOT_DEBUG") and not isinstance(exc, OpsbotError | OSError):
            raise
        raise said from exc


def as_console_error(exc: Exception, argv: list[str]) -> OpsbotError:
    """What ``opsbot ARGV`` says of ``exc`` (opsbot_cli/errors.py): opsbot's own errors
    as they are, a root-only command with the line to type as root, a file's
    PermissionError or other OSError as what to do about it, anything else as an
    internal error. ``opsbot mcp`` says its tools' errors the same way."""
    if isinstance(exc, RootRequired):  # the hint repeats what the user typed, with sudo
        return RootRequired(exc.message, hint=f"run it as root: {again_as_root(argv)}")
    if isinstance(exc, ConfigError) and isinstance(exc.__cause__, PermissionError):
        return from_os_error(exc.__cause__, argv)
    if isinstance(exc, OpsbotError):
        return exc
    if isinstance(exc, OSError):
        return from_os_error(exc, argv)
    return internal_error(exc)


if __name__ == "__main__":
    sys.exit(main())
