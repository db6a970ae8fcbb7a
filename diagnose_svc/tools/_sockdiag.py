"""The kernel's socket diagnostics, read unprivileged: every TCP socket of this network
namespace with the cgroup it was made in, and that cgroup's unit.

A ``SOCK_DIAG_BY_FAMILY`` dump over ``NETLINK_SOCK_DIAG`` (sock_diag(7)) answers any user
with each socket's addresses, state, owner uid and ``INET_DIAG_CGROUP_ID``: the inode
number of the cgroup2 directory of the process that made it. The directories of the
cgroup2 mount are walked once, bounded, to name them (``_cgroups``). No other user's
``/proc/PID/fd`` is read: nothing here needs a privilege.

An accepted socket carries its listener's cgroup, so a loopback connection names both
ends: the client's unit and the server's. A listener PID 1 made for a socket unit is in
``init.scope``; the caller maps it through the socket units' ``Listen=``.

Unix stream sockets (the same dump, family ``AF_UNIX``) carry no cgroup: each comes with
its path (a listener's, and its accepted sockets'), its peer's inode and the uid that made
it. A client is known by its uid only, and the listener by its path.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

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
#: Sockets read at most: a bound, not a figure.
MAX_SOCKETS = 20000
_HEADER = struct.Struct("=IHHII")
_REQUEST = struct.Struct("=BBBBI48s")
_MESSAGE = struct.Struct("=BBBB48sIIIII")
_ATTR = struct.Struct("=HH")
T = TypeVar("T")


#: unix_diag (linux/unix_diag.h): what to show of each socket, and its attributes.
UDIAG_SHOW_NAME, UDIAG_SHOW_PEER, UDIAG_SHOW_UID = 0x1, 0x4, 0x40
UNIX_DIAG_NAME, UNIX_DIAG_PEER, UNIX_DIAG_UID = 0, 2, 7
#: Unix socket states worth reading: a listener, a connection.
UNIX_STATES = {1: "established", 10: "listen"}
_UNIX_REQUEST = struct.Struct("=BBHIIIII")
_UNIX_MESSAGE = struct.Struct("=BBBBIII")


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


@dataclass(frozen=True)
class UnixSocket:
    state: str
    inode: int
    #: The path it is bound to ("" for none; "@name" for an abstract name): a listener's
    #: and, in the kernel's answer, its accepted sockets' too.
    path: str
    #: The inode of the socket at the other end of a connection (0 for none).
    peer: int
    #: The uid that made it (-1 where the kernel did not say).
    uid: int


def _address(family: int, raw: bytes) -> str:
    packed = raw[:4] if family == socket.AF_INET else raw[:16]
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    return str(address)


def _dump_request(body: bytes, seq: int) -> bytes:
    """A SOCK_DIAG_BY_FAMILY dump request of ``body`` (one family's request)."""
    header = _HEADER.pack(
        _HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
    )
    return header + body


def _attributes(payload: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    """(kind, value) of each netlink attribute of ``payload`` from ``offset`` on."""
    while offset + _ATTR.size <= len(payload):
        length, kind = _ATTR.unpack_from(payload, offset)
        if length < _ATTR.size:
            return
        yield kind, payload[offset + _ATTR.size : offset + length]
        offset += (length + 3) & ~3


def _request(family: int, seq: int) -> bytes:
    states = sum(1 << state for state in TCP_STATES)
    return _dump_request(_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, states, bytes(48)), seq)


def _parse(payload: bytes) -> TcpSocket | None:
    if len(payload) < _MESSAGE.size:
        return None
    family, state, _, _, sockid, _, _, _, uid, _ = _MESSAGE.unpack_from(payload)
    if state not in TCP_STATES:
        return None
    sport, dport = struct.unpack_from("!HH", sockid)
    cgroup_id = 0
    for kind, value in _attributes(payload, _MESSAGE.size):
        if kind == INET_DIAG_CGROUP_ID and len(value) >= 8:
            (cgroup_id,) = struct.unpack_from("=Q", value)
    return TcpSocket(
        state=TCP_STATES[state],
        local=_address(family, sockid[4:20]),
        local_port=sport,
        remote=_address(family, sockid[20:36]),
        remote_port=dport,
        uid=uid,
        cgroup_id=cgroup_id,
    )


def _unix_request(seq: int) -> bytes:
    states = sum(1 << state for state in UNIX_STATES)
    show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_UID
    body = _UNIX_REQUEST.pack(socket.AF_UNIX, 0, 0, states, 0, show, 0xFFFFFFFF, 0xFFFFFFFF)
    return _dump_request(body, seq)


def _parse_unix(payload: bytes) -> UnixSocket | None:
    if len(payload) < _UNIX_MESSAGE.size:
        return None
    _, kind, state, _, inode, _, _ = _UNIX_MESSAGE.unpack_from(payload)
    if state not in UNIX_STATES or kind not in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        return None
    path, peer, uid = "", 0, -1
    for attr, value in _attributes(payload, _UNIX_MESSAGE.size):
        if attr == UNIX_DIAG_NAME and value:
            abstract = value[:1] == b"\0"
            name = value[1:] if abstract else value.split(b"\0", 1)[0]
            path = ("@" if abstract else "") + name.decode("utf-8", "replace")
        elif attr == UNIX_DIAG_PEER and len(value) >= 4:
            (peer,) = struct.unpack_from("=I", value)
        elif attr == UNIX_DIAG_UID and len(value) >= 4:
            (uid,) = struct.unpack_from("=I", value)
    return UnixSocket(state=UNIX_STATES[state], inode=inode, path=path, peer=peer, uid=uid)


def _dump(sock: socket.socket, family: int, seq: int) -> Iterator[TcpSocket]:
    yield from _messages(sock, _request(family, seq), _parse)


def _messages(
    sock: socket.socket, request: bytes, parse: Callable[[bytes], T | None]
) -> Iterator[T]:
    sock.send(request)
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
                found = parse(data[offset + _HEADER.size : offset + length])
                if found is not None:
                    count += 1
                    if count > MAX_SOCKETS:
                        return
                    yield found
            offset += (length + 3) & ~3


def _open() -> socket.socket:
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    except OSError as exc:
        raise SockDiagError(
            exc.errno, f"cannot open the socket diagnostics: {exc.strerror}"
        ) from None
    sock.settimeout(5.0)
    return sock


def tcp_sockets() -> list[TcpSocket]:
    """The TCP sockets of this network namespace in the states of :data:`TCP_STATES`."""
    with _open() as sock:
        found = []
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            found += list(_dump(sock, family, seq))
        return found


def unix_sockets() -> list[UnixSocket]:
    """The Unix stream sockets of this network namespace that listen or are connected."""
    with _open() as sock:
        return list(_messages(sock, _unix_request(3), _parse_unix))
