"""opsbot.toml for a daemon that lives across edits of it: read again before an answer
whenever it changed, the configuration read before kept in force (and said in the
journal) when the new file does not load. The console reads the file once
(shared_io.config) and does not import this module.

    live = LiveConfig(path)          # a ConfigError when the file does not load now
    config = live.current()          # before each answer
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import structlog

from shared_io.config import load_with_digest
from shared_io.errors import ConfigError
from shared_io.paths import config_path
from shared_schema import OpsbotConfig

log = structlog.get_logger("opsbot.config")


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is written or replaced (None: there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class LiveConfig:
    """The config file as it stands, for a daemon: :meth:`current` reads it again when
    it changed since the last read (a new inode, size, mtime or ctime), and only then.
    A file that does not load keeps the configuration read before in force and is said
    once in the journal (``config.reload_failed``, with the file, line and key); the
    next change is tried again. Each answer gets one whole, validated configuration,
    never one half read."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = config_path() if path is None else path
        self._seen = _stamp(self.path)
        self.config, self.digest = load_with_digest(self.path)  # a ConfigError here is the caller's
        self._lock = threading.Lock()

    def current(self) -> OpsbotConfig:
        stamp = _stamp(self.path)
        if stamp == self._seen:
            return self.config
        with self._lock:
            if stamp != self._seen:
                self._seen = stamp  # before the read: a write after it is seen again
                self._reload()
            return self.config

    def _reload(self) -> None:
        try:
            config, digest = load_with_digest(self.path)
        except ConfigError as exc:
            log.error(
                "config.reload_failed",
                error=exc.message,
                kept=self.digest[:12],
                hint="the configuration read before stays in force; opsbot check-config "
                "names the error",
            )
            return
        if digest != self.digest:
            log.info("config.reloaded", path=str(self.path), digest=digest[:12])
        self.config, self.digest = config, digest
