"""``opsbot mcp``: opsbot for an agent client (Claude Code, Claude Desktop, VS Code ...),
a Model Context Protocol server on stdin and stdout that the client starts, here or
through ``ssh HOST opsbot mcp``.

Its tools are the console's read verbs, run as the user who started it over the same
sockets (opsbot_cli.mcp_server.tools): diagnose, list_plans, show_plan, plan_story. No
tool approves; a plan's result says how a person does. What the host logged reaches the
client only as quoted data (opsbot_cli.mcp_server.quoting).

The SDK (the ``opsbot[mcp]`` extra) is imported by opsbot_cli.mcp_server.server alone,
when serving starts: ``opsbot mcp --help`` and ``--check`` work without it, and no other
verb imports it. ``--check`` asks the sockets what the tools would meet, in the console's
words; a terminal on stdin is a person, who is told how to configure a client instead.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import sys
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, requires, version

# Imported here so that main.py configures logging (to the journal, or stderr) before the
# server starts: structlog's own default would print to stdout, the client's channel.
import structlog  # noqa: F401

from opsbot_cli.clients import ask_json
from opsbot_cli.errors import ConsoleError, UsageError
from shared_io.paths import Paths

SUMMARY = "serve diagnose, plans, show and audit to an agent client (MCP over stdio)"
EPILOG = """\
An agent client starts `opsbot mcp` and talks to it on stdin and stdout (the Model Context
Protocol); a person does not type it. Configure the client:
  Claude Code      claude mcp add --scope user opsbot -- opsbot mcp
  Claude Desktop   claude_desktop_config.json:
                   {"mcpServers": {"opsbot": {"command": "opsbot", "args": ["mcp"]}}}
  VS Code          .vscode/mcp.json:
                   {"servers": {"opsbot": {"type": "stdio", "command": "opsbot",
                                           "args": ["mcp"]}}}
  another host     the same with command "ssh" and args ["HOST", "opsbot", "mcp"]:
                   claude mcp add web1 -- ssh web1 opsbot mcp  (a key login as an operator
                   of HOST; nothing of opsbot's where the client runs)

The tools: diagnose, list_plans, show_plan, plan_story. They run as you, over the sockets
your `opsbot` uses, with your groups (opsbot-operators; plan_story also systemd-journal)
and the diagnosis quotas, and change nothing on the host. There is no approve tool: a
person approves with `sudo opsbot approve ID --sha256 ...` or on the approval page (or a
standing rule root wrote in opsbot.toml approves it). Text
the host logged reaches the agent quoted, as data. Errors are the console's, as MCP tool
errors.

examples:
  opsbot mcp --check              can this user's tools reach opsbot? (the same errors)
  ssh web1 opsbot mcp --check     the same on web1, as an agent's ssh would log in

It needs the MCP SDK, opsbot's `mcp` extra, in opsbot's venv: `opsbot mcp --check` says
what to install (docs/operating.md, "Agent clients (MCP)").
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help=SUMMARY,
        description=SUMMARY,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="ask the executor as list_plans would and check that the SDK is installed; "
        "exit 0 if both hold, else the console's error",
    )
    p.add_argument(
        "--json", action="store_true", help="with --check: what it found, as a JSON object"
    )
    p.set_defaults(func=run)


def sdk_requirement() -> str:
    """The SDK as the ``mcp`` extra pins it (``mcp<3,>=2.3``), from opsbot's metadata."""
    try:
        wanted = requires("opsbot") or []
    except PackageNotFoundError:
        wanted = []
    for line in wanted:
        name, _, marker = line.partition(";")
        if name.strip().startswith("mcp") and "extra" in marker and "mcp" in marker:
            return name.strip()
    return "mcp"


#: The group whose members read the whole journal, which plan_story reads (as `opsbot
#: audit` does); install.sh grants it to no one.
JOURNAL_GROUP = "systemd-journal"


def journal_story(uid: int, groups: Iterable[str], user: str) -> tuple[bool, str]:
    """Whether plan_story may read the journal as ``user`` (``uid``, in ``groups``), and
    the line that says so, or how to grant it."""
    if uid == 0:
        return True, "plan_story reads the journal as root"
    if JOURNAL_GROUP in groups:
        return True, f"plan_story reads the journal (group {JOURNAL_GROUP})"
    return False, (
        f"plan_story needs group {JOURNAL_GROUP}, which {user} is not in: "
        f"`sudo usermod -aG {JOURNAL_GROUP} {user}` (from the next login; the other tools "
        "work without it)"
    )


def _own_groups() -> list[str]:
    names = []
    for gid in {os.getegid(), *os.getgroups()}:
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def _own_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check(paths: Paths, as_json: bool) -> int:
    """``--check``: the executor asked as list_plans asks it (its error is the console's,
    with its hint), then whether the SDK is installed; and whether plan_story may read
    the journal (said, not an error: the other three tools work without it)."""
    from opsbot_cli import wire
    from opsbot_cli.output import json_out

    ask_json(paths.executor_socket, wire.list_request(1), wire.plan_list)
    try:
        sdk = version("mcp")
    except PackageNotFoundError as exc:
        raise missing_sdk() from exc
    uid = os.geteuid()
    story, story_line = journal_story(uid, _own_groups(), _own_name(uid))
    if as_json:
        json_out(
            {
                "executor_socket": str(paths.executor_socket),
                "answers": True,
                "mcp": sdk,
                "plan_story": story,
            }
        )
    else:
        print(f"the executor answers this user at {paths.executor_socket}")
        print(f"the MCP SDK {sdk} is installed: an agent client may start `opsbot mcp`")
        print(story_line)
    return 0


def missing_sdk() -> ConsoleError:
    return ConsoleError(
        "opsbot mcp needs the MCP SDK, which is not installed in opsbot's venv",
        hint=f"install the extra: {sys.prefix}/bin/pip install '{sdk_requirement()}'",
    )


def run(args: argparse.Namespace, paths: Paths) -> int:
    if args.check:
        return check(paths, args.json)
    if sys.stdin.isatty():
        raise UsageError(
            "opsbot mcp talks MCP on stdin and stdout: an agent client starts it",
            hint="configure your client (`opsbot mcp --help`); `opsbot mcp --check` tests "
            "what its tools would reach",
        )
    try:
        from opsbot_cli.mcp_server import server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise missing_sdk() from exc
    server.serve(paths)
    return 0
