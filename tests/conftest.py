"""What every test shares: the markers, given by where a test lives.

    integration   tests/integration, tests/attacks, tests/scenarios: they boot a real
                  systemd in a container, or start daemons, mount and change users as root
    slow          a test a developer skips in the inner loop (``scripts/test -m "not
                  slow"``): every integration test, and the unit tests marked so
    serial        run alone, after the parallel pass: load, quota, crash and timing tests
                  whose figures another worker's containers would disturb

Tests that boot containers are grouped for xdist (``--dist loadgroup``), each group on
one worker: the modules of a suite that share its session container (``container``)
form one group, in the order of the serial run, so that no module meets a container in
a state another order would leave; a module with containers of its own is a group by
itself. The groups known to be long go first, so that the two workers end together.

The scenario report (tests/scenarios/report.py) is written by each process that ran
diagnoses and merged by the one that reports: the xdist controller, or the only process.

Where the time goes: the reporting process records each test's seconds, group, worker,
start and stop, and writes them to ``build/timings/PASS.json`` where ``OPSBOT_TEST_PASS``
names the pass (scripts/test sets it); testbed/timings.py prints the table ``.ci/run``
ends with.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
#: Where a test boots systemd or acts as root on the host.
INTEGRATION = tuple(TESTS / name for name in ("integration", "attacks", "scenarios"))


#: xdist groups that take minutes, longest first (figures from `--durations` on the CI
#: machine): they start first, and the short ones fill in around them.
LONG_FIRST = (
    "tests/scenarios/generated-a",
    "tests/scenarios/generated-b",
    "scenarios/shared-container",
    "integration/test_fleet_through_ansible",
    "integration/shared-container",
    "integration/test_benchmarks_run",
    "attacks/shared-container",
    "integration/test_exit_codes",
)


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker and marker.args else ""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by where it lives: ``integration`` (and so ``slow``) below the
    container suites, and each container module its own xdist group; then put the long
    groups first (a stable order: every worker collects the same). First of the hooks:
    xdist's own reads the groups to name the work it hands out."""
    for item in items:
        path = Path(item.path).resolve()
        if any(path.is_relative_to(root) for root in INTEGRATION):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)
            if item.get_closest_marker("xdist_group") is None:
                suite = path.relative_to(TESTS).parts[0]
                shared = "container" in getattr(item, "fixturenames", ())
                group = (
                    f"{suite}/shared-container"
                    if shared
                    else path.relative_to(TESTS).with_suffix("").as_posix()
                )
                item.add_marker(pytest.mark.xdist_group(group))
    rank = {group: index for index, group in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))


def _worker(config: pytest.Config) -> str | None:
    """This process's xdist worker id, or None for the controller or a run without xdist."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput["workerid"])


def _distributed(config: pytest.Config) -> bool:
    """Whether this process is an xdist controller (its workers run the tests)."""
    return config.pluginmanager.hasplugin("dsession")


#: Where the scenario report's records come from (absent in a tree of other tests).
SCENARIOS = TESTS / "scenarios"


#: What the reporting process heard of each test: node id -> its seconds, worker, start, stop.
_TIMES: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each phase of each test (set-up, call, teardown) as the reporting process hears it:
    on an xdist controller from the worker that ran it."""
    seen = _TIMES.setdefault(
        report.nodeid, {"nodeid": report.nodeid, "seconds": 0.0, "start": 0.0, "stop": 0.0}
    )
    seen["seconds"] += report.duration
    seen["start"] = min(seen["start"] or report.start, report.start)
    seen["stop"] = max(seen["stop"], report.stop)
    node = getattr(report, "node", None)
    gateway = getattr(node, "gateway", None)
    seen["worker"] = getattr(gateway, "id", None) or getattr(report, "worker_id", None) or "main"


def _write_timings(session: pytest.Session) -> None:
    """``build/timings/PASS.json`` for the pass ``OPSBOT_TEST_PASS`` names (none: nothing)."""
    name = os.environ.get("OPSBOT_TEST_PASS", "")
    if not name or not _TIMES:
        return
    where = Path(session.config.rootpath) / "build" / "timings"
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{name}.json").write_text(json.dumps(list(_TIMES.values()), indent=0) + "\n")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any test of this run: no scenario record of an earlier run is merged."""
    if _worker(session.config) is None and SCENARIOS.is_dir():
        from tests.scenarios.report import clear_parts

        clear_parts()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Each process that ran diagnoses writes its records (the controller of an xdist run
    has none: its workers ran them); the reporting process writes the timings."""
    if _worker(session.config) is None:
        _write_timings(session)
    if not _distributed(session.config) and SCENARIOS.is_dir():
        from tests.scenarios.report import write_part

        write_part(_worker(session.config) or "main")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Merge every part of this run into the scenario report and print its table."""
    if not SCENARIOS.is_dir():
        return
    from tests.scenarios.report import merged_parts, parts_dir, table, write_report

    records = merged_parts(parts_dir())
    path = write_report(records, run=os.environ.get("OPSBOT_TEST_RUN", ""))
    if path is None:
        return
    terminalreporter.section("opsbot scenario report")
    for line in table(records):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"report: {path}")
