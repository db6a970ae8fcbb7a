"""When a test may skip: never under CI (``CI=true``), where a missing prerequisite is a
failure, so that a run that silently tested nothing cannot pass."""

from __future__ import annotations

import os

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_unless(condition: bool, reason: str) -> None:
    """Skip the calling test when ``condition`` is false; under CI, fail it instead."""
    if condition:
        return
    if under_ci():
        pytest.fail(f"{reason} (CI=true: this may not be skipped)")
    pytest.skip(reason)
