"""The generated suites in as many parts as xdist has workers, each part an xdist group
with a container of its own, so that every worker shares the suites' time (the cases of
one part run in seed order). Every worker collects with the same count."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest

PARTS = tuple(
    f"tests/scenarios/generated-{chr(ord('a') + i)}"
    for i in range(max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
)


def parted(cases: Sequence[tuple[str, int]], start: int = 0) -> list[Any]:
    """``cases`` as parameters, each in one part by turns (from part ``start``), named
    kind-seed."""
    return [
        pytest.param(
            kind,
            seed,
            marks=pytest.mark.xdist_group(PARTS[(start + i) % len(PARTS)]),
            id=f"{kind}-{seed}",
        )
        for i, (kind, seed) in enumerate(cases)
    ]
