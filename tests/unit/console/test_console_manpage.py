"""The man page opsbot(8) as install.sh generates it (packaging/opsbot-manpage.sh, with
opsbot_cli/manpage.py and argparse-manpage from opsbot's own parser): it documents every
command of main.py's table with its line and usage, and the exit-status table scripts
rely on (issue 13, item 10); its NAME line is one mandb indexes, and no line of help text
is taken for a roff request (issue 41). ``man opsbot`` after install.sh, with every
verb's --help in its sections, is the integration test's part."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opsbot_cli.main import COMMANDS
from opsbot_cli.manpage import NAME, render
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


def test_the_name_line_is_one_mandb_indexes(page: str, tmp_path: Path) -> None:
    """lexgrog, which reads NAME as mandb does for ``man -k`` and ``whatis``, finds
    ``opsbot - WHAT IT DOES`` in the page."""
    source = tmp_path / "opsbot.8"
    source.write_text(page.replace("-", "\\-"))  # the fixture unescaped them
    done = subprocess.run(["lexgrog", str(source)], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == f'{source}: "opsbot - {NAME}"'


def test_a_help_line_that_starts_like_a_roff_request_is_printed(tmp_path: Path) -> None:
    """A description, epilog or option help whose line starts with ``.`` or ``'`` (a
    roff request) is still on the page as man prints it, not swallowed."""
    parser = argparse.ArgumentParser(prog="opsbot", formatter_class=argparse.RawTextHelpFormatter)
    verb = parser.add_subparsers().add_parser(
        "verb",
        description=".dotted description",
        epilog="examples:\n.dotted example\n'quoted example'",
        formatter_class=argparse.RawTextHelpFormatter,
    )
    verb.add_argument("--flag", help="first line\n'quoted help line'")
    source = tmp_path / "opsbot.8"
    source.write_text(render(parser, "1.0"))
    shown = subprocess.run(
        ["man", "--nh", "--nj", "-l", "-P", "cat", str(source)],
        capture_output=True,
        text=True,
        env={"LANG": "C.UTF-8", "MANWIDTH": "100", "PATH": "/usr/bin:/bin"},
        timeout=30,
    ).stdout
    for line in (".dotted description", ".dotted example", "'quoted example'", "'quoted help"):
        assert line in shown
