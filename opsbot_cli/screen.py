"""What the read-only verbs print, laid out as systemctl lays out its lists: lines of at
most :data:`WIDTH` columns unless ``--full`` (cut with an ellipsis), times with their
zone, untrusted text escaped; which pager a person at a terminal would get.

Light on purpose: ``opsbot plans`` and ``opsbot show`` start without building a model;
untrusted text is escaped by shared_schema.escape.printable, the one rule for it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from shared_schema.escape import printable

__all__ = ["WIDTH", "columns", "cut", "fit", "json_text", "printable", "show", "when"]

WIDTH = 100
#: The narrowest a terminal is taken to be: below it, prose would fold a word a line.
NARROWEST = 40
ELLIPSIS = "…"
#: What systemd sets $LESS to for its pager unless $SYSTEMD_LESS says otherwise.
LESS = "FRSXMK"


def when(value: str | datetime) -> str:
    """An ISO time (as the executor sends it) in local time with its zone:
    ``2026-12-01 15:20:01 UTC``."""
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def columns(environ: Mapping[str, str] | None = None) -> int:
    """How wide the operator's lines are: ``$COLUMNS`` (as the shell sets it), never more
    than :data:`WIDTH` nor less than :data:`NARROWEST`; :data:`WIDTH` when it is unset or
    not a number."""
    said = (os.environ if environ is None else environ).get("COLUMNS", "").strip()
    if not said.isdigit():
        return WIDTH
    return max(NARROWEST, min(int(said), WIDTH))


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, its end replaced by an ellipsis if longer."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def fit(line: str, full: bool) -> str:
    """A line of output: whole with ``--full``, else at most :data:`WIDTH` columns."""
    return line if full else cut(line, WIDTH)


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def pager_secure(environ: Mapping[str, str]) -> bool:
    """systemd's secure pager mode: ``$SYSTEMD_PAGERSECURE`` if set, else on where this
    process has privileges its user did not log in with (root through sudo or pkexec, or
    a setuid euid). A user who may run only ``sudo opsbot show`` must not get a root
    shell through the pager's ``!command``."""
    said = environ.get("SYSTEMD_PAGERSECURE", "").strip().lower()
    if said in ("0", "no", "false", "off"):
        return False
    if said in ("1", "yes", "true", "on"):
        return True
    elevated = os.geteuid() == 0 and any(k in environ for k in ("SUDO_UID", "PKEXEC_UID"))
    return elevated or os.geteuid() != os.getuid()


def pager_argv(environ: Mapping[str, str], is_tty: bool) -> list[str] | None:
    """The pager to page through, as systemctl picks it: none unless stdout is a
    terminal; ``$SYSTEMD_PAGER``, else ``$PAGER``, else ``less``; none if that is empty
    or ``cat``. In secure mode (:func:`pager_secure`) only ``less``, which
    :func:`pager_environment` then runs with ``LESSSECURE=1``."""
    if not is_tty:
        return None
    if pager_secure(environ):
        return ["less"]
    said = environ.get("SYSTEMD_PAGER", environ.get("PAGER", "less"))
    argv = shlex.split(said) if said.strip() else []
    return None if not argv or argv == ["cat"] else argv


def pager_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The pager's environment: ours, with ``LESS`` as systemd sets it (``$SYSTEMD_LESS``,
    else ``FRSXMK``: quit if one screen, raw colours, chop long lines, no init, ...)."""
    env = {**environ, "LESS": environ.get("SYSTEMD_LESS", LESS)}
    if pager_secure(environ):
        env["LESSSECURE"] = "1"  # no shell escapes, no editor, no log files
    return env


def show(lines: Sequence[str], *, no_pager: bool, stream: TextIO | None = None) -> None:
    """Print ``lines``, on ``stream`` (stdout), through the pager :func:`pager_argv`
    picks where stdout is a terminal and ``--no-pager`` was not given, as systemctl does
    (shared_io.run.page, the one place a pager starts)."""
    stream = stream or sys.stdout
    text = "".join(f"{line}\n" for line in lines)
    is_tty = stream is sys.stdout and stream.isatty()
    argv = None if no_pager else pager_argv(os.environ, is_tty)
    if argv is not None:
        from shared_io.run import page

        stream.flush()
        if page(argv, text, pager_environment(os.environ)):
            return
    stream.write(text)
    stream.flush()
