"""The read tools' parsing of recorded systemd output, their bounds, their arguments.

The tools' calls to systemctl and the journal run against a booted systemd in
tests/integration/test_diagnose_read_tools.py; here their parsers get recorded output.
"""

from __future__ import annotations

import inspect
import json
from datetime import UTC, datetime, timedelta

import pytest

from diagnose_svc.errors import CommandFailed, ToolError
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools import READ_TOOLS, JournalLine, ToolOutput
from diagnose_svc.tools._systemctl import parse_show, parse_timespan, parse_timestamp
from diagnose_svc.tools.list_failed_units import parse_failed_units
from diagnose_svc.tools.read_timer import next_elapse
from diagnose_svc.tools.read_unit_status import PROPERTIES, fit_status, parse_unit_status
from diagnose_svc.tools.tail_journal import fit, journal_line, since_cutoff
from shared_schema import WRITE_TOOLS
from tests.unit.diagnose import recorded


def test_dispatch_table_holds_the_read_tools_only() -> None:
    """The table has the sixteen read tools, each described by its docstring, each declaring
    its output model and the kind of evidence it gives; no write tool."""
    assert sorted(READ_TOOLS) == [
        "disk_usage",
        "http_get_health",
        "list_failed_units",
        "list_listeners",
        "read_baseline",
        "read_certificates",
        "read_changes",
        "read_config_edges",
        "read_connections",
        "read_limits",
        "read_memory",
        "read_process_state",
        "read_timer",
        "read_unit_file",
        "read_unit_status",
        "tail_journal",
    ]
    assert not set(READ_TOOLS) & set(WRITE_TOOLS)
    for tool in READ_TOOLS.values():
        spec = tool.spec()
        assert spec.description == inspect.getdoc(tool.function)
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert issubclass(tool.output_model, ToolOutput)
    assert {n: t.gives for n, t in READ_TOOLS.items()} == {
        "disk_usage": "disk",
        "http_get_health": "health",
        "list_failed_units": None,
        "list_listeners": "listeners",
        "read_connections": "connections",
        "read_config_edges": "configured",
        "read_baseline": "baseline",
        "read_certificates": "certificates",
        "read_changes": "changes",
        "read_limits": "limits",
        "read_memory": "memory",
        "read_process_state": "process",
        "read_timer": "timer",
        "read_unit_file": "unit_file",
        "read_unit_status": "state",
        "tail_journal": "journal",
    }


def test_systemctl_show_is_parsed_into_a_unit_status() -> None:
    """A recorded ``systemctl show`` block becomes a UnitStatus with typed fields."""
    [props] = parse_show(recorded.KILLED_SHOW)
    assert set(props) == set(PROPERTIES)
    status = parse_unit_status(props, [])
    assert (status.unit, status.load_state, status.active_state, status.sub_state) == (
        "killed.service",
        "loaded",
        "failed",
        "failed",
    )
    assert (status.result, status.exec_main_code, status.exec_main_status) == (
        "signal",
        "killed",
        9,
    )
    assert status.signal_name == "SIGKILL"
    assert status.requires == ["sysinit.target", "system.slice"]
    assert status.wants == [] and status.binds_to == []
    assert status.inactive_enter_timestamp == datetime(2026, 11, 29, 21, 44, 40, 629087, UTC)
    assert status.invocation_id == "82d3ba5b3fec48d39ed2be89fe58647a"
    assert status.need_daemon_reload is False
    assert status.summary() == (
        "killed.service is failed/failed; Result=signal; main process was killed by SIGKILL; "
        "NRestarts=0"
    )


def test_show_output_of_several_units_is_split_into_blocks() -> None:
    """Blocks for several units are split at blank lines, in order."""
    blocks = parse_show(recorded.KILLED_SHOW + "\n" + recorded.APP_SHOW + "\n")
    assert [b["Id"] for b in blocks] == ["killed.service", "app.service"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sun 2026-11-29 21:44:24.405221 UTC", datetime(2026, 11, 29, 21, 44, 24, 405221, UTC)),
        ("Sun 2026-11-29 21:44:24 UTC", datetime(2026, 11, 29, 21, 44, 24, tzinfo=UTC)),
        ("", None),
        ("n/a", None),
    ],
)
def test_timestamps(text: str, expected: datetime | None) -> None:
    """--timestamp=us+utc values parse to aware datetimes; unset ones to None."""
    assert parse_timestamp(text) == expected


