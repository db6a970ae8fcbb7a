"""The fleet's replay (opsbot.fleet.opsbot_replay on each host, the filter
fleet_replay_report on the controller, fleet-replay.yml between them): a host whose
replayed verdicts differ (``opsbot replay`` exits 4) is a result, any other failure fails
that host with its message; each host keeps its own figures, the total adds them up, and
counts a host sends that are not counts, or do not add up, leave that host unread.
The hosts' answers are the replay engine's own document (diagnose_svc/replay.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from diagnose_svc.record import Skipped
from diagnose_svc.replay import Replayed, Said, summary
from tests.unit.fleet.test_fleet_modules import COLLECTIONS, MODULES, Host

PLUGIN = COLLECTIONS / "ansible_collections/opsbot/fleet/plugins/filter/fleet_replay.py"
PLAYBOOKS = COLLECTIONS / "ansible_collections" / "opsbot" / "fleet" / "playbooks"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
THEN = Said("plan", "submitted", ("start_unit app.service",), ("app.service",))
NOTE = Said("note", "max_steps", ("max_steps",))


def _load() -> ModuleType:
    """The filter plugin as Ansible loads it, its collection importable."""
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))
    spec = importlib.util.spec_from_file_location("opsbot_fleet_replay_plugin", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet = _load()


def replayed(agree: int, differ: int, failed: int = 0, skipped: int = 0) -> dict[str, Any]:
    """``opsbot replay --json`` as the engine writes it: ``agree`` diagnoses said again,
    ``differ`` now a note where a plan was, ``failed`` that could not be replayed."""
    replays = []
    for i in range(agree + differ + failed):
        replays.append(
            Replayed(
                run_id=f"20261206-2200{i:02d}-0a1b2c{i:02d}",
                unit="nginx.service",
                started="2026-12-06T22:00:00+00:00",
                asked_by="root",
                then=THEN,
                now=THEN if i < agree else NOTE if i < agree + differ else None,
                outcome="VERIFIED",
                not_recorded=["journal_read {}"] if i == 0 else [],
                error="ToolError: boom" if i >= agree + differ else None,
            )
        )
    skips = [Skipped(f"20261206-21{i:04d}-00000000.json.gz", "damaged") for i in range(skipped)]
    return {
        "policy": "runbook",
        "replays": [r.as_json() for r in replays],
        "skipped": [{"record": s.name, "why": s.why} for s in skips],
        "summary": summary(replays, skips),
    }


def ran(report: dict[str, Any], exit_status: int = 0) -> dict[str, Any]:
    """opsbot_replay's registered result for a host that answered ``report``."""
    return {"changed": False, "report": report, "exit_status": exit_status}


# -- the module on a host -----------------------------------------------------------------------


def test_some_differ_is_a_result_not_a_failure(tmp_path: Path) -> None:
    """The host's replay exits 4 (some differ): the task succeeds with the report, says
    differ, changes nothing, and asked for exactly the period and unit given."""
    report = replayed(agree=1, differ=2)
    host = Host(tmp_path, [], replay=report, replay_status=4)
    result = host.run("opsbot_replay", since="1h", unit="nginx.service")
    assert "failed" not in result, result
    assert (result["changed"], result["differ"], result["exit_status"]) == (False, True, 4)
    assert result["report"] == report
    assert result["msg"] == "3 replayed: 1 agree, 2 differ"
    assert host.calls() == [["replay", "--json", "--since", "1h", "--unit", "nginx.service"]]


def test_a_replay_that_cannot_run_fails_the_host_with_its_message(tmp_path: Path) -> None:
    """The records cannot be read (exit 1, no report): the task fails with the CLI's own
    words."""
    host = Host(tmp_path, [])
    result = host.run("opsbot_replay")
    assert result["failed"] is True
    assert "replay --json --since 30d` exited 1" in result["msg"]
    assert "permission denied reading /var/lib/opsbot-diagnose/records" in result["msg"]


def test_a_diagnosis_that_could_not_be_replayed_fails_with_its_error(tmp_path: Path) -> None:
    """Exit 1 with a report: a diagnosis could not be replayed; the task fails saying how
    many and the first one's error."""
    host = Host(tmp_path, [], replay=replayed(agree=1, differ=0, failed=1), replay_status=1)
    result = host.run("opsbot_replay")
    assert result["failed"] is True
    assert "1 of 2 diagnoses could not be replayed; the first: ToolError: boom" in result["msg"]


