"""The table ``.ci/run`` ends with (testbed/timings.py): each pass's wall time, each
worker's busy time, the whole run against the budget, and the slowest groups or files,
from what tests/conftest.py recorded of each test."""

from __future__ import annotations

import json
from pathlib import Path

from testbed.timings import group_of, main, read_pass, table


def test_a_test_s_group_is_its_xdist_group_else_its_file() -> None:
    """Under --dist loadgroup a node id ends in @GROUP; without it the file is the
    group; an @ inside a parameter is not a group."""
    assert group_of("tests/a.py::t[x]@integration/shared-container") == (
        "integration/shared-container"
    )
    assert group_of("tests/unit/b.py::test_one") == "tests/unit/b.py"
    assert group_of("tests/unit/b.py::test_mail[alice@example.org]") == "tests/unit/b.py"


def test_the_table_names_each_pass_each_worker_and_the_slowest_groups(
    tmp_path: Path, capsys: object
) -> None:
    """Two workers of a parallel pass and a serial pass: their wall times, each worker's
    busy seconds and when its last test ended, the whole against the 30-minute budget,
    and the groups ranked by their seconds."""
    parallel = [
        {
            "nodeid": "s.py::a@gen-a",
            "seconds": 600.0,
            "worker": "gw0",
            "start": 1e9,
            "stop": 1e9 + 600,
        },
        {
            "nodeid": "s.py::b@gen-b",
            "seconds": 500.0,
            "worker": "gw1",
            "start": 1e9,
            "stop": 1e9 + 500,
        },
        {
            "nodeid": "u.py::c",
            "seconds": 90.0,
            "worker": "gw1",
            "start": 1e9 + 500,
            "stop": 1e9 + 590,
        },
    ]
    serial = [{"nodeid": "t.py::d", "seconds": 80.0, "worker": "main", "start": 9, "stop": 89}]
    (tmp_path / "parallel.json").write_text(json.dumps(parallel))
    (tmp_path / "serial.json").write_text(json.dumps(serial))
    passes = {"parallel": read_pass(tmp_path / "parallel.json")}
    passes["serial"] = read_pass(tmp_path / "serial.json")
    lines = table({"set-up": 40, "parallel": 610, "serial": 85}, passes, top=3)
    text = "\n".join(lines)
    assert "  parallel                          610 s" in text
    assert "    worker gw0                      600 s busy, its last test ended at 600 s" in text
    assert "    worker gw1                      590 s busy, its last test ended at 590 s" in text
    assert "whole run                         735 s (within the 30-minute budget)" in text
    ranked = [line.split()[-1] for line in lines[-3:]]
    assert ranked == ["gen-a", "gen-b", "u.py"]
    assert main([str(tmp_path), "--pass", "parallel=2000"]) == 0
    assert "OVER the 30-minute budget" in capsys.readouterr().out  # type: ignore[attr-defined]
