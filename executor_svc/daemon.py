"""opsbot-executor: the socket-activated daemon that takes plans.

Started by opsbot-executor.socket (or with ``--socket PATH`` by hand). It refuses a peer
that is neither root, the diagnose user nor an operator before reading its message;
reads newline-delimited JSON, each message at most 64 KiB and complete within
``MESSAGE_TIMEOUT`` seconds; answers each with one line; sends READY/STATUS to systemd;
and exits after ``--idle-timeout`` seconds without a connection (systemd starts it again
on the next one). A slow or silent client holds only its own thread.
"""

import argparse
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import structlog

from executor_svc.errors import ExecutorError
from executor_svc.peer import Peer, Role, Roles
from executor_svc.service import ExecutorService
from executor_svc.store import PlanStore, utcnow
from shared_io import log as logsetup
from shared_io.activation import activated_socket, bind
from shared_io.config import load_config
from shared_io.errors import OpsbotError
from shared_io.framing import LineReader, MessageTooLarge, send_line
from shared_io.paths import Paths
from shared_io.server import ThreadedServer
from shared_schema import (
    MAX_MESSAGE_BYTES,
    Reject,
    WireError,
    decode_json_object,
    encode_message,
    parse_request,
)
from shared_schema._model import Model

MESSAGE_TIMEOUT = 10.0
SEND_TIMEOUT = 5.0
MAX_CLIENTS = 128

log = structlog.get_logger("opsbot.executor")


class Server(ThreadedServer):
    max_connections = MAX_CLIENTS
    drain_seconds = MESSAGE_TIMEOUT
    ready_status = "waiting for plans"

    def __init__(
        self,
        listener: socket.socket,
        service: ExecutorService,
        roles: Roles,
        idle_timeout: float,
        notify: bool = True,
    ) -> None:
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify)
        self.service = service
        self.roles = roles

    def busy(self) -> bytes:
        return encode_message(Reject(reason="executor busy; try again"))

    def _send(self, conn: socket.socket, reply: Model) -> None:
        send_line(conn, encode_message(reply), SEND_TIMEOUT)

    def handle(self, conn: socket.socket) -> None:
        peer = self.roles.identify(conn)
        if peer.role is Role.NOBODY:
            log.warning(
                "request.refused",
                peer_uid=peer.uid,
                peer_pid=peer.pid,
                reason="not the diagnose user, root or an operator",
            )
            self._send(
                conn,
                Reject(
                    reason=f"permission denied: {peer.user} is neither the diagnose "
                    f"user nor in group {self.roles.operators_group}"
                ),
            )
            return
        self._conversation(conn, peer)

    def _conversation(self, conn: socket.socket, peer: Peer) -> None:
        reader = LineReader(conn, MAX_MESSAGE_BYTES)
        while not self.stopping.is_set():
            try:
                line = reader.readline(MESSAGE_TIMEOUT)
            except MessageTooLarge:
                self._send(conn, Reject(reason=f"message larger than {MAX_MESSAGE_BYTES} bytes"))
                return
            except TimeoutError:
                if reader.buffer:
                    self._send(
                        conn, Reject(reason=f"no complete message within {MESSAGE_TIMEOUT:g}s")
                    )
                return
            if line is None:
                return
            if not line.strip():
                continue
            try:
                request = parse_request(decode_json_object(line))
            except WireError as exc:
                log.info("request.malformed", peer_uid=peer.uid, reason=exc.message)
                self._send(conn, Reject(reason=exc.message))
                continue
            try:
                reply = self.service.handle(request, peer)
            except ExecutorError as exc:
                reply = Reject(reason=exc.message)
            self._send(conn, reply)


def _listener(socket_path: Path | None) -> socket.socket:
    """The listening socket: passed by systemd, or bound at ``socket_path``."""
    activated = activated_socket()
    if activated is not None:
        return activated
    if socket_path is None:
        raise ExecutorError(
            "no socket: start opsbot-executor through opsbot-executor.socket, or pass --socket"
        )
    return bind(socket_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-executor",
        description="Take plans over a Unix socket, validate and store them. Normally "
        "started by opsbot-executor.socket; it applies nothing itself.",
    )
    parser.add_argument("--socket", type=Path, help="bind this path (without socket activation)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help="exit after this many seconds without a connection (0: never)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logsetup.configure("opsbot-executor", verbose=args.verbose)
    paths = Paths.from_env()
    try:
        config = load_config(paths.config)
        store = PlanStore(paths.state_dir)
        store.ensure()
        swept = store.sweep_temp_files()
        if swept:
            log.info("store.swept", temp_files=swept)
        listener = _listener(args.socket)
    except OpsbotError as exc:
        log.error("executor.failed", error=exc.message, hint=exc.hint)
        print(f"opsbot-executor: {exc.message}", file=sys.stderr)
        return exc.exit_status
    policy = config.executor
    service = ExecutorService(store, policy, utcnow, paths.approvals_dir)
    roles = Roles(policy.diagnose_user, policy.operators_group)
    server = Server(listener, service, roles, args.idle_timeout)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve()
    finally:
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