#: What a return value's documentation may say (ansible-doc's keys).
RETURN_KEYS = {"description", "type", "elements", "contains", "returned", "sample"}


def _unread_returns(returns: dict[str, Any], path: str = "") -> list[str]:
    bad = []
    for name, said in returns.items():
        if not isinstance(said, dict) or not said.get("type") or not set(said) <= RETURN_KEYS:
            bad.append(path + str(name))
        elif "contains" in said:
            bad += _unread_returns(said["contains"], f"{path}{name}.")
    return bad


@pytest.mark.parametrize("module", sorted(p.stem for p in MODULES.glob("*.py")))
def test_each_modules_documentation_reads_as_ansible_doc_reads_it(module: str) -> None:
    """ansible-doc's own reader parses the module's DOCUMENTATION and RETURN (a colon in
    a plain line, or a comma in a flow mapping, makes it read something else): every
    option and return value has a description and a type, and nothing else."""
    from ansible.parsing.plugin_docs import read_docstring

    said = read_docstring(str(MODULES / f"{module}.py"))
    assert said["doc"] is not None and said["returndocs"] is not None, module
    options = said["doc"]["options"]
    assert all(isinstance(o.get("description"), str | list) for o in options.values())
    assert _unread_returns(said["returndocs"]) == []


# -- the report on the controller ---------------------------------------------------------------


def test_each_host_keeps_its_own_figures_and_the_total_adds_them_up() -> None:
    """web1 (2 agree) and web2 (3 differ, 1 skipped): each host's counts are its own, in
    inventory order, the total is their sum and the agreement is agree over replayed."""
    report = fleet.fleet_replay_report(
        {"web1": ran(replayed(2, 0)), "web2": ran(replayed(0, 3, skipped=1), 4)}, since="30d"
    )
    assert list(report["hosts"]) == ["web1", "web2"] and report["unread"] == {}
    web1, web2 = report["hosts"]["web1"], report["hosts"]["web2"]
    keys = ("replayed", "agree", "differ", "failed", "skipped", "not_recorded_calls")
    assert [web1["summary"][k] for k in keys] == [2, 2, 0, 0, 0, 1]
    assert [web2["summary"][k] for k in keys] == [3, 0, 3, 0, 1, 1]
    assert (web1["agreement"], web2["agreement"]) == (100.0, 0.0)
    assert [d["now"] for d in web2["differing"]] == ["note: max_steps"] * 3
    assert web2["exit_status"] == 4 and web2["skipped"] == [
        "20261206-210000-00000000.json.gz: damaged"
    ]
    total = report["total"]
    assert [total[k] for k in ("hosts", *keys)] == [2, 5, 2, 3, 0, 1, 2]
    assert (total["note_where_plan"], total["agreement"]) == (3, 40.0)


def test_a_host_that_failed_or_was_not_reached_is_named_with_why() -> None:
    """A host whose task failed is unread with the task's message; one with no result
    (unreachable) is unread too; neither counts in the total."""
    report = fleet.fleet_replay_report(
        {
            "web1": ran(replayed(1, 0)),
            "web2": {"failed": True, "msg": "`opsbot replay --json` exited 1: denied"},
            "web3": {},
        }
    )
    assert list(report["hosts"]) == ["web1"]
    assert report["unread"] == {
        "web2": "`opsbot replay --json` exited 1: denied",
        "web3": fleet.NOT_REACHED,
    }
    assert (report["total"]["hosts"], report["total"]["replayed"]) == (1, 1)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"agree": 5}, "do not make replayed"),
        ({"differ": -1}, "is not a count"),
        ({"replayed": True}, "is not a count"),
        ({"agree": "2"}, "is not a count"),
        ({"skipped": None}, "is not a count"),
    ],
)
def test_counts_that_are_not_counts_leave_that_host_unread(
    change: dict[str, Any], why: str
) -> None:
    """web2 sends a summary opsbot never writes: web2 is unread (why said), web1 is read,
    and the total is web1's alone."""
    bad = replayed(2, 0)
    bad["summary"].update(change)
    report = fleet.fleet_replay_report({"web1": ran(replayed(1, 1), 4), "web2": ran(bad)})
    assert list(report["hosts"]) == ["web1"]
    assert why in report["unread"]["web2"]
    assert [report["total"][k] for k in ("replayed", "agree", "differ")] == [2, 1, 1]


