"""Long listings page as systemctl's do: through $SYSTEMD_PAGER / $PAGER / less, only on
a terminal, never with --no-pager or into a pipe (issue 13, item 10)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from opsbot_cli import screen
from shared_io.run import page


def test_the_pager_gets_the_whole_text_and_its_environment(tmp_path: Path) -> None:
    """The pager reads what would have been printed, with LESS as systemd sets it."""
    seen = tmp_path / "paged"
    argv = ["sh", "-c", f'cat > {seen}; printf "%s" "$LESS" > {seen}.less']
    env = screen.pager_environment({"PATH": os.environ["PATH"]})
    assert page(argv, "PLAN  STATE\nx  PROPOSED\n", env) is True
    assert seen.read_text() == "PLAN  STATE\nx  PROPOSED\n"
    assert Path(f"{seen}.less").read_text() == screen.LESS


def test_a_pager_that_cannot_start_leaves_the_printing_to_the_caller() -> None:
    """A pager that cannot be started says so, and the caller prints the text itself."""
    assert page(["/nonexistent/pager"], "text\n", {}) is False


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("no_pager", [True, False])
def test_not_a_terminal_or_no_pager_prints_straight(
    monkeypatch: pytest.MonkeyPatch, no_pager: bool, tmp_path: Path
) -> None:
    """Into a pipe (or with --no-pager on a terminal), the lines are printed and no pager
    starts, whatever $PAGER says."""
    started = tmp_path / "started"
    monkeypatch.setenv("PAGER", f"touch {started}")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    screen.show(["a", "b"], no_pager=True, stream=terminal)
    piped = io.StringIO()
    screen.show(["a", "b"], no_pager=no_pager, stream=piped)
    assert terminal.getvalue() == "a\nb\n" and piped.getvalue() == "a\nb\n"
    assert not started.exists()


def test_on_a_terminal_the_pager_is_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """stdout a terminal, no --no-pager: $PAGER gets the lines; nothing else is printed."""
    seen = tmp_path / "paged"
    monkeypatch.setenv("PAGER", f"sh -c 'cat > {seen}'")
    monkeypatch.delenv("SYSTEMD_PAGER", raising=False)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    screen.show(["a", "b"], no_pager=False)
    assert seen.read_text() == "a\nb\n"
    assert terminal.getvalue() == ""


def test_root_through_sudo_pages_only_with_a_secure_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """An approver allowed `sudo opsbot show` must not reach a root shell through $PAGER
    or less's `!`: under sudo as root, only less, with LESSSECURE=1, as systemd does."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    environ = {"SUDO_UID": "1000", "PAGER": "sh -c 'exec sh'"}
    assert screen.pager_argv(environ, is_tty=True) == ["less"]
    assert screen.pager_environment(environ)["LESSSECURE"] == "1"
    plain_root = {"PAGER": "most"}
    assert screen.pager_argv(plain_root, is_tty=True) == ["most"]
    assert "LESSSECURE" not in screen.pager_environment(plain_root)
    assert screen.pager_argv({**environ, "SYSTEMD_PAGERSECURE": "0"}, is_tty=True) == [
        "sh",
        "-c",
        "exec sh",
    ]
