"""opsbot.toml for a daemon that lives across edits of it: read again before an answer
whenever it changed, the configuration read before kept in force (and said in the
journal) when the new file does not load. The console reads the file once
(shared_io.config) and does not import this module.

    live = LiveConfig(path)          # a ConfigError when the file does not load now
    config = live.current()          # before each answer
    live.reload()                    # now, whether or not it changed (SIGHUP, ExecReload=)

A file is read only once it has been still for :data:`SETTLE` seconds and did not change
during the read: an editor that truncates the file and writes it again is never caught
half way, which could leave a valid prefix (a config without its last table, say its
apply windows) in force.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

import structlog

from shared_io.config import load_with_digest
from shared_io.errors import ConfigError
from shared_io.paths import config_path
from shared_schema import OpsbotConfig
from shared_schema.config_state import ConfigState

log = structlog.get_logger("opsbot.config")

#: Seconds a changed file must have been still before it is read.
SETTLE = 0.2
#: Reads of a file that keeps changing before the configuration in force is kept.
MAX_TRIES = 5


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is written or replaced (None: there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _get(config: object, key: str) -> object:
    for part in key.split("."):
        config = getattr(config, part)
    return config


class LiveConfig:
    """The config file as it stands, for a daemon: :meth:`current` reads it again when
    it changed since the last read (a new inode, size, mtime or ctime), and only then.
    A file that does not load keeps the configuration read before in force and is said
    once in the journal (``config.reload_failed``, with the file, line and key); the
    next change is tried again. Each answer gets one whole, validated configuration,
    never one half read."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = config_path() if path is None else path
        self._wall, self._sleep = wall, sleep
        self._seen = _stamp(self.path)
        self.config, self.digest = load_with_digest(self.path)  # a ConfigError here is the caller's
        #: The file's digest when the daemon started: what it read only then came from it.
        self.started_digest = self.digest
        self.started = self.config
        #: The message of the last edit that did not load ("" once one loads).
        self.error = ""
        self._lock = threading.Lock()
        #: Reads begun (one answer's attempt serves the answers that waited for it).
        self._tries = 0

    def current(self) -> OpsbotConfig:
        stamp = _stamp(self.path)
        if stamp == self._seen:
            return self.config
        tried = self._tries
        with self._lock:
            # Another answer's thread read (or tried to read) the file while this one
            # waited for the lock: that attempt serves this answer too.
            if self._tries == tried and _stamp(self.path) != self._seen:
                self._reload()
            return self.config

    def reload(self) -> OpsbotConfig:
        """Read the file now, changed or not (``systemctl reload``)."""
        with self._lock:
            self._reload()
            return self.config

    def state(self, start_only: Sequence[str] = ()) -> ConfigState:
        """What check-config is told: the digests, the last error, and which of the keys
        ``start_only`` (dotted paths the daemon reads only at start) differ now."""
        config = self.current()
        changed = [key for key in start_only if _get(config, key) != _get(self.started, key)]
        return ConfigState(
            digest=self.digest,
            started_digest=self.started_digest,
            error=self.error,
            restart_keys=changed,
        )

    def _settled(self) -> tuple[bool, tuple[int, ...] | None]:
        """Whether the file is still, and its stamp: written SETTLE seconds ago or more
        by its own time, else seen unchanged across SETTLE seconds of this daemon's own
        waiting (a fresh file, one dated in the future, one missing for a moment)."""
        stamp = _stamp(self.path)
        if stamp is not None and self._wall() - stamp[3] / 1e9 >= SETTLE:
            return True, stamp
        self._sleep(SETTLE)
        again = _stamp(self.path)
        return again == stamp, again

    def _reload(self) -> None:
        self._tries += 1
        for _ in range(MAX_TRIES):
            still, before = self._settled()
            if not still:
                continue
            try:
                config, digest = load_with_digest(self.path)
            except ConfigError as exc:
                if _stamp(self.path) == before:
                    self._seen = before
                    self._failed(exc)
                    return
                continue
            if _stamp(self.path) == before:
                self._seen = before  # a write after the read is seen again
                self._taken(config, digest)
                return
        log.warning(
            "config.unsettled",
            path=str(self.path),
            hint="the file kept changing while it was read; the configuration read before "
            "stays in force until it is still",
        )

    def _failed(self, exc: ConfigError) -> None:
        self.error = exc.message
        log.error(
            "config.reload_failed",
            error=exc.message,
            kept=self.digest[:12],
            hint="the configuration read before stays in force; opsbot check-config "
            "names the error",
        )

    def _taken(self, config: OpsbotConfig, digest: str) -> None:
        self.error = ""
        if digest != self.digest:
            log.info("config.reloaded", path=str(self.path), digest=digest[:12])
        self.config, self.digest = config, digest


def reload_on_hup(live: LiveConfig) -> None:
    """``systemctl reload`` (ExecReload= sends SIGHUP): read the file now. The read runs
    in a thread of its own, never inside the signal handler."""

    def hup(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=live.reload, name="config-reload", daemon=True).start()

    signal.signal(signal.SIGHUP, hup)