def test_the_table_gives_a_row_per_host_and_one_for_all_within_100_columns() -> None:
    """The table: the headline, a row per host and one for all, each differing diagnosis
    then and now, the unread hosts with why; no line past 100 columns, host text escaped."""
    report = fleet.fleet_replay_report(
        {
            "web1": ran(replayed(2, 0)),
            "web2\x1b[31m": ran(replayed(1, 1), 4),
            "web3": {"failed": True, "msg": "x" * 400},
        },
        unit="nginx.service",
    )
    lines = fleet.fleet_replay_table(report)
    assert lines[0] == (
        "diagnoses of nginx.service replayed since 30d on 2 hosts: 3 of 4 agree (75.0%), 1 differ"
    )
    rows = [line.split() for line in lines if line.split()[:1] in (["web1"], ["all"])]
    assert rows[0][:8] == ["web1", "2", "2", "0", "0", "0", "1", "100.0%"]
    assert rows[-1][:8] == ["all", "4", "3", "1", "0", "0", "2", "75.0%"]
    assert any("then plan: start_unit app.service (VERIFIED)" in line for line in lines)
    assert any(line.strip() == "now note: max_steps" for line in lines)
    assert any(line.startswith("web3: NOT READ, xxx") for line in lines)
    assert all(len(line) <= 100 and "\x1b" not in line for line in lines)


def test_a_file_that_is_not_a_replay_report_is_refused() -> None:
    """The table takes only a fleet replay report (its format), never a review report."""
    with pytest.raises(fleet.ReportError, match="not an opsbot fleet replay report"):
        fleet.fleet_replay_table({"format": "opsbot-fleet-report/1", "hosts": {}})


def test_the_filters_ansible_sees() -> None:
    """The plugin gives Ansible the report and its table."""
    assert set(fleet.FilterModule().filters()) == {"fleet_replay_report", "fleet_replay_table"}


# -- the playbook -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    not PLAYBOOK.exists() and os.environ.get("CI") != "true", reason="no ansible-playbook"
)
def test_the_playbook_writes_one_report_and_fails_only_the_host_that_failed(
    tmp_path: Path,
) -> None:
    """fleet-replay.yml over three stand-in hosts: web1 agrees, web2 differs (exit 4, a
    result), web3 cannot read its records (failed, with its message); the report is
    written where the operator stands, with web1 and web2 and why web3 was not read, and
    ansible-playbook exits 2 (a host failed)."""
    answers = {"web1": (replayed(2, 0), 0), "web2": (replayed(0, 1), 4), "web3": None}
    lines = ["[all:vars]", "opsbot_become=false", "[opsbot]"]
    hosts = {}
    for name, answer in answers.items():
        (tmp_path / name).mkdir()
        said = {} if answer is None else {"replay": answer[0], "replay_status": answer[1]}
        hosts[name] = Host(tmp_path / name, [], **said)
        lines.append(
            f"{name} ansible_connection=local ansible_python_interpreter={sys.executable} "
            f"opsbot_cli={hosts[name].cli}"
        )
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [str(PLAYBOOK), "-i", "hosts.ini", str(PLAYBOOKS / "fleet-replay.yml")]
        + ["-e", "replay_since=12h", "-e", "replay_unit=nginx.service"],
        cwd=tmp_path,
        env={
            **os.environ,
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
            "ANSIBLE_HOME": str(tmp_path / ".ansible"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((tmp_path / "fleet-replay.json").read_text())
    assert [report["since"], report["unit"]] == ["12h", "nginx.service"]
    assert {h: s["summary"]["agree"] for h, s in report["hosts"].items()} == {"web1": 2, "web2": 0}
    assert [report["total"][k] for k in ("replayed", "agree", "differ")] == [3, 2, 1]
    assert "permission denied reading" in report["unread"]["web3"]
    assert hosts["web1"].calls() == [
        ["replay", "--json", "--since", "12h", "--unit", "nginx.service"]
    ]
    assert "all          3      2       1" in done.stdout, done.stdout
