"""``systemctl reload opsbot-web`` (SIGHUP): the page reads opsbot.toml again.

What the page takes from the file is ``[web]``, built into its server at start (the
connection and rate limits, the body cap, whom to believe about a client's address), and
the file's digest, which it tells root's approver with each relay and systemd in its
status (``config sha256 ...``, what ``opsbot check-config`` reads). So a reload:

- a file that does not load: the page goes on with the one read before, logs
  ``config.reload_failed`` (the file, line and key) and says so in its status;
- ``[web]`` unchanged: the new digest from now on, ``config.reloaded``;
- ``[web]`` changed: the page stops as on ``systemctl stop`` (what is being answered is
  answered), ``config.restart``, and opsbot-web.socket starts it again with the new file
  at the next connection, which waits on the socket meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import structlog

from shared_io.activation import notify
from shared_io.config import load_with_digest
from shared_io.errors import ConfigError
from shared_schema.config import WebSettings
from shared_schema.config_state import page_status
from web_svc.approver import ApproverClient

log = structlog.get_logger("opsbot.web")


class Reloader:
    """What SIGHUP does to a page serving ``settings`` from the file of ``digest``;
    ``stop`` ends the server gracefully."""

    def __init__(
        self,
        path: Path,
        settings: WebSettings,
        digest: str,
        client: ApproverClient,
        stop: Callable[[], None],
    ) -> None:
        self.path = path
        self.settings = settings
        self.digest = digest
        self.client = client
        self.stop = stop

    def __call__(self) -> str:
        """Read the file again; what happened: ``failed``, ``reloaded`` or ``restart``."""
        try:
            config, digest = load_with_digest(self.path)
        except ConfigError as exc:
            log.error("config.reload_failed", error=exc.message, hint=exc.hint, keeps=self.digest)
            notify(f"STATUS={page_status(self.digest, reload_failed=True)}")
            return "failed"
        if config.web != self.settings:
            log.info("config.restart", why="[web] changed: the socket starts the page again")
            self.stop()
            return "restart"
        self.digest = digest
        self.client.config_digest = digest
        notify(f"STATUS={page_status(digest)}")
        log.info("config.reloaded", sha256=digest)
        return "reloaded"


__all__ = ["Reloader"]
