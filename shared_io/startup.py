"""What an opsbot process leaves out of its start-up, before anything loads structlog or
builds a model: libraries and plugins it never uses, which would load only because they
happen to be installed beside it.

- structlog loads its console renderers' libraries when it is imported, wherever they
  are installed (``structlog.dev``: rich, better_exceptions, colorama; rich alone costs
  a process about 30 ms of CPU). opsbot never renders through them: every unit logs to
  journald, or one plain line to stderr (shared_io.log.JournaldSink). structlog expects
  them to be absent, as on a host that never installed them.
- pydantic looks up and loads the plugins of every installed distribution when it
  builds the first model (the ``pydantic`` entry points: a scan of the environment's
  metadata, then their code in this process). opsbot's models use none.

The entry points that start often call :func:`start_lean` first: opsbot-apply and
opsbot-executor through ``executor_svc``, the console (and opsbot-archive, which is
``opsbot archive-approvals``) through ``opsbot_cli.main``. What is loaded already stays,
and ``PYDANTIC_DISABLE_PLUGINS`` set by the environment wins.

Once a short-lived program has loaded what it runs, :func:`imports_done` keeps the
garbage collector from walking those objects again: they live until the process ends,
and at its end Python's last collections would walk every one of them (some 40,000
objects with the models: about 40 ms of a run, against 6 ms without them).
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["CONSOLE_RENDERERS", "imports_done", "start_lean"]

#: What structlog imports for console rendering only, when it is installed.
CONSOLE_RENDERERS = ("rich", "better_exceptions", "colorama")


def start_lean() -> None:
    """Make the console renderers' libraries absent for this process (``import rich``
    raises ImportError: ``None`` in ``sys.modules`` is Python's own way to say a module
    is not to be loaded), unless one is loaded already; and load no pydantic plugin."""
    for name in CONSOLE_RENDERERS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def imports_done() -> None:
    """For a program run once (opsbot-apply, a console command), when its modules are
    loaded: what exists now is kept out of every later collection (``gc.freeze``), the
    collections at exit included. Objects made later are collected as ever; nothing is
    left to collect at this point (its modules and their classes only)."""
    gc.freeze()
