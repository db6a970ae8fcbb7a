"""Unit properties read over D-Bus: each value written as ``systemctl show`` prints it, or
not at all (then systemctl is asked), and systemctl asked whenever the bus is not there or
the operator said so. What systemd itself answers is compared with systemctl in
tests/integration/test_unit_reads_over_dbus.py."""

from __future__ import annotations

import os

import pytest

from shared_io import unit_bus
from shared_io.unit_bus import object_path, read
from shared_io.unit_render import NotRendered, interface_of, quote_word, render, timestamp_utc

#: 2026-12-06 21:09:03.000042 UTC, in microseconds.
WHEN = 1_796_591_343_000_042


def test_timestamps_are_utc_with_microseconds_and_none_is_empty() -> None:
    """A timestamp prints as --timestamp=us+utc does; 0 and infinity (never) print empty."""
    assert timestamp_utc(WHEN) == "Sun 2026-12-06 21:09:03.000042 UTC"
    assert render("ActiveEnterTimestamp", "t", 0) == ["ActiveEnterTimestamp="]
    assert render("ActiveEnterTimestamp", "t", 2**64 - 1) == ["ActiveEnterTimestamp="]


def test_words_are_quoted_as_systemds_shell_maybe_quote() -> None:
    """A word with a space, a quote, a backslash or a $ is double-quoted, with \\ before
    " \\ ` $; a plain word is left alone."""
    assert quote_word("PORT=8080") == "PORT=8080"
    assert quote_word("GREETING=hello world") == '"GREETING=hello world"'
    assert quote_word('QUOTE=a"b') == '"QUOTE=a\\"b"'
    assert quote_word("system-web\\x2dapi.slice") == '"system-web\\\\x2dapi.slice"'
    assert quote_word("PRICE=5$") == '"PRICE=5\\$"'
    assert render("Environment", "as", []) == ["Environment="]


def test_a_word_outside_printable_ascii_is_left_to_systemctl() -> None:
    """systemctl escapes control characters and non-ASCII in its own way: not copied here."""
    for word in ("caf\u00e9", "tab\there", "new\nline"):
        with pytest.raises(NotRendered):
            quote_word(word)


def test_commands_print_one_line_each_with_how_they_ended() -> None:
    """Each command of an Exec*= is one line; a killed one says its signal, one that never
    ran says n/a; an empty list prints nothing."""
    killed = ("/bin/sleep", ["/bin/sleep", "infinity"], False, WHEN, 1, WHEN, 2, 42, 2, 9)
    never = ("/bin/true", ["/bin/true", "--check"], True, 0, 0, 0, 0, 0, 0, 0)
    assert render("ExecStart", "a(sasbttttuii)", [killed, never]) == [
        "ExecStart={ path=/bin/sleep ; argv[]=/bin/sleep infinity ; ignore_errors=no ; "
        "start_time=[Sun 2026-12-06 21:09:03.000042 UTC] ; "
        "stop_time=[Sun 2026-12-06 21:09:03.000042 UTC] ; pid=42 ; code=killed ; "
        "status=9/KILL }",
        "ExecStart={ path=/bin/true ; argv[]=/bin/true --check ; ignore_errors=yes ; "
        "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }",
    ]
    assert render("ExecStartPre", "a(sasbttttuii)", []) == []


def test_limits_and_counters_say_infinity_and_not_set() -> None:
    """The largest value is "infinity" for a limit and "[not set]" for a counter."""
    assert render("MemoryMax", "t", 2**64 - 1) == ["MemoryMax=infinity"]
    assert render("TasksCurrent", "t", 2**64 - 1) == ["TasksCurrent=[not set]"]
    assert render("TasksCurrent", "t", 7) == ["TasksCurrent=7"]
    assert render("InvocationID", "ay", bytes(range(16))) == [
        "InvocationID=000102030405060708090a0b0c0d0e0f"
    ]
    assert render("LoadError", "(ss)", ("", "")) == ["LoadError="]


def test_a_property_or_type_not_in_the_table_is_left_to_systemctl() -> None:
    """A property opsbot does not read this way, or a value of another D-Bus type than
    systemd 252's, is not guessed at."""
    with pytest.raises(NotRendered):
        render("NextElapseUSecMonotonic", "t", 5)
    with pytest.raises(NotRendered):
        render("MainPID", "t", 5)
    with pytest.raises(NotRendered):
        interface_of("no-suffix", "Result")
    assert interface_of("web@a.service", "Result") == "org.freedesktop.systemd1.Service"
    assert interface_of("web.timer", "ActiveState") == "org.freedesktop.systemd1.Unit"


def test_object_paths_escape_as_systemd_does() -> None:
    """A unit's object path escapes every byte but ASCII letters and digits as _xx."""
    assert object_path("web@a\\x2db.service") == (
        "/org/freedesktop/systemd1/unit/web_40a_5cx2db_2eservice"
    )


