"""opsbot-executor: the socket-activated daemon that takes plans.

Started by opsbot-executor.socket (or with ``--socket PATH`` by hand). Before it reads a
byte it admits the peer by uid (shared_io.admission): at most ``MAX_CLIENTS``
connections at once, at most ``[executor] connections_per_uid`` of one operator, and
``DIAGNOSE_RESERVE`` of them that only the diagnose user and root may use, so operators
together cannot take the diagnosis service's room. It refuses a peer that is neither
root, the diagnose user nor an operator before reading its message; reads
newline-delimited JSON, each message at most 64 KiB and complete within
``MESSAGE_TIMEOUT`` seconds of the previous reply (blank lines do not move that
deadline); closes an operator's connection ``[executor] connection_lifetime_seconds``
after it opened; answers each message with one line; sends READY/STATUS to systemd; and
exits after ``--idle-timeout`` seconds without a connection (systemd starts it again on
the next one). A slow or silent client holds only its own thread. If opsbot.toml does
not load, it serves :class:`ConfigBroken` instead: every message is answered with the
error, and no plan is taken.
"""

import argparse
import math
import pwd
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType

import structlog

from executor_svc.peer import Peer, Role, Roles, user_name
from executor_svc.service import ExecutorService
from plans import PlanStore, utcnow
from shared_io import log as logsetup
from shared_io.activation import listening_socket
from shared_io.admission import Refusal
from shared_io.config import load_config
from shared_io.errors import ConfigError, OpsbotError
from shared_io.framing import Clock, Deadlines, LineReader, MessageTooLarge, send_line
from shared_io.live_config import LiveConfig, reload_on_hup
from shared_io.paths import Paths
from shared_io.server import ThreadedServer
from shared_schema import (
    MAX_MESSAGE_BYTES,
    ExecutorPolicy,
    Reject,
    WireError,
    decode_json_object,
    encode_message,
    parse_request,
)
from shared_schema._model import Model

__all__ = ["Server"]

MESSAGE_TIMEOUT = 10.0
SEND_TIMEOUT = 5.0
MAX_CLIENTS = 128
#: Of MAX_CLIENTS, the connections only the diagnose user and root may hold.
DIAGNOSE_RESERVE = 32
#: Every "busy" refusal starts so (the diagnosis service's submitter retries on it).
BUSY = "executor busy"

log = structlog.get_logger("opsbot.executor")


def _uid_of(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


class Server(ThreadedServer):
    max_connections = MAX_CLIENTS
    reserved_connections = DIAGNOSE_RESERVE
    drain_seconds = MESSAGE_TIMEOUT
    ready_status = "waiting for plans"

    def __init__(
        self,
        listener: socket.socket,
        service: ExecutorService,
        roles: Roles,
        idle_timeout: float,
        notify: bool = True,
        clock: Clock = time.monotonic,
    ) -> None:
        self.connections_per_uid = service.policy.connections_per_uid
        self.lifetime = service.policy.connection_lifetime_seconds
        self.service = service
        self.roles = roles
        self.diagnose_uid = _uid_of(roles.diagnose_user)
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify, clock=clock)

    def privileged(self, uid: int) -> bool:
        """The diagnose user, whose submissions the reserve is for, and root, who may do
        anything here anyway (stop the executor, say): neither has a cap of its own."""
        return uid == 0 or (self.diagnose_uid is not None and uid == self.diagnose_uid)

    def busy(self, refusal: Refusal) -> bytes:
        if refusal.limit == "per_uid":
            reason = (
                f"{BUSY}: {user_name(refusal.uid)} already holds {refusal.allowed} "
                "connections, the most one user may ([executor] connections_per_uid); "
                "close some and try again"
            )
        elif refusal.limit == "shared":
            reason = (
                f"{BUSY}: operators hold all {refusal.allowed} connections they may share "
                f"(the other {DIAGNOSE_RESERVE} are kept for the diagnosis service); "
                "try again soon"
            )
        else:
            reason = f"{BUSY}; try again"
        return encode_message(Reject(reason=reason))

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

    def _lifetime_over(self, peer: Peer) -> Reject:
        log.info("connection.lifetime_over", peer_uid=peer.uid, peer_pid=peer.pid)
        return Reject(
            reason=f"connection open longer than {self.lifetime:g}s, the most an operator's "
            "may stay ([executor] connection_lifetime_seconds); reconnect"
        )

    def _conversation(self, conn: socket.socket, peer: Peer) -> None:
        reader = LineReader(conn, MAX_MESSAGE_BYTES, clock=self.clock)
        # An operator's connection ends after its lifetime, so replies cannot keep it;
        # the diagnose user's and root's connect once per request anyway (no cap of
        # their own either: see privileged).
        lifetime = math.inf if self.privileged(peer.uid) else self.lifetime
        deadlines = Deadlines(MESSAGE_TIMEOUT, lifetime, clock=self.clock)
        while not self.stopping.is_set():
            try:
                line = reader.message_by(deadlines.next_message_by())
            except MessageTooLarge:
                self._send(conn, Reject(reason=f"message larger than {MAX_MESSAGE_BYTES} bytes"))
                return
            except TimeoutError:
                # Silence or blank lines just end; a message begun is told which deadline.
                reader.take_waiting()
                if deadlines.lifetime_over():
                    late = self._lifetime_over(peer)
                else:
                    late = Reject(reason=f"no complete message within {MESSAGE_TIMEOUT:g}s")
                if reader.buffer.strip():
                    self._send(conn, late)
                return
            if line is None:
                return
            if deadlines.lifetime_over():
                self._send(conn, self._lifetime_over(peer))
                return
            try:
                request = parse_request(decode_json_object(line))
            except WireError as exc:
                log.info("request.malformed", peer_uid=peer.uid, reason=exc.message)
                deadlines.replied()
                self._send(conn, Reject(reason=exc.message))
                continue
            try:
                reply = self.service.handle(request, peer)
            except OpsbotError as exc:
                reply = Reject(reason=exc.message)
            # The next message's deadline runs from this reply (marked before it is
            # sent: a client that has read it finds the deadline already moved).
            deadlines.replied()
            self._send(conn, reply)


