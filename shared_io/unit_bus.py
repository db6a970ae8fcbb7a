"""Unit properties read from systemd over D-Bus, in-process: no process per read.

:func:`read` asks systemd (``org.freedesktop.systemd1`` on the system bus) for the
properties of each unit with ``org.freedesktop.DBus.Properties``: one ``GetAll`` of an
interface where many of its properties are asked (more than :data:`GET_ALL_FROM`), else
one ``Get`` each; all the calls sent at once, then their replies read back. It names a
unit by its object path, as ``systemctl show`` does (systemd loads the unit a path names,
as it does for systemctl). It is read-only: ``Get`` and ``GetAll`` are the only methods it
calls (tests/integration/test_unit_reads_over_dbus.py reads what goes out on its socket).
The values are written as ``systemctl show`` prints them (:mod:`shared_io.unit_render`).

It returns None, and :func:`shared_io.unit_show.show` runs ``systemctl show`` instead,
wherever it cannot give systemctl's answer, or not sooner: many units at once
(:data:`CALLS_AT_MOST`), the bus or systemd cannot be reached or does not answer in time,
a call fails (a name systemd refuses, a denial), a unit name is not of a type systemd
knows, or a property or value is one it does not print as systemctl does.
``OPSBOT_SYSTEMD_READ=systemctl`` makes it always return None (the benchmarks' baseline in
the same run; a host whose bus misbehaves).

A process keeps one connection (jeepney, pure Python), made when first needed, used under
a lock (a diagnosis runs a step's reads in threads; systemd answers one call at a time
anyway), dropped after any error or a fork and made again on the next read; after a
failed connect it waits :data:`RETRY_SECONDS` before trying again, so that a host without
a bus pays next to nothing more than systemctl.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shared_io.unit_render import NotRendered, interface_of, render

if TYPE_CHECKING:
    from jeepney.io.blocking import DBusConnection

__all__ = ["READ_SWITCH", "read"]

#: The environment variable that chooses how units are read: ``systemctl`` for the
#: subprocess only; anything else (or unset), D-Bus where it can.
READ_SWITCH = "OPSBOT_SYSTEMD_READ"
#: Seconds without a new connect after one failed.
RETRY_SECONDS = 5.0
#: More properties than this of one interface are read with one GetAll, not one Get each.
GET_ALL_FROM = 8
#: At most this many Get calls' worth in one read (a GetAll counts as GET_ALL_FROM): past
#: it, jeepney's pure-Python marshalling costs more than one systemctl process (a page of
#: 50 units' definitions is as fast either way), and systemctl is run.
CALLS_AT_MOST = 200
#: Seconds a connect (and its authentication) may take.
CONNECT_SECONDS = 1.0
SYSTEMD = "org.freedesktop.systemd1"
UNIT_PATH = "/org/freedesktop/systemd1/unit/"
#: Replies that mean "this unit has no such property" (systemctl prints nothing).
_ABSENT = frozenset(
    {"org.freedesktop.DBus.Error.UnknownProperty", "org.freedesktop.DBus.Error.UnknownInterface"}
)


class _Log:
    """``opsbot.unit_bus``'s logger, where structlog is loaded (as shared_io.run's)."""

    def debug(self, event: str, **fields: object) -> None:
        structlog = sys.modules.get("structlog")
        if structlog is not None:
            structlog.get_logger("opsbot.unit_bus").debug(event, **fields)


log = _Log()


class _Failed(Exception):
    """The bus did not give the answer: systemctl is asked instead."""


def object_path(unit: str) -> str:
    """The unit's D-Bus object path, as systemd escapes a name (bus_label_escape)."""
    return UNIT_PATH + "".join(
        c if c.isascii() and c.isalnum() else f"_{b:02x}"
        for c, b in ((chr(b), b) for b in unit.encode())
    )


