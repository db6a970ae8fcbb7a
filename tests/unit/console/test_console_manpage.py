"""The man page opsbot(8) as install.sh generates it (packaging/opsbot-manpage.sh, with
argparse-manpage from opsbot's own parser): it documents every command of main.py's
table with its line and usage, and the exit-status table scripts rely on (issue 13,
item 10). ``man opsbot`` after install.sh is the integration test's part."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from opsbot_cli.main import COMMANDS
from shared_io.exit_codes import TABLE

REPO = Path(__file__).resolve().parents[3]
#: roff's font changes and italic corrections, which argparse-manpage puts around words.
ROFF_MARKUP = re.compile(r"\\f[BIRP]|\\[,/]")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The page's roff source, generated with this venv's argparse-manpage, as text
    (hyphens and fonts unescaped)."""
    output = tmp_path_factory.mktemp("man") / "opsbot.8"
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(
        ["bash", str(REPO / "packaging" / "opsbot-manpage.sh"), str(venv), str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return ROFF_MARKUP.sub("", output.read_text()).replace("\\-", "-")


def missing_commands(page: str) -> list[str]:
    """The commands of main.py's table that the page does not document: each needs its
    entry in the command list (with its --help line) and a section with its usage."""
    missing = []
    for command in COMMANDS:
        listed = f"opsbot {command.name}\n{command.summary}\n" in page
        section = f".SH COMMAND 'opsbot {command.name}'" in page
        usage = f"usage: opsbot {command.name} " in page
        if not (listed and section and usage):
            missing.append(command.name)
    return missing


def test_the_checker_notices_a_command_the_page_lacks(page: str) -> None:
    """Shown a page with one command cut out, the checker names that command."""
    cut = page.replace("opsbot unwatch", "opsbot (removed)")
    assert missing_commands(cut) == ["unwatch"]


def test_the_page_documents_every_command(page: str) -> None:
    """The page is opsbot(8), and every command of main.py's table is in it with its
    summary and usage, so a new command cannot ship undocumented."""
    assert page.startswith('.TH OPSBOT "8"')
    assert missing_commands(page) == []


def test_the_page_documents_every_exit_status(page: str) -> None:
    """The exit-status table (shared_io/exit_codes.py) is in the page, every row of it,
    as --help prints it."""
    assert "exit status:" in page
    for code, what in TABLE:
        assert f"  {code:<3} {what}\n" in page, code
