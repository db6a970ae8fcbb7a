"""The diagnosis read tools, and a whole runbook run, against a booted systemd 252.

Units named diagtest-*.service are made to fail in known ways inside the bench
container; the read tools run there with the project's venv, as root and as an
unprivileged user in the systemd-journal group (as opsbot-diagnose runs), and print
their output as JSON for the assertions here.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from testbed.container import REPO_MOUNT, BootedSystemd
from testbed.host import call_read_tool

PYTHON = "/opt/opsbot/venv/bin/python"
READER = "diagtest-reader"

UNITS = {
    # Killed by a signal after starting.
    "diagtest-killed.service": "[Service]\nExecStart=/bin/sleep infinity\n",
    # Fails at once with exit status 2, and logs why.
    "diagtest-db.service": (
        "[Service]\nExecStart=/bin/sh -c 'echo \"db: cannot open data directory\"; exit 2'\n"
    ),
    # Requires the failing one; keeps running (Type=simple).
    "diagtest-app.service": (
        "[Unit]\nRequires=diagtest-db.service\nAfter=diagtest-db.service\n"
        "[Service]\nExecStart=/bin/sleep infinity\n"
    ),
}


def python(container: BootedSystemd, code: str, user: str | None = None) -> Any:
    """Run ``code`` with the venv inside the container; it prints one JSON value."""
    result = container.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        user=user,
        env={"PYTHONPATH": REPO_MOUNT},
        timeout=60,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def call(container: BootedSystemd, tool: str, args: dict[str, Any], user: str | None = None) -> Any:
    return call_read_tool(container, tool, args, user)


@pytest.fixture(scope="module")
def units(container: BootedSystemd) -> dict[str, str]:
    """The diagtest units, in their failed states, and a reader user."""
    for name, text in UNITS.items():
        container.write_file(f"/etc/systemd/system/{name}", text)
    container.systemctl("daemon-reload")
    container.systemctl("start", "diagtest-killed.service")
    container.systemctl("start", "diagtest-app.service")
    container.wait_for(
        lambda: (
            container.systemctl("is-failed", "diagtest-db.service", check=False).returncode == 0
        ),
        what="diagtest-db.service failed",
    )
    container.systemctl("kill", "--signal=KILL", "diagtest-killed.service")
    container.wait_for(
        lambda: (
            container.systemctl("is-failed", "diagtest-killed.service", check=False).returncode == 0
        ),
        what="diagtest-killed.service failed",
    )
    if container.run(["id", READER], check=False).returncode != 0:
        container.run(["useradd", "--system", "--groups", "systemd-journal", READER])
    return UNITS


def test_read_unit_status_of_a_killed_unit(container: BootedSystemd, units: Any) -> None:
    """systemctl show is parsed into the state of a unit killed by SIGKILL."""
    status = call(container, "read_unit_status", {"unit": "diagtest-killed.service"})
    assert status["unit"] == "diagtest-killed.service"
    assert (status["active_state"], status["sub_state"], status["result"]) == (
        "failed",
        "failed",
        "signal",
    )
    assert (status["exec_main_code"], status["exec_main_status"]) == ("killed", 9)
    assert status["inactive_enter_timestamp"] is not None
    assert len(status["invocation_id"]) == 32
    assert status["fragment_path"] == "/etc/systemd/system/diagtest-killed.service"


def test_read_unit_status_lists_failed_hard_dependencies(
    container: BootedSystemd, units: Any
) -> None:
    """A running unit whose Requires= dependency failed shows it as unhealthy."""
    status = call(container, "read_unit_status", {"unit": "diagtest-app.service"})
    assert status["active_state"] == "active"
    assert "diagtest-db.service" in status["requires"]
    assert status["unhealthy_dependencies"] == [
        {
            "unit": "diagtest-db.service",
            "relation": "Requires",
            "load_state": "loaded",
            "active_state": "failed",
            "sub_state": "failed",
            "result": "exit-code",
        }
    ]


def test_read_unit_status_of_an_unknown_unit(container: BootedSystemd, units: Any) -> None:
    """A unit systemd does not know is a tool error, not a state."""
    answer = call(container, "read_unit_status", {"unit": "diagtest-nothing.service"})
    assert answer["error"].startswith("unit diagtest-nothing.service not found")


def test_tail_journal_reads_the_unit_and_systemds_lines(
    container: BootedSystemd, units: Any
) -> None:
    """The journal tail has the unit's own output and systemd's lines about it, newest
    last, with UTC times and priority names."""
    tail = call(container, "tail_journal", {"unit": "diagtest-db.service", "lines": 20})
    messages = [line["message"] for line in tail["lines"]]
    assert "db: cannot open data directory" in messages
    assert any(m.startswith("Started diagtest-db.service") for m in messages)
    assert messages[-1].startswith("diagtest-db.service: Failed with result 'exit-code'")
    assert all(line["time"].endswith("Z") for line in tail["lines"])
    assert {line["priority"] for line in tail["lines"]} <= {"info", "notice", "warning", "err"}
    recent = call(container, "tail_journal", {"unit": "diagtest-db.service", "since": "1d"})
    assert len(recent["lines"]) == len(tail["lines"])


def test_list_failed_units(container: BootedSystemd, units: Any) -> None:
    """systemctl's JSON list of failed units is parsed."""
    failed = call(container, "list_failed_units", {})
    names = {unit["unit"] for unit in failed["units"]}
    assert {"diagtest-db.service", "diagtest-killed.service"} <= names