class _Connection:
    """The process's one connection to the system bus, used under a lock."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No connection yet, the lock free."""
        self.lock = threading.Lock()
        self._conn: DBusConnection | None = None
        self._pid = 0
        self._retry_at = 0.0

    def _connected(self) -> DBusConnection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None
        if time.monotonic() < self._retry_at:
            raise _Failed("the system bus could not be reached a moment ago")
        try:
            from jeepney.io.blocking import open_dbus_connection

            self._conn = open_dbus_connection(bus="SYSTEM", auth_timeout=CONNECT_SECONDS)
        except Exception as exc:  # no bus, refused, a timeout, an auth failure
            self._retry_at = time.monotonic() + RETRY_SECONDS
            raise _Failed(f"cannot connect to the system bus: {exc}") from exc
        self._pid = os.getpid()
        return self._conn

    def drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            try:
                conn.close()
            except OSError:
                pass

    def get(
        self, calls: Sequence[tuple[str, str, Sequence[str]]], timeout: float
    ) -> list[dict[str, tuple[str, Any]]]:
        """For each (path, interface, properties): {property: (signature, value)} of those
        the object has; _Failed for any error but "no such property". All the calls are
        sent at once, then their replies read: one ``GetAll`` where many properties of one
        interface are asked, else one ``Get`` each."""
        from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call

        replies = (MessageType.method_return, MessageType.error)
        conn = self._connected()
        deadline = time.monotonic() + timeout
        try:
            waiting: dict[int, tuple[int, str | None]] = {}
            data = []
            for index, (path, interface, names) in enumerate(calls):
                address = DBusAddress(path, SYSTEMD, "org.freedesktop.DBus.Properties")
                asked: list[tuple[str | None, Any]]
                if len(names) > GET_ALL_FROM:
                    asked = [(None, new_method_call(address, "GetAll", "s", (interface,)))]
                else:
                    asked = [
                        (name, new_method_call(address, "Get", "ss", (interface, name)))
                        for name in names
                    ]
                for name, message in asked:
                    serial = next(conn.outgoing_serial)
                    waiting[serial] = (index, name)
                    data.append(message.serialise(serial))
            conn.sock.sendall(b"".join(data))
            answers: list[dict[str, tuple[str, Any]]] = [{} for _ in calls]
            while waiting:
                message = conn.receive(timeout=max(0.0, deadline - time.monotonic()))
                reply_to = message.header.fields.get(HeaderFields.reply_serial, -1)
                if message.header.message_type not in replies or reply_to not in waiting:
                    # A signal (NameAcquired): never an answer, whatever reply serial it
                    # names (any local user may send one; the bus lets a reply through
                    # only from the connection the call went to).
                    continue
                index, name = waiting.pop(reply_to)
                if message.header.message_type == MessageType.error:
                    error = message.header.fields.get(HeaderFields.error_name, "")
                    if error in _ABSENT:
                        continue
                    said = message.body[0] if message.body else ""
                    raise _Failed(f"{error}: {said}")
                if name is None:
                    wanted = calls[index][2]
                    answers[index].update((n, v) for n, v in message.body[0].items() if n in wanted)
                else:
                    answers[index][name] = message.body[0]
            return answers
        except _Failed:
            self.drop()  # replies to the calls after the failed one are still to come
            raise
        except Exception as exc:  # the socket closed, a timeout, a message we cannot read
            self.drop()
            raise _Failed(f"the system bus failed: {exc!r}") from exc


_connection = _Connection()
# A child forked while another thread held the lock would wait on it forever: it starts
# afresh (its copy of the parent's socket is left alone, the parent's to use).
os.register_at_fork(after_in_child=_connection.reset)


def read(units: Sequence[str], properties: Sequence[str], timeout: float) -> list[str] | None:
    """``systemctl show``'s output lines for ``properties`` of ``units`` (a blank line
    between units), read over D-Bus; None where systemctl must be asked instead."""
    if os.environ.get(READ_SWITCH) == "systemctl" or not units or not properties:
        return None
    try:
        calls: list[tuple[str, str, list[str]]] = []
        of_unit: list[int] = []  # which unit each call asks of
        for at, unit in enumerate(units):
            by_interface: dict[str, list[str]] = {}
            for name in properties:
                by_interface.setdefault(interface_of(unit, name), []).append(name)
            for interface, names in by_interface.items():
                calls.append((object_path(unit), interface, names))
                of_unit.append(at)
        weight = sum(min(len(names), GET_ALL_FROM) for _path, _interface, names in calls)
        if weight > CALLS_AT_MOST:
            return None  # systemctl is faster
        with _connection.lock:
            answers = _connection.get(calls, timeout)
        found: list[dict[str, tuple[str, Any]]] = [{} for _ in units]
        for at, answer in zip(of_unit, answers, strict=True):
            found[at].update(answer)
        lines: list[str] = []
        for at, values in enumerate(found):
            if at:
                lines.append("")  # systemctl's blank line between units
            for name in properties:
                if name in values:
                    lines.extend(render(name, *values[name]))
        return lines
    except (NotRendered, _Failed) as exc:
        log.debug("unit_bus.fallback", units=list(units[:3]), reason=str(exc))
        return None
