"""The docs' command blocks, as the tests that follow the docs literally read them.

README.md holds the install's blocks; docs/operating.md (:data:`OPERATING`) the
approvers', the phone's and the apply windows'. A block the tests run is a fenced block
right after an HTML comment naming it::

    <!-- install-commands: as root, in the checkout -->
    ```sh
    packaging/install.sh        # a comment
    ```

:func:`block` returns its text; :func:`commands` its lines as argv, the way ``sh`` splits
simple commands (a trailing backslash continues a line, ``#`` starts a comment). A block
may hold only simple commands: a pipe, a redirection or ``&&`` would make the argv differ
from what a shell runs, so :func:`commands` refuses them.

Usage::

    for argv in commands(block("install-commands")):  # README.md's
        run = install_argv(argv)
        if run is None:  # the edit of /etc/opsbot/opsbot.toml
            ct.write_file(CONFIG, block("install-config") + "\n")
        else:
            ct.run(["bash", "-c", f"cd {REPO_MOUNT} && {shlex.join(run)}"])
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from testbed.container import REPO_ROOT

README = REPO_ROOT / "README.md"
#: The operator's manual, where the blocks beyond the install live.
OPERATING = REPO_ROOT / "docs" / "operating.md"
_SHELL_SYNTAX = frozenset({"|", "||", "&", "&&", ";", "<", ">", ">>", "2>", "$(", "`"})


class ReadmeError(ValueError):
    """A doc lacks a block the tests follow, or holds it twice, or it is not simple."""


def block(name: str, text: str | None = None, *, doc: Path = README) -> str:
    """The fenced block after ``<!-- NAME ... -->`` in ``doc`` (README.md unless told, or
    ``text``), without its fences; exactly one such block must exist."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    pattern = rf"^<!-- {re.escape(name)}(?::[^\n]*)? -->\n```[a-z]*\n(.*?)^```$"
    found = re.findall(pattern, text, flags=re.MULTILINE | re.DOTALL)
    if len(found) != 1:
        raise ReadmeError(f"{doc.name} has {len(found)} blocks marked <!-- {name} -->, not 1")
    return str(found[0])


def commands(text: str) -> list[list[str]]:
    """The command lines of a ``sh`` block as argv: continued lines joined, comments and
    blank lines dropped."""
    joined = re.sub(r"\\\n", " ", text)
    argvs = []
    for line in joined.splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        syntax = [word for word in argv if word in _SHELL_SYNTAX or "$(" in word]
        if syntax:
            raise ReadmeError(f"not a simple command (shell syntax {syntax}): {line.strip()}")
        argvs.append(argv)
    return argvs


#: The file the README's install tells root to edit.
CONFIG = "/etc/opsbot/opsbot.toml"


def install_argv(argv: list[str]) -> list[str] | None:
    """What the tests and the demo run for one line of the README's install block: the line
    itself, but ``packaging/install.sh`` with ``--offline`` appended (the container has no
    network; its venv holds the dependencies) and None for ``editor CONFIG``, the edit, which
    they make by writing the file."""
    if argv == ["editor", CONFIG]:
        return None
    if argv[0] == "packaging/install.sh":
        return [*argv, "--offline"]
    return argv


def enabled_units(argvs: list[list[str]]) -> list[str]:
    """The units the ``systemctl enable --now`` lines among ``argvs`` name."""
    units = []
    for argv in argvs:
        if argv[:3] == ["systemctl", "enable", "--now"]:
            units += argv[3:]
    return units


def units_to_enable(unit_dir: Path = REPO_ROOT / "units") -> list[str]:
    """opsbot's units that something must enable: those with an ``[Install]`` section."""
    return sorted(
        path.name
        for path in unit_dir.iterdir()
        if path.is_file() and "\n[Install]\n" in "\n" + path.read_text(encoding="utf-8")
    )
