"""The executor's fixtures (a real store, a root-owned approvals directory), for the unit
tests outside tests/unit/executor that need them."""

from tests.unit.executor.conftest import approvals_dir, store  # noqa: F401
