"""read_connections from what a host's kernel answers: sockets with their cgroup ids, the
cgroup tree, the socket units' Listen= (the mapping, pure; the netlink dump itself is
read on a booted systemd in tests/integration/test_diagnose_connections.py, and on this
machine below)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from diagnose_svc.tools._cgroups import cgroup_root, cgroup_units
from diagnose_svc.tools._host_units import SocketRow
from diagnose_svc.tools._sockdiag import TcpSocket, UnixSocket, tcp_sockets, unix_sockets
from diagnose_svc.tools.read_connections import build, build_unix

WEB, API, DB, INIT = 11, 12, 13, 1
UNITS = {WEB: "edge.service", API: "api.service", DB: "store.service", INIT: "init.scope"}


def sock(state: str, local: tuple[str, int], remote: tuple[str, int], cgroup: int) -> TcpSocket:
    return TcpSocket(state, local[0], local[1], remote[0], remote[1], 1000, cgroup)


def test_both_ends_of_a_loopback_connection_are_named_and_the_server_end_is_not_an_edge() -> None:
    """api listens on 127.0.0.1:7001, edge is connected to it (two sockets in the dump:
    edge's and api's accepted one, which carries api's cgroup): one edge, edge -> api."""
    sockets = [
        sock("listen", ("127.0.0.1", 7001), ("0.0.0.0", 0), API),
        sock("established", ("127.0.0.1", 40001), ("127.0.0.1", 7001), WEB),
        sock("established", ("127.0.0.1", 7001), ("127.0.0.1", 40001), API),
    ]
    listeners, edges, unmapped = build(sockets, UNITS, [])
    assert [(e.port, e.unit) for e in listeners] == [(7001, "api.service")]
    assert [(e.client, e.server, e.port, e.states) for e in edges] == [
        ("edge.service", "api.service", 7001, {"established": 1})
    ]
    assert unmapped == 0


def test_a_wildcard_listener_and_a_backend_that_does_not_answer_yet() -> None:
    """store listens on every address; api connects through 127.0.0.1 (established) and
    keeps trying another port nobody listens on (syn-sent): the first is api -> store, the
    second an edge to no unit of this host."""
    sockets = [
        sock("listen", ("::", 5544), ("::", 0), DB),
        sock("established", ("127.0.0.1", 40002), ("127.0.0.1", 5544), API),
        sock("established", ("127.0.0.1", 40003), ("127.0.0.1", 5544), API),
        sock("syn-sent", ("127.0.0.1", 40004), ("10.0.0.9", 6380), API),
    ]
    _, edges, _ = build(sockets, UNITS, [])
    assert [(e.client, e.server, e.address, e.port, e.states) for e in edges] == [
        ("api.service", None, "10.0.0.9", 6380, {"syn-sent": 1}),
        ("api.service", "store.service", "127.0.0.1", 5544, {"established": 2}),
    ]


def test_a_listener_pid_1_holds_is_named_as_the_service_its_socket_unit_activates() -> None:
    """A socket-activated queue: PID 1's listener (init.scope) on 127.0.0.1:7100 is
    queue.service through queue.socket's Listen=; a path Listen= is no TCP port."""
    rows = [
        SocketRow(listen="127.0.0.1:7100", unit="queue.socket", activates="queue.service"),
        SocketRow(listen="/run/queue.sock", unit="queue.socket", activates="queue.service"),
    ]
    sockets = [
        sock("listen", ("127.0.0.1", 7100), ("0.0.0.0", 0), INIT),
        sock("established", ("127.0.0.1", 40005), ("127.0.0.1", 7100), WEB),
    ]
    listeners, edges, _ = build(sockets, UNITS, rows)
    assert [(e.unit, e.socket_unit) for e in listeners] == [("queue.service", "queue.socket")]
    assert [(e.client, e.server) for e in edges] == [("edge.service", "queue.service")]


def test_opsbot_s_own_probe_is_no_edge() -> None:
    """opsbot-diagnose probing api's health is a connection of a unit opsbot never acts
    on: no edge (it would be every health target's), while api still listens."""
    units = {**UNITS, 77: "opsbot-diagnose.service"}
    sockets = [
        sock("listen", ("127.0.0.1", 7001), ("0.0.0.0", 0), API),
        sock("established", ("127.0.0.1", 40009), ("127.0.0.1", 7001), 77),
    ]
    listeners, edges, _ = build(sockets, units, [])
    assert edges == [] and [e.unit for e in listeners] == ["api.service"]


def test_a_socket_of_no_unit_is_counted_not_guessed() -> None:
    """A process outside any unit (cgroup id unknown) connecting: no edge, counted."""
    sockets = [
        sock("listen", ("127.0.0.1", 7001), ("0.0.0.0", 0), API),
        sock("established", ("127.0.0.1", 40006), ("127.0.0.1", 7001), 999),
    ]
    _, edges, unmapped = build(sockets, UNITS, [])
    assert edges == []
    assert unmapped == 1


def test_the_cgroup2_mount_is_found_on_unified_and_hybrid_hosts() -> None:
    """/sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one."""
    unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    hybrid = (
        "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    assert cgroup_root(unified) == Path("/sys/fs/cgroup")
    assert cgroup_root(hybrid) == Path("/sys/fs/cgroup/unified")
    assert cgroup_root("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n") is None


def test_a_cgroup_directory_is_named_by_the_deepest_unit_in_its_path(tmp_path: Path) -> None:
    """system.slice/app.service/worker belongs to app.service; a slice is no unit."""
    worker = tmp_path / "system.slice" / "app.service" / "worker"
    worker.mkdir(parents=True)
    units = cgroup_units(tmp_path)
    assert units[os.stat(worker).st_ino] == "app.service"
    assert units[os.stat(worker.parent).st_ino] == "app.service"
    assert os.stat(tmp_path / "system.slice").st_ino not in units


def test_this_machines_kernel_answers_a_dump_with_our_own_connection() -> None:
    """The netlink dump on this machine: a connection this test makes is in it, both
    ends, with the cgroup id the kernel gives this process."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                found = tcp_sockets()
                mine = [s for s in found if port in (s.local_port, s.remote_port)]
                client_port = client.getsockname()[1]
    states = sorted((s.state, s.local_port) for s in mine)
    assert states == sorted([("listen", port), ("established", port), ("established", client_port)])
    assert len({s.cgroup_id for s in mine}) == 1


def unix(state: str, inode: int, path: str = "", peer: int = 0, uid: int = 0) -> UnixSocket:
    return UnixSocket(state=state, inode=inode, path=path, peer=peer, uid=uid)


#: The running services by uid: two services share uid 0 (root), api and the store run as
#: their own users, a worker's DynamicUser= uid is its alone.
UIDS = {0: ["edge.service", "cron.service"], 61001: ["api.service"], 998: ["store.service"]}


def test_a_unix_socket_connection_names_its_listener_by_path_and_its_client_by_uid() -> None:
    """store listens on /run/store/store.sock (a socket it made as uid 998); api (uid
    61001, a DynamicUser= one) is connected to it twice: one edge api -> store at the
    path. A client of root's uid, which several services share, is counted, not named."""
    sockets = [
        unix("listen", 100, "/run/store/store.sock", uid=998),
        unix("established", 101, peer=102, uid=61001),
        unix("established", 102, "/run/store/store.sock", peer=101, uid=998),
        unix("established", 103, peer=104, uid=61001),
        unix("established", 104, "/run/store/store.sock", peer=103, uid=998),
        unix("established", 105, peer=106, uid=0),
        unix("established", 106, "/run/store/store.sock", peer=105, uid=998),
    ]
    listeners, edges, unmapped = build_unix(sockets, UIDS, [])
    assert [(e.where, e.unit) for e in listeners] == [("/run/store/store.sock", "store.service")]
    assert [(e.client, e.server, e.where, e.states) for e in edges] == [
        ("api.service", "store.service", "/run/store/store.sock", {"established": 2})
    ]
    assert unmapped == 1


def test_a_unix_listener_pid_1_holds_is_the_service_its_socket_unit_activates() -> None:
    """PID 1 made /run/queue.sock for queue.socket (as root: no uid says whose it is):
    its Listen= names queue.service; a listener no unit is known for is left out."""
    rows = [SocketRow(listen="/run/queue.sock", unit="queue.socket", activates="queue.service")]
    sockets = [
        unix("listen", 200, "/run/queue.sock", uid=0),
        unix("listen", 201, "/run/somebody.sock", uid=0),
        unix("established", 202, peer=203, uid=998),
        unix("established", 203, "/run/queue.sock", peer=202, uid=0),
    ]
    listeners, edges, _ = build_unix(sockets, UIDS, rows)
    assert [(e.where, e.unit, e.socket_unit) for e in listeners] == [
        ("/run/queue.sock", "queue.service", "queue.socket")
    ]
    assert [(e.client, e.server) for e in edges] == [("store.service", "queue.service")]


def test_this_machines_kernel_answers_a_unix_dump_with_our_own_connection(tmp_path: Path) -> None:
    """The AF_UNIX dump on this machine: the listener and the accepted end bear the path,
    the client's peer is the accepted end, and each says this process's uid."""
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            accepted, _ = server.accept()
            with accepted:
                found = {s.inode: s for s in unix_sockets()}
                inodes = [os.fstat(x.fileno()).st_ino for x in (server, client, accepted)]
    listener, mine, theirs = (found[i] for i in inodes)
    assert (listener.state, listener.path) == ("listen", path)
    assert (mine.path, mine.peer) == ("", theirs.inode)
    assert (theirs.path, theirs.peer) == (path, mine.inode)
    assert {listener.uid, mine.uid, theirs.uid} == {os.getuid()}
