"""While root's approver runs, it watches the executor's store itself: a plan stored is put
to the standing rules at once, with no process started for it.

opsbot-rules.path starts opsbot-rules.service 200 ms after a plan is stored (the burst
timer), and that service (Python, root's) asks this daemon; the doorbell cost a standing
rule's fix most of a second. While the approver runs it needs no doorbell: it watches
the store's ``plans/`` directory (inotify: a plan is a new ``ID.json`` linked there) and
asks the rules as a ``rules`` request would, under the same lock, with the config in
force. The decision is the approver's as ever; nothing else may ask it anything new.

It says that it watches with a file in its runtime directory (``RuntimeDirectory=`` of
opsbot-approver.service, root's, gone when the service stops): opsbot-rules.service's
``ConditionPathExists=!`` then skips the doorbell without starting a process. The file
is made only once the watch is in place, and the first look follows it (a plan stored
before it still gets its answer); it is removed before the watch ends, so a plan stored
as the approver exits rings the doorbell, which starts the approver again.

After a plan is seen the rules are asked again :data:`LOOK_AGAIN` later (the executor
journals ``plan.accepted`` just after it links the plan, and a rule approves only what
the journal vouches for; and a plan stored during a look), as the doorbell's run did.

Should the watch end while the approver runs (the plans directory removed, moved or
replaced, a look that fails, anything unforeseen), the file goes with it: the doorbell
and its catch-up timer (opsbot-rules.timer) ask again, as before the approver ran. Only
a real directory is watched, never through a symlink.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import structlog

__all__ = ["FLAG_NAME", "LOOK_AGAIN", "PlansWatch", "RulesWatcher", "watch_flag"]

log = structlog.get_logger("opsbot.approver")

#: inotify(7): a name made in the directory (a link), or moved into it.
IN_CREATE = 0x100
IN_MOVED_TO = 0x80
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
_EVENT = struct.Struct("iIII")
#: The file in the runtime directory that says the approver watches (see the docstring).
FLAG_NAME = "rules-watched"
#: Seconds after a plan seen (or a look that decided something) to look again.
LOOK_AGAIN = (0.05, 0.2, 1.0)
#: Seconds between checks for stop while nothing happens.
POLL = 0.5


class WatchEnded(OSError):
    """The plans directory's watch ended (it was removed, moved or replaced)."""


class PlansWatch:
    """An inotify watch on the store's plans directory: :meth:`wait` says whether a plan
    file (``*.json``, not a hidden temporary) appeared there. Where the directory is not
    there yet (no plan was ever stored: the executor makes it), its parent is watched
    until it is made, and its making counts as a plan seen."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._libc = ctypes.CDLL(None, use_errno=True)  # the process's own C library
        fd = self._libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd
        #: The parent's watch while the directory is not there (None: it was).
        self.parent_wd: int | None = None
        #: The plans directory's watch (0: not yet there).
        self.plans_wd = 0
        try:
            self.plans_wd = self._add(directory)
            if not self.plans_wd:
                self.parent_wd = self._add(directory.parent)
                if not self.parent_wd:
                    raise FileNotFoundError(errno.ENOENT, f"{directory.parent} is not there")
                self.plans_wd = self._add(directory)  # made meanwhile: the first look finds it
        except OSError:
            os.close(fd)
            raise

    def _add(self, directory: Path) -> int:
        """The watch on ``directory`` (a positive number); 0 where it is not there."""
        mask = IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW
        wd = int(self._libc.inotify_add_watch(self.fd, os.fsencode(directory), mask))
        if wd > 0:
            return wd
        err = ctypes.get_errno()
        if err == errno.ENOENT:
            return 0
        raise OSError(err, f"inotify_add_watch {directory}: {os.strerror(err)}")

    def wait(self, timeout: float) -> bool:
        """Whether a plan file appeared within ``timeout`` seconds (every event waiting is
        read: a burst is one wake-up); :class:`WatchEnded` when the plans directory went
        (removed, moved, replaced: its files are no longer seen)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        seen = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return seen
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    seen = True  # events were lost: look
                    continue
                if wd == self.plans_wd and mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                    raise WatchEnded(errno.ENOENT, f"{self.directory} went: no longer watched")
                if self.parent_wd is not None and wd == self.parent_wd:
                    if name == os.fsencode(self.directory.name) and not self.plans_wd:
                        self.plans_wd = self._add(self.directory)
                        seen = seen or bool(self.plans_wd)  # the store's first plan is on its way
                    continue
                seen = seen or (name.endswith(b".json") and not name.startswith(b"."))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def watch_flag(environ: dict[str, str] | None = None) -> Path | None:
    """The flag file in the unit's runtime directory (None when started by hand)."""
    runtime = (os.environ if environ is None else environ).get("RUNTIME_DIRECTORY", "")
    return Path(runtime.split(":")[0]) / FLAG_NAME if runtime else None


class RulesWatcher:
    """A thread that asks the rules (``ask``: how many plans it decided) when ``watch``
    sees a plan, again :data:`LOOK_AGAIN` later, and once at start; ``seen`` is called
    at each plan seen (the daemon counts it as activity)."""

    def __init__(
        self,
        watch: PlansWatch,
        ask: Callable[[], int],
        *,
        seen: Callable[[], None] = lambda: None,
        flag: Path | None = None,
    ) -> None:
        self.watch, self.ask, self.seen, self.flag = watch, ask, seen, flag
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rules-watch", daemon=True)

    def start(self) -> None:
        if self.flag is not None:
            self.flag.write_text(f"{os.getpid()}\n")
        self.thread.start()

    def stop(self) -> None:
        """The flag first (a plan stored from now on rings the doorbell), then the watch."""
        if self.flag is not None:
            with contextlib.suppress(FileNotFoundError):
                self.flag.unlink()
        self.stopping.set()
        self.thread.join(timeout=30)
        self.watch.close()

    def _look(self) -> bool:
        """One look; whether it decided something."""
        return self.ask() > 0

    def _run(self) -> None:
        """Watch until stopped; should the watch end otherwise, the flag goes with it
        (the doorbell and its timer ask again)."""
        try:
            self._watch()
        except Exception:
            log.exception("rules.watch_ended")
        finally:
            if self.flag is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.flag.unlink()

    def _watch(self) -> None:
        self._look()  # what was stored before the watch began
        again = list(LOOK_AGAIN)
        while not self.stopping.is_set():
            new = self.watch.wait(again[0] if again else POLL)
            if self.stopping.is_set():
                return
            if new:
                self.seen()
                again = list(LOOK_AGAIN)
            elif again:
                again.pop(0)
            else:
                continue
            if self._look():
                again = list(LOOK_AGAIN)
