"""The kernel's socket diagnostics, read unprivileged: every TCP socket of this network
namespace with the cgroup it was made in, and that cgroup's unit.

A ``SOCK_DIAG_BY_FAMILY`` dump over ``NETLINK_SOCK_DIAG`` (sock_diag(7)) answers any user
with each socket's addresses, state, owner uid and ``INET_DIAG_CGROUP_ID``: the inode
number of the cgroup2 directory of the process that made it. The directories of the
cgroup2 mount (found in ``/proc/self/mountinfo``: ``/sys/fs/cgroup``, or
``/sys/fs/cgroup/unified`` on hybrid hosts) are walked once, bounded, to name them. No
other user's ``/proc/PID/fd`` is read: nothing here needs a privilege.

An accepted socket carries its listener's cgroup, so a loopback connection names both
ends: the client's unit and the server's. A listener PID 1 made for a socket unit is in
``init.scope``; the caller maps it through the socket units' ``Listen=``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_CGROUP_ID = 21
#: TCP states (include/net/tcp_states.h) worth reading: a connection, one being made to a
#: peer that does not answer, one the peer closed, a listener.
TCP_STATES = {1: "established", 2: "syn-sent", 8: "close-wait", 10: "listen"}
#: Sockets read at most, and cgroup directories walked at most: bounds, not figures.
MAX_SOCKETS = 20000
MAX_CGROUPS = 20000
_HEADER = struct.Struct("=IHHII")
_REQUEST = struct.Struct("=BBBBI48s")
_MESSAGE = struct.Struct("=BBBB48sIIIII")
_ATTR = struct.Struct("=HH")
_UNIT = re.compile(r"[^/]+\.(?:service|scope|socket|mount|swap|timer)")


class SockDiagError(OSError):
    """The socket diagnostics could not be read (the family refused, a bad answer)."""


@dataclass(frozen=True)
class TcpSocket:
    state: str
    local: str
    local_port: int
    remote: str
    remote_port: int
    uid: int
    cgroup_id: int


def _address(family: int, raw: bytes) -> str:
    packed = raw[:4] if family == socket.AF_INET else raw[:16]
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    return str(address)


def _request(family: int, seq: int) -> bytes:
    states = sum(1 << state for state in TCP_STATES)
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, states, bytes(48))
    return (
        _HEADER.pack(
            _HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
        )
        + body
    )


def _parse(payload: bytes) -> TcpSocket | None:
    if len(payload) < _MESSAGE.size:
        return None
    family, state, _, _, sockid, _, _, _, uid, _ = _MESSAGE.unpack_from(payload)
    if state not in TCP_STATES:
        return None
    sport, dport = struct.unpack_from("!HH", sockid)
    cgroup_id = 0
    offset = _MESSAGE.size
    while offset + _ATTR.size <= len(payload):
        length, kind = _ATTR.unpack_from(payload, offset)
        if length < _ATTR.size:
            break
        if kind == INET_DIAG_CGROUP_ID and length >= _ATTR.size + 8:
            (cgroup_id,) = struct.unpack_from("=Q", payload, offset + _ATTR.size)
        offset += (length + 3) & ~3
    return TcpSocket(
        state=TCP_STATES[state],
        local=_address(family, sockid[4:20]),
        local_port=sport,
        remote=_address(family, sockid[20:36]),
        remote_port=dport,
        uid=uid,
        cgroup_id=cgroup_id,
    )


def _dump(sock: socket.socket, family: int, seq: int) -> Iterator[TcpSocket]:
    sock.send(_request(family, seq))
    count = 0
    while True:
        data = sock.recv(65536)
        if not data:
            return
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
            if length < _HEADER.size:
                raise SockDiagError("a malformed answer from the kernel's socket diagnostics")
            if kind == NLMSG_DONE:
                return
            if kind == NLMSG_ERROR:
                (errno,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                if errno:
                    raise SockDiagError(-errno, os.strerror(-errno))
                return
            if kind == SOCK_DIAG_BY_FAMILY:
                found = _parse(data[offset + _HEADER.size : offset + length])
                if found is not None:
                    count += 1
                    if count > MAX_SOCKETS:
                        return
                    yield found
            offset += (length + 3) & ~3


def tcp_sockets() -> list[TcpSocket]:
    """The TCP sockets of this network namespace in the states of :data:`TCP_STATES`."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    except OSError as exc:
        raise SockDiagError(
            exc.errno, f"cannot open the socket diagnostics: {exc.strerror}"
        ) from None
    with sock:
        sock.settimeout(5.0)
        found = []
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            found += list(_dump(sock, family, seq))
        return found


def cgroup_root(mountinfo: str | None = None) -> Path | None:
    """Where the cgroup2 hierarchy is mounted (``/sys/fs/cgroup``, or
    ``/sys/fs/cgroup/unified`` on a hybrid host), from /proc/self/mountinfo."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if sep and tail.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(fields[4].replace("\\040", " "))
    return None


def cgroup_units(root: Path | None) -> dict[int, str]:
    """cgroup id (its directory's inode) -> the unit it belongs to (the deepest unit in
    its path: ``system.slice/app.service/worker`` is ``app.service``)."""
    if root is None:
        return {}
    units: dict[int, str] = {}
    todo: list[tuple[Path, str]] = [(root, "")]
    seen = 0
    while todo and seen < MAX_CGROUPS:
        path, unit = todo.pop()
        with contextlib.suppress(OSError), os.scandir(path) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                seen += 1
                own = entry.name if _UNIT.fullmatch(entry.name) else unit
                with contextlib.suppress(OSError):
                    if own:
                        units[entry.inode()] = own
                todo.append((Path(entry.path), own))
    return units