def test_failed_units_json_is_parsed() -> None:
    """``systemctl list-units --state=failed --output=json`` becomes FailedUnits."""
    failed = parse_failed_units(recorded.FAILED_UNITS_JSON)
    assert [u.unit for u in failed.units] == ["badconf.service", "db.service", "killed.service"]
    assert failed.units[0].active == "failed"
    assert failed.summary() == "3 failed units: badconf.service, db.service, killed.service"
    assert parse_failed_units("[]").summary() == "no failed units"
    with pytest.raises(CommandFailed):
        parse_failed_units('{"not": "a list"}')


@pytest.mark.parametrize(
    "name",
    [
        "nginx",
        "../../etc/passwd",
        "-.mount",
        "a;b.service",
        "nginx.service\n",
        "x" * 300 + ".service",
    ],
)
def test_unit_names_are_validated_before_anything_runs(name: str) -> None:
    """read_unit_status and tail_journal refuse what is not a unit name (shared UnitName)."""
    for tool in ("read_unit_status", "tail_journal"):
        with pytest.raises(ToolError, match=f"bad arguments for {tool}: unit: "):
            READ_TOOLS[tool].parse_args({"unit": name})


@pytest.mark.parametrize("name", ["nginx.service", "getty@tty1.service", "dev-sda1.mount"])
def test_valid_unit_names_pass(name: str) -> None:
    """Ordinary and instantiated unit names pass."""
    assert READ_TOOLS["read_unit_status"].parse_args({"unit": name}).model_dump() == {"unit": name}


def test_journal_lines_are_bounded() -> None:
    """tail_journal asks for at most 200 lines; since is an age or an ISO time."""
    tool = READ_TOOLS["tail_journal"]
    assert tool.parse_args({"unit": "a.service"}).model_dump() == {
        "unit": "a.service",
        "lines": 50,
        "since": None,
        "own_output_only": False,
    }
    for bad in ({"lines": 201}, {"lines": 0}, {"since": "yesterday"}, {"since": "99d"}):
        with pytest.raises(ToolError):
            tool.parse_args({"unit": "a.service", **bad})
    for good in ("10min", "30s", "2h", "1d", "2026-11-29T21:00:00Z", "2026-11-29T21:00:00"):
        assert tool.parse_args({"unit": "a.service", "since": good})


def test_since_cutoffs() -> None:
    """Relative ages count back from now; ISO times without offset are UTC."""
    now = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)
    assert since_cutoff("10min", now) == now - timedelta(minutes=10)
    assert since_cutoff("2h", now) == now - timedelta(hours=2)
    assert since_cutoff("2026-11-29T21:00:00", now) == datetime(2026, 11, 29, 21, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="future"):
        since_cutoff("2026-12-29T21:00:00", now)


def test_journal_entry_becomes_a_bounded_line() -> None:
    """An entry as systemd.journal.Reader returns it becomes a line: UTC time, priority
    name, source, message cut to 500 characters."""
    entry = {
        "__REALTIME_TIMESTAMP": datetime(2026, 11, 29, 22, 44, 38, 556295, tzinfo=UTC),
        "PRIORITY": 3,
        "SYSLOG_IDENTIFIER": "nginx",
        "MESSAGE": "x" * 800,
    }
    line = journal_line(entry)
    assert line.time == "2026-11-29T22:44:38.556295Z"
    assert line.priority == "err" and line.source == "nginx"
    assert len(line.message) == 500 and line.message.endswith("…")
    raw = journal_line({"_COMM": "app", "MESSAGE": b"\xff bytes"})
    assert (raw.source, raw.message, raw.priority) == ("app", "\ufffd bytes", "info")


def test_journal_keeps_the_newest_lines_that_fit() -> None:
    """When lines do not fit the budget, the oldest are left out and counted; the rest
    is newest last, and its JSON fits."""
    newest_first = [
        JournalLine(time=f"t{i}", priority="info", source="app", message=f"line {i} " + "y" * 90)
        for i in range(100, 0, -1)
    ]
    tail = fit("app.service", None, newest_first, TOOL_OUTPUT_BUDGET)
    assert 0 < len(tail.lines) < 100
    assert tail.omitted == 100 - len(tail.lines)
    assert tail.lines[-1].time == "t100"
    assert tail.lines[0].time == f"t{100 - len(tail.lines) + 1}"
    assert len(json.dumps(tail.model_dump(), separators=(",", ":"))) <= TOOL_OUTPUT_BUDGET


def test_a_long_status_fits_the_observation_budget() -> None:
    """A unit with long After=/Wants= lists loses entries of those (counted) until its
    JSON fits; Requires= stays whole."""
    many = " ".join(f"some-rather-long-dependency-name-{i}.service" for i in range(32))
    show = recorded.APP_SHOW.replace("Wants=\n", f"Wants={many}\n").replace(
        "After=sysinit.target", f"After={many} sysinit.target"
    )
    [props] = parse_show(show)
    status = fit_status(parse_unit_status(props, []))
    assert len(status.model_dump_json()) <= TOOL_OUTPUT_BUDGET
    assert status.omitted_dependencies > 0
    assert status.requires == ["sysinit.target", "db.service", "system.slice"]


