"""What an opsbot program leaves out of its start-up (shared_io.startup): structlog's
console renderers and pydantic's plugins are not loaded by opsbot-apply, the executor or
the console, logging still reaches its sink, and once the program itself has loaded its
modules the collector leaves them alone. Each probe runs in a fresh interpreter, as a
unit starts."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
#: How each program starts, up to the point where its command would run.
STARTS = {
    "opsbot-apply": "import executor_svc.apply_service",
    "opsbot": (
        "from opsbot_cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    ),
}
LOGS = """
from shared_io import log
log.configure("probe", journal=False)
import structlog
structlog.get_logger("probe").info("probe.logged", answer=42)
"""


def probe(code: str, tmp_path: Path, **env: str) -> tuple[Any, str]:
    """What ``code`` printed last (JSON) and its stderr, run in a fresh interpreter with
    an environment that sets no pydantic switch of its own unless ``env`` does."""
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": str(REPO), "OPSBOT_SOCKET": str(tmp_path / "none"), **env},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.mark.parametrize("program", sorted(STARTS))
def test_a_program_loads_no_console_renderer_nor_plugin_and_still_logs(
    program: str, tmp_path: Path
) -> None:
    """opsbot-apply (the executor's package) and the console (its main) load structlog
    without rich, better_exceptions or colorama, even where they are installed, and
    switch pydantic's plugins off; an event still reaches its sink."""
    code = (
        f"{STARTS[program]}\n{LOGS}\n"
        "import json, os, sys\n"
        "print(json.dumps([[n for n in ('rich', 'better_exceptions', 'colorama')"
        " if sys.modules.get(n)], os.environ.get('PYDANTIC_DISABLE_PLUGINS')]))"
    )
    (renderers, plugins), err = probe(code, tmp_path)
    assert "probe: info: probe.logged answer=42" in err
    assert renderers == []
    assert plugins == "__all__"


@pytest.mark.skipif(importlib.util.find_spec("rich") is None, reason="rich is not installed")
def test_what_is_loaded_already_stays_and_the_environment_wins(tmp_path: Path) -> None:
    """A renderer loaded before the program starts is left in place; a plugin switch the
    environment sets is not overridden."""
    code = (
        "import rich\nimport executor_svc\nimport json, os, sys\n"
        "print(json.dumps([sys.modules['rich'] is rich, os.environ['PYDANTIC_DISABLE_PLUGINS']]))"
    )
    said, _ = probe(code, tmp_path, PYDANTIC_DISABLE_PLUGINS="logfire")
    assert said == [True, "logfire"]


@pytest.mark.parametrize(("argv", "frozen"), [("None", True), ("['plans']", False)])
def test_the_program_freezes_what_it_loaded_a_call_from_a_test_does_not(
    argv: str, frozen: bool, tmp_path: Path
) -> None:
    """``opsbot plans`` run as the program (its argv from sys.argv) has its loaded modules
    out of the collector's way by the time the command runs (gc.freeze); main called with
    an argv, as a test calls it, freezes nothing."""
    code = (
        "import gc, json, sys\nsys.argv = ['opsbot', 'plans']\n"
        "from opsbot_cli.main import main\n"
        f"status = main({argv})\n"
        "print(json.dumps([status, gc.get_freeze_count() > 0]))"
    )
    (status, froze), _ = probe(code, tmp_path)
    assert status == 1  # no executor socket here: an error line, after the imports
    assert froze is frozen
