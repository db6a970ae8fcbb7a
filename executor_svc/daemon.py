"""opsbot-executor: the socket-activated daemon that takes plans.

Started by opsbot-executor.socket (or with ``--socket PATH`` by hand). It refuses a peer
that is neither root, the diagnose user nor an operator before reading its message;
reads newline-delimited JSON, each message at most 64 KiB and complete within
``MESSAGE_TIMEOUT`` seconds; answers each with one line; sends READY/STATUS to systemd;
and exits after ``--idle-timeout`` seconds without a connection (systemd starts it again
on the next one). A slow or silent client holds only its own thread.
"""

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import structlog

from executor_svc import log as logsetup
from executor_svc.config import load_config
from executor_svc.errors import ExecutorError
from executor_svc.paths import Paths
from executor_svc.peer import Peer, Role, Roles
from executor_svc.service import ExecutorService
from executor_svc.store import PlanStore, utcnow
from shared_schema import (
    MAX_MESSAGE_BYTES,
    Reject,
    WireError,
    decode_json_object,
    encode_message,
    parse_request,
)

MESSAGE_TIMEOUT = 10.0
SEND_TIMEOUT = 5.0
MAX_CLIENTS = 128
SD_LISTEN_FDS_START = 3

log = structlog.get_logger("opsbot.executor")


class _TooLong(Exception):
    pass


class LineReader:
    """Reads newline-terminated messages of bounded size, each within a deadline."""

    def __init__(self, conn: socket.socket, limit: int) -> None:
        self.conn = conn
        self.limit = limit
        self.buffer = b""

    def readline(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1 :]
                if len(line) > self.limit:
                    raise _TooLong
                return line
            if len(self.buffer) > self.limit:
                raise _TooLong
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.conn.settimeout(remaining)
            chunk = self.conn.recv(65536)
            if not chunk:
                if self.buffer.strip():
                    line, self.buffer = self.buffer, b""
                    return line  # a last message without its newline still counts
                return None
            self.buffer += chunk


class Server:
    def __init__(
        self,
        listener: socket.socket,
        service: ExecutorService,
        roles: Roles,
        idle_timeout: float,
        notify: bool,
    ) -> None:
        self.listener = listener
        self.service = service
        self.roles = roles
        self.idle_timeout = idle_timeout
        self.notify_enabled = notify
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self.active = 0
        self.served = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def notify(self, *lines: str) -> None:
        if self.notify_enabled:
            from systemd import daemon

            daemon.notify("\n".join(lines))

    def _send(self, conn: socket.socket, message: bytes) -> None:
        conn.settimeout(SEND_TIMEOUT)
        conn.sendall(message)

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
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
                    encode_message(
                        Reject(
                            reason=f"permission denied: {peer.user} is neither the diagnose "
                            f"user nor in group {self.roles.operators_group}"
                        )
                    ),
                )
                return
            self._conversation(conn, peer)
        except (OSError, TimeoutError) as exc:
            log.debug("connection.dropped", error=str(exc))
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self.lock:
                self.active -= 1
                self.served += 1
            self.slots.release()

    def _conversation(self, conn: socket.socket, peer: Peer) -> None:
        reader = LineReader(conn, MAX_MESSAGE_BYTES)
        while not self.stopping.is_set():
            try:
                line = reader.readline(MESSAGE_TIMEOUT)
            except _TooLong:
                self._send(
                    conn,
                    encode_message(Reject(reason=f"message larger than {MAX_MESSAGE_BYTES} bytes")),
                )
                return
            except TimeoutError:
                if reader.buffer:
                    self._send(
                        conn,
                        encode_message(
                            Reject(reason=f"no complete message within {MESSAGE_TIMEOUT:g}s")
                        ),
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
                self._send(conn, encode_message(Reject(reason=exc.message)))
                continue
            try:
                reply = self.service.handle(request, peer)
            except ExecutorError as exc:
                reply = Reject(reason=exc.message)
            self._send(conn, encode_message(reply))

    def serve(self) -> None:
        self.listener.settimeout(0.5)
        last_activity = time.monotonic()
        self.notify("READY=1", "STATUS=waiting for plans")
        log.info("executor.ready", socket=str(self.listener.getsockname()))
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                with self.lock:
                    idle = self.active == 0
                if idle and time.monotonic() - last_activity > self.idle_timeout > 0:
                    log.info("executor.idle_exit", served=self.served)
                    break
                continue
            except OSError as exc:
                if self.stopping.is_set():
                    break
                log.error("accept.failed", error=str(exc))
                time.sleep(0.1)
                continue
            last_activity = time.monotonic()
            if not self.slots.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    conn.settimeout(1.0)
                    conn.sendall(encode_message(Reject(reason="executor busy; try again")))
                conn.close()
                continue
            with self.lock:
                self.active += 1
                served = self.served
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()
            if served % 100 == 0:
                self.notify(f"STATUS=serving; {served} connections so far")
        self.notify("STOPPING=1")
        # Let in-flight conversations finish their current message.
        deadline = time.monotonic() + MESSAGE_TIMEOUT
        while time.monotonic() < deadline:
            with self.lock:
                if self.active == 0:
                    break
            time.sleep(0.05)


def _listener(socket_path: Path | None) -> tuple[socket.socket, bool]:
    """The listening socket: passed by systemd, or bound at ``socket_path``."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        sock = socket.socket(fileno=SD_LISTEN_FDS_START)
        return sock, True
    if socket_path is None:
        raise ExecutorError(
            "no socket: start opsbot-executor through opsbot-executor.socket, or pass --socket"
        )
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(socket_path))
    os.chmod(socket_path, 0o660)
    sock.listen(128)
    return sock, False


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
    logsetup.configure(verbose=args.verbose)
    paths = Paths.from_env()
    try:
        config = load_config(paths.config)
        store = PlanStore(paths.state_dir)
        store.ensure()
        swept = store.sweep_temp_files()
        if swept:
            log.info("store.swept", temp_files=swept)
        listener, activated = _listener(args.socket)
    except ExecutorError as exc:
        log.error("executor.failed", error=exc.message, hint=exc.hint or None)
        print(f"opsbot-executor: {exc.message}", file=sys.stderr)
        return exc.exit_status
    policy = config.executor
    service = ExecutorService(store, policy, utcnow, paths.approvals_dir)
    roles = Roles(policy.diagnose_user, policy.operators_group)
    server = Server(
        listener,
        service,
        roles,
        args.idle_timeout,
        notify=activated or bool(os.environ.get("NOTIFY_SOCKET")),
    )

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
