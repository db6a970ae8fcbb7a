"""The plans that may still wait for approval, as the executor's store counts them.

A submit asks how many plans wait, from its submitter and in all (the waiting caps), and
whether an identical plan is still open. The index answers both without reading a file,
and counts as it changes: how many plans each submitter has in it and when its oldest
was submitted are kept with it, so that a submit does not walk thousands of entries (a
store that keeps them all, as the benchmarks' does) under the store's lock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Open:
    """A plan still open (PROPOSED or APPROVED), as the store's index knows it."""

    plan_id: str
    uid: int
    submitted_at: datetime


class OpenPlans:
    """Open plans by fingerprint, with each submitter's count and the oldest's time."""

    def __init__(self) -> None:
        self._by_sha: dict[str, Open] = {}
        self._per_uid: Counter[int] = Counter()
        #: At or before the oldest entry's submission (None: no entry).
        self._oldest: datetime | None = None

    def __contains__(self, sha: str) -> bool:
        return sha in self._by_sha

    def __getitem__(self, sha: str) -> Open:
        return self._by_sha[sha]

    def __len__(self) -> int:
        return len(self._by_sha)

    def shas(self) -> list[str]:
        return list(self._by_sha)

    def of(self, uid: int) -> int:
        """How many of the entries ``uid`` submitted."""
        return self._per_uid[uid]

    def put(self, sha: str, plan: Open) -> None:
        self.drop(sha)
        self._by_sha[sha] = plan
        self._per_uid[plan.uid] += 1
        if self._oldest is None or plan.submitted_at < self._oldest:
            self._oldest = plan.submitted_at

    def drop(self, sha: str) -> None:
        plan = self._by_sha.pop(sha, None)
        if plan is not None:
            self._per_uid[plan.uid] -= 1
            if not self._per_uid[plan.uid]:
                del self._per_uid[plan.uid]

    def expire(self, young: datetime) -> None:
        """Drop the entries submitted at or before ``young``: the index is walked only
        when its oldest entry is one of them."""
        if self._oldest is None or self._oldest > young:
            return
        for sha in [s for s, p in self._by_sha.items() if p.submitted_at <= young]:
            self.drop(sha)
        self._oldest = min((p.submitted_at for p in self._by_sha.values()), default=None)