def test_many_failed_units_fit_the_observation_budget() -> None:
    """Fifty failed units are cut to what fits, and the rest counted."""
    rows = [
        {
            "unit": f"unit-{i}.service",
            "load": "loaded",
            "active": "failed",
            "sub": "failed",
            "description": "A service with a long description " * 3,
        }
        for i in range(50)
    ]
    failed = parse_failed_units(json.dumps(rows))
    assert len(failed.model_dump_json()) <= TOOL_OUTPUT_BUDGET
    assert failed.omitted == 50 - len(failed.units) > 0
    assert failed.units[0].unit == "unit-0.service"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2h 51min 25.545956s", 10285.545956),
        ("100ms", 0.1),
        ("1d 2us", 86400.000002),
        ("", None),
        ("n/a", None),
    ],
)
def test_timespans(text: str, seconds: float | None) -> None:
    """systemd's timespans ("2h 51min 25.545956s", "100ms", "1d 2us") are read as seconds;
    an empty one or "n/a" is no time at all."""
    got = parse_timespan(text)
    assert got == pytest.approx(seconds) if seconds is not None else got is None


def test_a_monotonic_timer_gets_a_wall_clock_next_elapse() -> None:
    """OnBootSec=/OnUnitActiveSec= timers have no calendar time: their monotonic one is
    turned into UTC with the clock systemd uses (a timer due in 10 min, at boot+3h)."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    props = {"NextElapseUSecRealtime": "", "NextElapseUSecMonotonic": "3h 10min"}
    assert next_elapse(props, now=now, monotonic=3 * 3600.0) == datetime(
        2026, 12, 1, 12, 10, tzinfo=UTC
    )
    calendar = {"NextElapseUSecRealtime": "Tue 2026-12-01 12:05:00 UTC"}
    assert next_elapse(calendar, now=now, monotonic=0.0) == datetime(2026, 12, 1, 12, 5, tzinfo=UTC)


def test_one_step_reading_several_statuses_asks_systemd_twice_and_each_answer_is_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step that reads four units' states (a chain and its neighbours) starts two
    `systemctl show` commands, the statuses and then their dependencies, not eight; each
    call's answer is what it would have been alone (its own failed dependency, its own
    state); and when reading them together fails, each is read alone."""
    from diagnose_svc.tools import ToolContext, read_unit_status
    from diagnose_svc.tools._systemctl import UnitProperties
    from diagnose_svc.tools.read_unit_status import UnitArgs
    from shared_schema import DiagnoseSettings

    host = {
        "web.service": {"ActiveState": "active", "Requires": "app.service"},
        "app.service": {"ActiveState": "active", "Wants": "db.service"},
        "db.service": {"ActiveState": "failed", "Result": "exit-code"},
        "cron.service": {"ActiveState": "active"},
    }
    commands: list[list[str]] = []

    def show(units: list[str], properties: list[str]) -> list[UnitProperties]:
        commands.append(list(units))
        if "broken" in host:
            raise CommandFailed("systemctl show: Failed to get properties")
        return [
            UnitProperties(
                u, {"Id": u, "LoadState": "loaded", **host.get(u, {"LoadState": "not-found"})}
            )
            for u in units
        ]

    monkeypatch.setattr(read_unit_status, "show", show)
    tool = READ_TOOLS["read_unit_status"]
    base = ToolContext(settings=DiagnoseSettings())
    alone = {u: tool(UnitArgs(unit=u), base).model_dump() for u in host}
    # Alone: each its status, and its dependencies where it has any (the failed db: whether
    # a socket of its name starts it).
    assert len(commands) == 7
    assert alone["app.service"]["unhealthy_dependencies"][0]["unit"] == "db.service"
    assert alone["web.service"]["unhealthy_dependencies"] == []

    commands.clear()
    step = base.step(asked={"read_unit_status": tuple(host)})
    together = {u: tool(UnitArgs(unit=u), step).model_dump() for u in host}
    assert together == alone
    assert commands == [sorted(host), ["app.service", "db.service"], ["db.socket"]]

    commands.clear()
    host["broken"] = {}
    step = base.step(asked={"read_unit_status": ("web.service", "db.service")})
    with pytest.raises(CommandFailed):
        tool(UnitArgs(unit="db.service"), step)
    assert commands == [["db.service", "web.service"], ["db.service"]]