def test_unprivileged_reader_in_systemd_journal_group(container: BootedSystemd, units: Any) -> None:
    """As an unprivileged user in systemd-journal (like opsbot-diagnose), both the unit
    state and the journal can be read."""
    status = call(container, "read_unit_status", {"unit": "diagtest-db.service"}, user=READER)
    assert status["active_state"] == "failed"
    tail = call(container, "tail_journal", {"unit": "diagtest-db.service"}, user=READER)
    assert "db: cannot open data directory" in [line["message"] for line in tail["lines"]]


RUNBOOK_RUN = """
    import json
    from diagnose_svc import READ_TOOLS, RunbookPolicy, run_diagnosis
    from shared_schema import Accept, DiagnoseSettings

    class Executor:
        def submit(self, plan, run_id, symptom, evidence=()):
            return Accept(plan_id="20261129-214500-0a1b2c3d", sha256="0" * 64)

    settings = DiagnoseSettings()
    verdict = run_diagnosis({unit!r}, "", RunbookPolicy(settings), READ_TOOLS, Executor(), settings)
    print(verdict.model_dump_json())
"""


def test_runbook_on_a_real_systemd(container: BootedSystemd, units: Any) -> None:
    """The runbook, with the real read tools: the app runs while the db it requires
    failed; the db's program exited with an error as it started and nothing it reads
    changed since, so a start would fail again: a note on the db, quoting its last words,
    and no plan. The unit killed by a signal is started again, expecting it failed."""
    verdict = python(container, RUNBOOK_RUN.format(unit="diagtest-app.service"), user=READER)
    assert verdict["kind"] == "note", verdict
    assert verdict["cause"]["kind"] == "config_error"
    assert verdict["cause"]["unit"] == "diagtest-db.service"
    assert "exited with status 2" in verdict["cause"]["fact"]
    assert "db: cannot open data directory" in verdict["cause"]["fact"]
    assert verdict["steps_used"] <= 4

    killed = python(container, RUNBOOK_RUN.format(unit="diagtest-killed.service"), user=READER)
    assert killed["kind"] == "plan", killed.get("text")
    [step] = killed["plan"]["steps"]
    assert (step["tool"], step["args"]["unit"]) == ("start_unit", "diagtest-killed.service")
    assert step["expect"]["active_state"] == ["failed"]
    tools = {e["tool"] for e in killed["evidence"]}
    assert {"read_unit_status", "tail_journal", "read_unit_file", "disk_usage"} <= tools


def test_command_line_without_an_executor(container: BootedSystemd, units: Any) -> None:
    """``opsbot-diagnose run`` as the reader user, with no executor socket: the verdict
    is a note naming the socket and holding the plan; exit status 69 (EX_UNAVAILABLE)."""
    result = container.run(
        [
            PYTHON,
            "-m",
            "diagnose_svc.daemon",
            "run",
            "--json",
            "--socket",
            "/run/diagtest-absent.sock",
            "--config",
            "/nonexistent/opsbot.toml",
            "diagtest-killed.service",
        ],
        user=READER,
        env={"PYTHONPATH": REPO_MOUNT, "OPSBOT_NO_JOURNAL": "1"},
        check=False,
    )
    assert result.returncode == 69, result.stderr
    verdict = json.loads(result.stdout)
    assert (verdict["kind"], verdict["ended_by"]) == ("note", "executor_error")
    assert "executor socket /run/diagtest-absent.sock: does not exist" in verdict["text"]
    assert '"tool":"start_unit"' in verdict["text"]
    assert "diagnose.finished" in result.stderr
