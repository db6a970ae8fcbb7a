"""``opsbot watch``: diagnose a unit automatically whenever it fails.

Watching a unit is one drop-in, ``/etc/systemd/system/UNIT.d/50-opsbot-watch.conf``,
with ``OnFailure=opsbot-onfailure@%N.service`` for a service (``app.service`` starts
``opsbot-onfailure@app.service``, which diagnoses ``app.service``: a name without a type
is a service) and ``@%n.service`` for any other type (``app.socket`` starts
``opsbot-onfailure@app.socket.service``); unwatching removes it. Both reload systemd.
Root only (the drop-in directory is root's).
"""

import contextlib
from pathlib import Path

import structlog

from opsbot_cli.errors import ConsoleError, UsageError
from shared_io.files import write_atomic
from shared_io.run import run

log = structlog.get_logger("opsbot.console.watch")

UNIT_DIR = Path("/etc/systemd/system")
DROPIN = (
    "# Written by `opsbot watch`; `opsbot unwatch` removes it.\n"
    "[Unit]\nOnFailure=opsbot-onfailure@{specifier}.service\n"
)


def watcher(unit: str) -> str:
    """The unit a failure of ``unit`` starts."""
    name = unit.removesuffix(".service")
    return f"opsbot-onfailure@{name}.service"


def dropin_text(unit: str) -> bytes:
    specifier = "%N" if unit.endswith(".service") else "%n"
    return DROPIN.format(specifier=specifier).encode()


def dropin_path(unit: str) -> Path:
    return UNIT_DIR / f"{unit}.d" / "50-opsbot-watch.conf"


def watch(unit: str) -> Path:
    """Write ``unit``'s watch drop-in and reload systemd; the drop-in's path."""
    dropin = dropin_path(unit)
    dropin.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dropin, dropin_text(unit), mode=0o644)
    _daemon_reload()
    log.info("unit.watched", unit=unit)
    return dropin


def unwatch(unit: str) -> Path:
    """Remove ``unit``'s watch drop-in and reload systemd; UsageError if there is none."""
    dropin = dropin_path(unit)
    try:
        dropin.unlink()
    except FileNotFoundError:
        raise UsageError(f"{unit} is not watched (no {dropin})") from None
    with contextlib.suppress(OSError):
        dropin.parent.rmdir()
    _daemon_reload()
    log.info("unit.unwatched", unit=unit)
    return dropin


def _daemon_reload() -> None:
    result = run(["systemctl", "daemon-reload"], timeout=60, merge_stderr=True)
    if not result.ok:
        raise ConsoleError(f"systemctl daemon-reload failed: {result.error or result.output}")
