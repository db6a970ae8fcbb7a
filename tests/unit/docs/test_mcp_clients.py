"""What docs/operating.md's "Agent clients (MCP)" tells an operator to configure starts
`opsbot mcp` (here or through ssh), in each client's own format, and the SDK it says to
install is the one opsbot's `mcp` extra pins."""

from __future__ import annotations

import json
import re
import tomllib

from testbed.container import REPO_ROOT
from testbed.readme import OPERATING, block, commands

SERVER = ["opsbot", "mcp"]


def test_the_claude_code_lines_start_opsbot_mcp_here_and_over_ssh() -> None:
    """`claude mcp add NAME -- COMMAND...`: the command is `opsbot mcp`, or `ssh HOST
    opsbot mcp`."""
    started = []
    for argv in commands(block("mcp-clients", doc=OPERATING)):
        assert argv[:3] == ["claude", "mcp", "add"]
        started.append(argv[argv.index("--") + 1 :])
    assert started == [SERVER, ["ssh", "web1", *SERVER]]


def test_the_json_configs_are_each_client_s_format() -> None:
    """Claude Desktop's ``mcpServers`` and VS Code's ``servers`` (a stdio entry) are
    valid JSON whose command and arguments are `ssh web1 opsbot mcp`."""
    desktop = json.loads(block("mcp-claude-desktop", doc=OPERATING))["mcpServers"]["web1"]
    vscode = json.loads(block("mcp-vscode", doc=OPERATING))["servers"]["web1"]
    assert vscode.pop("type") == "stdio"
    for entry in (desktop, vscode):
        assert [entry["command"], *entry["args"]] == ["ssh", "web1", *SERVER]


def test_the_sdk_the_manual_installs_is_the_extra_s_pin() -> None:
    """The pip line installs exactly what pyproject.toml's `mcp` extra requires."""
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["mcp"]
    section = OPERATING.read_text().split("## Agent clients (MCP)")[1].split("\n## ")[0]
    assert re.findall(r"pip install '([^']+)'", section) == extra
