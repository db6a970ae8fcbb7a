"""The console's tests run against the executor's real store, approvals and daemon: the
executor tests' fixtures, registered here too (store and approvals_dir come from
tests/unit/conftest.py)."""

from tests.unit.executor.conftest import _fresh_logging, executor  # noqa: F401