class ConfigBroken(ThreadedServer):
    """The executor while opsbot.toml does not load: the socket stays up and every
    message gets ``Reject`` with the ConfigError (file, line, key). A daemon that exited
    at start instead would be started again by the socket until systemd gave up
    (start-limit-hit) and closed it. There is no store and no policy here: no plan can be
    taken. The socket's mode (group opsbot-operators) decides who connects; the message
    holds no value from the file. Once the file loads, the next connection is told to
    try again and the daemon exits: the socket starts one that reads it."""

    max_connections = MAX_CLIENTS
    connections_per_uid = ExecutorPolicy().connections_per_uid
    drain_seconds = MESSAGE_TIMEOUT

    def __init__(
        self,
        listener: socket.socket,
        error: ConfigError,
        config: Path,
        idle_timeout: float,
        notify: bool = True,
    ) -> None:
        self.error = error
        self.config = config
        self.ready_status = "not taking plans: " + " ".join(error.message.split())
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify)

    def privileged(self, uid: int) -> bool:
        return uid == 0

    def busy(self, refusal: Refusal) -> bytes:
        return encode_message(Reject(reason=f"{BUSY}; try again"))

    def _reject(self) -> bytes:
        try:
            load_config(self.config)
        except ConfigError as exc:
            return encode_message(Reject(reason=f"invalid configuration: {exc.message}"))
        self.stopping.set()
        return encode_message(
            Reject(reason=f"{self.config} was fixed since the executor started; try again")
        )

    def handle(self, conn: socket.socket) -> None:
        reader = LineReader(conn, MAX_MESSAGE_BYTES, clock=self.clock)
        deadline = self.clock() + MESSAGE_TIMEOUT
        while not self.stopping.is_set():
            try:
                line = reader.message_by(deadline)
            except (MessageTooLarge, TimeoutError):
                if reader.buffer.strip():  # a message begun (or too large) is answered too
                    send_line(conn, self._reject(), SEND_TIMEOUT)
                return
            if line is None:
                return
            send_line(conn, self._reject(), SEND_TIMEOUT)
            deadline = self.clock() + MESSAGE_TIMEOUT


#: What the executor reads only at start (who is who, its connection cap): a restart
#: takes an edit of them.
START_ONLY = (
    "executor.diagnose_user",
    "executor.operators_group",
    "executor.connections_per_uid",
)


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
        live = LiveConfig(paths.config)
    except ConfigError as exc:
        return _serve_config_broken(exc, paths.config, args.socket, args.idle_timeout)
    try:
        store = PlanStore(paths.state_dir)
        store.ensure()
        swept = store.sweep_temp_files()
        if swept:
            log.info("store.swept", temp_files=swept)
        listener = listening_socket(args.socket, "opsbot-executor")
    except OpsbotError as exc:
        log.error("executor.failed", error=exc.message, hint=exc.hint)
        print(f"opsbot-executor: {exc.message}", file=sys.stderr)
        return exc.exit_status
    # The allowlist and the budgets as the file stands before each request; who is
    # who (the diagnose user, the operators' group) as it was read at start.
    policy = live.config.executor
    service = ExecutorService(
        store,
        policy,
        utcnow,
        paths.approvals_dir,
        policies=lambda: live.current().executor,
        config_state=lambda: live.state(START_ONLY),
    )
    roles = Roles(policy.diagnose_user, policy.operators_group)
    return _serve(Server(listener, service, roles, args.idle_timeout), live)


def _serve_config_broken(
    error: ConfigError, config: Path, socket_path: Path | None, idle_timeout: float
) -> int:
    """Serve ConfigBroken until idle, stopped, or the config is fixed."""
    log.error("config.invalid", error=error.message, hint=error.hint)
    try:
        listener = listening_socket(socket_path, "opsbot-executor")
    except OpsbotError as exc:
        log.error("executor.failed", error=exc.message, hint=exc.hint)
        print(f"opsbot-executor: {exc.message}", file=sys.stderr)
        return exc.exit_status
    return _serve(ConfigBroken(listener, error, config, idle_timeout))


def _serve(server: ThreadedServer, live: LiveConfig | None = None) -> int:
    def stop(signum: int, frame: FrameType | None) -> None:
        server.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if live is not None:
        reload_on_hup(live)
    try:
        server.serve()
    finally:
        server.listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