def test_the_switch_and_a_missing_bus_leave_the_read_to_systemctl(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """OPSBOT_SYSTEMD_READ=systemctl, or a system bus that is not there, make the reader
    step aside (None: systemctl is run), and a bus that failed is not tried again at once."""
    monkeypatch.setenv("OPSBOT_SYSTEMD_READ", "systemctl")
    assert read(["web.service"], ["ActiveState"], 1.0) is None
    monkeypatch.delenv("OPSBOT_SYSTEMD_READ")
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus")
    fresh = unit_bus._Connection()
    monkeypatch.setattr(unit_bus, "_connection", fresh)
    assert read(["web.service"], ["ActiveState"], 1.0) is None
    assert fresh._retry_at > 0


def test_many_units_at_once_are_left_to_systemctl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past CALLS_AT_MOST (a page of the host's definitions), one systemctl process is
    faster than the calls' pure-Python marshalling: the bus is not even connected to."""
    monkeypatch.delenv("OPSBOT_SYSTEMD_READ")
    fresh = unit_bus._Connection()
    monkeypatch.setattr(unit_bus, "_connection", fresh)
    many = [f"extra@{n}.service" for n in range(unit_bus.CALLS_AT_MOST // 4)]
    properties = ["Id", "LoadState", "ActiveState", "SubState", "Result"]
    assert read(many, properties, 1.0) is None
    assert fresh._conn is None and fresh._retry_at == 0.0


def test_every_property_opsbot_reads_is_rendered() -> None:
    """Each property a read tool, the scope, the executor's readings or the verification
    asks of systemd is one the bus reader prints (else each such read would quietly run
    systemctl): all but NextElapseUSecMonotonic, a time span systemctl formats its own way."""
    from diagnose_svc import scope
    from diagnose_svc.tools import (
        _host_units,
        disk_usage,
        read_changes,
        read_limits,
        read_memory,
        read_process_state,
        read_timer,
        read_unit_file,
        read_unit_status,
    )
    from plans import readings
    from shared_io.unit_render import RENDERERS
    from shared_io.unit_show import STATE_PROPERTIES

    asked = {
        *read_unit_status.PROPERTIES,
        *read_unit_status.DEPENDENCY_PROPERTIES,
        *read_memory.PROPERTIES,
        *read_limits.PROPERTIES,
        *read_unit_file.PROPERTIES,
        *read_changes.PROPERTIES,
        *read_process_state.PROPERTIES,
        *read_timer.TIMER_PROPERTIES,
        *read_timer.SERVICE_PROPERTIES,
        *disk_usage.PROPERTIES,
        *_host_units.DEFINITION,
        *scope.EDGES,
        *readings.PROPERTIES,
        *STATE_PROPERTIES,
        "OnFailure",
        "Triggers",
        "StatusText",
        "Type",
        "ExecMainStartTimestamp",
    }
    assert asked - RENDERERS.keys() == {"NextElapseUSecMonotonic"}


def test_a_forked_child_starts_with_the_lock_free() -> None:
    """A child forked while a read holds the lock (another thread's) does not wait on it
    forever: it starts with no connection and the lock free."""
    with unit_bus._connection.lock:
        pid = os.fork()
        if pid == 0:  # the child: 0 if it could take the lock at once
            free = unit_bus._connection.lock.acquire(blocking=False)
            os._exit(0 if free and unit_bus._connection._conn is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


class _ScriptedBus:
    """A connection whose incoming messages are scripted: what any local user may put on
    root's connection first (a unicast signal: the system bus lets anyone send one), then
    systemd's reply."""

    def __init__(self, incoming: list[object]) -> None:
        import itertools

        self.outgoing_serial = itertools.count(start=1)
        self.incoming = incoming
        self.sock = self

    def sendall(self, data: bytes) -> None:
        pass

    def receive(self, timeout: float) -> object:
        return self.incoming.pop(0)


def test_a_signal_naming_the_calls_serial_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any local user may send root's connection a signal carrying the serial of its next
    Get as its reply serial (serials count from 1): it is not systemd's answer, and the
    unit reads as systemd says, not as the signal does."""
    from jeepney import DBusAddress, HeaderFields, MessageType, new_signal

    monkeypatch.delenv("OPSBOT_SYSTEMD_READ")
    attacker = DBusAddress("/x", interface="x.y")
    forged = new_signal(attacker, "Forged", "v", (("s", "failed"),))
    forged.header.fields[HeaderFields.reply_serial] = 1
    systemd = new_signal(attacker, "Reply", "v", (("s", "active"),))
    systemd.header.message_type = MessageType.method_return
    systemd.header.fields[HeaderFields.reply_serial] = 1
    fresh = unit_bus._Connection()
    fresh._conn, fresh._pid = _ScriptedBus([forged, systemd]), os.getpid()
    monkeypatch.setattr(unit_bus, "_connection", fresh)

    assert read(["web.service"], ["ActiveState"], 1.0) == ["ActiveState=active"]
