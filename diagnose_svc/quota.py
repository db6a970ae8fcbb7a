"""How many diagnoses may run, and who may start one: the diagnose socket's quota.

A diagnosis may spend a model's whole token budget, so the service bounds them three
ways: at most ``max_runs`` at once on the host, at most ``per_uid`` at once for one user
(``[diagnose] runs_per_uid``), and at most ``per_minute`` started by one user within any
60 seconds (``[diagnose] runs_per_minute_per_uid``), counted on an injectable clock.
A uid that is ``exempt`` (root) counts only towards ``max_runs``.

:meth:`RunQuota.start` answers with a :class:`QuotaRefusal` whose ``message`` is the
one line the operator sees: which limit, its number, the key that sets it, and when to
try again. The counts live in the service's memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: The window of the per-minute limit, in seconds.
WINDOW = 60.0


def _no_one(uid: int) -> bool:
    return False


@dataclass(frozen=True)
class QuotaRefusal:
    """A diagnosis not started, and the one line that says why."""

    limit: str
    message: str


class RunQuota:
    """Runs in flight per uid and on the host, and each uid's starts of the last minute."""

    def __init__(
        self,
        *,
        max_runs: int,
        per_uid: int,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        exempt: Callable[[int], bool] = _no_one,
    ) -> None:
        self.max_runs = max_runs
        self.per_uid = per_uid
        self.per_minute = per_minute
        self.clock = clock
        self.exempt = exempt
        self._running: dict[int, int] = {}
        self._started: dict[int, deque[float]] = {}
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        with self._lock:
            return sum(self._running.values())

    def start(self, uid: int, user: str) -> QuotaRefusal | None:
        """Count one more diagnosis of ``uid`` (``user`` is its name, for the message),
        or say which limit refuses it."""
        now = self.clock()
        exempt = self.exempt(uid)
        with self._lock:
            running = self._running.get(uid, 0)
            if not exempt:
                if running >= self.per_uid:
                    return QuotaRefusal(
                        "per_uid",
                        f"{user} already has {running} diagnoses running, the most one user "
                        f"may at once ([diagnose] runs_per_uid = {self.per_uid}); wait for "
                        "one to finish",
                    )
                starts = self._started.setdefault(uid, deque())
                while starts and starts[0] <= now - WINDOW:
                    starts.popleft()
                if len(starts) >= self.per_minute:
                    wait = max(1, math.ceil(starts[0] + WINDOW - now))
                    return QuotaRefusal(
                        "per_minute",
                        f"{user} started {len(starts)} diagnoses within the last minute, the "
                        f"most one user may ([diagnose] runs_per_minute_per_uid = "
                        f"{self.per_minute}); try again in {wait} s",
                    )
            if sum(self._running.values()) >= self.max_runs:
                return QuotaRefusal(
                    "max_runs",
                    f"{self.max_runs} diagnoses are already running, the most this host runs "
                    "at once; try again soon",
                )
            self._running[uid] = running + 1
            if not exempt:
                self._started[uid].append(now)
        return None

    def finish(self, uid: int) -> None:
        """A diagnosis that :meth:`start` let through has ended."""
        with self._lock:
            running = self._running.get(uid, 0)
            if running <= 1:
                self._running.pop(uid, None)
            else:
                self._running[uid] = running - 1
            starts = self._started.get(uid)
            if starts is not None:
                horizon = self.clock() - WINDOW
                while starts and starts[0] <= horizon:
                    starts.popleft()
                if not starts:
                    del self._started[uid]
