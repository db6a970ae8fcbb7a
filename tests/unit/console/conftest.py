"""The console's tests run against the executor's real store, approvals and daemon: the
executor tests' daemon fixture, registered here too (store and approvals_dir come from
tests/unit/conftest.py)."""

from tests.unit.executor.conftest import executor  # noqa: F401
