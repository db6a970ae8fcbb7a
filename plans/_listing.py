"""A directory's plan ids, listed again only when the directory changed.

Listing the names of a store of 10,000 plans, checking each is a plan id and sorting
them is most of what a request for the newest plans costs, and grows with the store;
the readers that ask (the executor for each ``list``, root's approver for each
``announce``) are long-lived and ask of a directory that changes at each plan stored or
archived, and not between. A file added, removed or renamed in a directory moves the
directory's modification and change times, so a listing is reused while the directory's
inode and times are the ones it was taken under.

A listing taken less than :data:`SETTLE_SECONDS` after the directory last changed is not
kept: where a file system's times are coarser than the changes (a kernel tick), a change
just after the listing could leave them as they were (git's "racily clean" index
entries). A listing is kept only once every later change must carry a later time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shared_schema import is_valid_plan_id

#: How long after its last change a directory's listing may be kept: far more than the
#: coarsest file-time granularity a kernel keeps (a tick, a few milliseconds).
SETTLE_SECONDS = 2.0

#: What identifies a directory's entries: its device, inode, and modification and change
#: times (in nanoseconds).
Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Taken:
    stamp: Stamp
    ids: tuple[str, ...]


class PlanIds:
    """The plan ids named by the files ``<id>.json`` in ``directory``, sorted: a listing
    kept while the directory has not changed since it settled."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        #: The wall clock file times are compared with (a test moves it).
        self.clock = clock
        #: The listing kept, replaced whole (threads may ask at once).
        self._taken: _Taken | None = None

    def ids(self) -> list[str]:
        """Every plan id in the directory, oldest first (none if it is missing)."""
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            return []
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        taken = self._taken
        if taken is not None and taken.stamp == stamp:
            return list(taken.ids)
        # Before the listing: a change during or after it is later than this.
        now = self.clock()
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        ids = sorted(n[:-5] for n in names if n.endswith(".json") and is_valid_plan_id(n[:-5]))
        changed = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9
        if now - changed >= SETTLE_SECONDS:
            self._taken = _Taken(stamp, tuple(ids))
        return ids
