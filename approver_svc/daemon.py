"""opsbot-approver: the root-side daemon that alone turns a click into an approval.

Started by opsbot-approver.socket (/run/opsbot/approver.sock, group opsbot-relay, 0660),
or with ``--socket PATH`` by hand. Who may ask what is the peer's uid (SO_PEERCRED),
decided before a byte is read: ``announce`` only from the uid of user opsbot-notify,
``view`` and ``decide`` only from the uid of user opsbot-web, ``config`` (which config
file is in force, for ``opsbot check-config``) only from root; anything else, from anyone,
root included (root has ``opsbot approve``), is refused. One request per connection, one
JSON line of at most MAX_APPROVER_MESSAGE_BYTES that must be complete within
``MESSAGE_TIMEOUT`` seconds; one reply line. Requests are served one at a time (they read
and write one state file), so a flood of them waits in line instead of racing; a slow
client holds only its own connection, and at most ``connections_per_uid`` of them. It
exits after ``--idle-timeout`` seconds without a connection (or a plan stored); the
socket starts it again. While it runs it watches the store and puts each plan stored to
the standing rules itself (approver_svc.watch), as root's ``rules`` request would.
"""

from __future__ import annotations

import argparse
import pwd
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType

import structlog
from pydantic import ValidationError

from approver_svc import trigger
from approver_svc.errors import Refusal
from approver_svc.service import ApproverService
from approver_svc.state import STATE_DIR, StateFile
from approver_svc.totp import credentials_dir
from approver_svc.watch import PlansWatch, RulesWatcher, watch_flag
from plans import PlanStore, start_apply, window_apply
from shared_io import log as logsetup
from shared_io.activation import listening_socket
from shared_io.admission import Refusal as Busy, peer_uid
from shared_io.errors import OpsbotError
from shared_io.framing import Clock, LineReader, MessageTooLarge, send_line
from shared_io.live_config import LiveConfig, reload_on_hup
from shared_io.paths import Paths
from shared_io.server import ThreadedServer
from shared_schema._model import Model
from shared_schema.approver_socket import (
    MAX_APPROVER_MESSAGE_BYTES,
    Announce,
    ApplyRules,
    ConfigQuery,
    ConfigShown,
    Decide,
    Follow,
    PolicyReport,
    PolicySwitch,
    RefusalKind,
    Refused,
    View,
    parse_approver_request,
)

NOTIFY_USER = "opsbot-notify"
WEB_USER = "opsbot-web"
MESSAGE_TIMEOUT = 5.0
SEND_TIMEOUT = 5.0

log = structlog.get_logger("opsbot.approver")


def uid_of(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def encode(reply: Model) -> bytes:
    return reply.model_dump_json().encode() + b"\n"


def refused(kind: RefusalKind, reason: str) -> bytes:
    return encode(Refused(kind=kind, reason=" ".join(reason.split())[:2000]))


class Server(ThreadedServer):
    max_connections = 64
    connections_per_uid = 32
    drain_seconds = MESSAGE_TIMEOUT
    ready_status = "waiting for clicks"

    def __init__(
        self,
        listener: socket.socket,
        service: ApproverService,
        *,
        idle_timeout: float,
        notify_user: str = NOTIFY_USER,
        web_user: str = WEB_USER,
        notify: bool = True,
        clock: Clock = time.monotonic,
        live: LiveConfig | None = None,
    ) -> None:
        self.service = service
        #: The config file as it stands: read again before each request when it changed.
        self.live = live
        self.notify_user, self.web_user = notify_user, web_user
        self.notify_uid = uid_of(notify_user)
        self.web_uid = uid_of(web_user)
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify, clock=clock)

    def busy(self, refusal: Busy) -> bytes:
        return refused("request", "approver busy: too many connections; try again")

    def allowed(self, uid: int) -> tuple[type[Model], ...]:
        """The requests ``uid`` may send (none for anyone but the two relays, and root's
        check-config, which may ask only which config is in force)."""
        if self.notify_uid is not None and uid == self.notify_uid:
            return (Announce,)
        if self.web_uid is not None and uid == self.web_uid:
            return (View, Decide, Follow)
        if uid == 0:
            return (ConfigQuery, ApplyRules, PolicyReport, PolicySwitch)
        return ()

    def handle(self, conn: socket.socket) -> None:
        uid = peer_uid(conn)
        allowed = self.allowed(uid)
        if not allowed:
            log.warning("request.refused", peer_uid=uid, reason="not a relay's uid")
            send_line(
                conn,
                refused(
                    "request",
                    f"permission denied: uid {uid} is neither {self.notify_user} nor "
                    f"{self.web_user}",
                ),
                SEND_TIMEOUT,
            )
            return
        reader = LineReader(conn, MAX_APPROVER_MESSAGE_BYTES, clock=self.clock)
        try:
            line = reader.message_by(self.clock() + MESSAGE_TIMEOUT)
        except MessageTooLarge:
            send_line(
                conn,
                refused("request", f"message larger than {MAX_APPROVER_MESSAGE_BYTES} bytes"),
                SEND_TIMEOUT,
            )
            return
        except TimeoutError:
            reader.take_waiting()
            if reader.buffer.strip():
                send_line(
                    conn,
                    refused("request", f"no complete message within {MESSAGE_TIMEOUT:g}s"),
                    SEND_TIMEOUT,
                )
            return
        if line is None:
            return
        send_line(conn, self.answer(uid, allowed, line), SEND_TIMEOUT)

    def answer(self, uid: int, allowed: tuple[type[Model], ...], line: bytes) -> bytes:
        """The reply line to one request line of ``uid``."""
        try:
            request = parse_approver_request(line)
        except ValidationError as exc:
            log.info("request.malformed", peer_uid=uid, errors=exc.error_count())
            return refused("request", f"malformed request ({exc.error_count()} errors)")
        if not isinstance(request, allowed):
            log.warning("request.refused", peer_uid=uid, op=request.op, reason="not its op")
            return refused("request", f"uid {uid} may not {request.op}")
        bind = structlog.contextvars.bound_contextvars
        with self.service.lock, bind(op=request.op, peer_uid=uid):
            if self.live is not None:  # one whole config for the whole request
                self.service.config = self.live.current()
            if isinstance(request, View | Decide) and request.config_digest:
                self.service.web_config = (request.config_digest, self.service.now())
            try:
                if isinstance(request, ConfigQuery):
                    return encode(self.config_shown())
                if isinstance(request, Announce):
                    return encode(self.service.announce(request))
                if isinstance(request, View):
                    return encode(self.service.view(request))
                if isinstance(request, Follow):
                    return encode(self.service.follow(request))
                if isinstance(request, ApplyRules):
                    return encode(self.service.apply_rules(request))
                if isinstance(request, PolicyReport):
                    return encode(self.service.policy_report(request))
                if isinstance(request, PolicySwitch):
                    return encode(self.service.policy_switch(request))
                return encode(self.service.decide(request))
            except Refusal as exc:
                source = getattr(request, "source", None)
                log.info("request.refused", kind=exc.kind, reason=exc.message, source=source)
                said = exc.message if not exc.hint else f"{exc.message} ({exc.hint})"
                return refused(exc.kind, said)
            except OpsbotError as exc:
                log.error("request.failed", error=exc.message, hint=exc.hint)
                return refused("internal", f"the approver failed: {exc.message}")
            except Exception:
                log.exception("request.crashed")
                return refused("internal", "the approver failed; its journal says why")

    def rules_seen(self) -> int:
        """The rules asked about the plans that wait, as a ``rules`` request from root
        would (approver_svc.watch: a plan stored while this daemon runs); how many plans
        they decided, each journaled as opsbot-rules.service journals them."""
        bind = structlog.contextvars.bound_contextvars
        with self.service.lock, bind(op="rules", via="watch"):
            if self.live is not None:
                self.service.config = self.live.current()
            reply = self.service.apply_rules(ApplyRules())
        for decision in reply.decided:
            log.info(
                "rules.decided",
                plan_id=decision.plan_id,
                outcome=decision.outcome,
                rule=decision.rule or None,
                units=" ".join(decision.units),
            )
        return len(reply.decided)

    def config_shown(self) -> ConfigShown:
        if self.live is None:
            raise Refusal("request", "this approver was started without a config file")
        state = self.live.state()
        web, seen = self.service.web_config or (None, None)
        return ConfigShown(**state.model_dump(), web_digest=web, web_seen_at=seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-approver",
        description="Turn a click on the approval page into root's approval, after checking "
        "its one-time token and the approver's TOTP code. Normally started by "
        "opsbot-approver.socket.",
    )
    parser.add_argument("--socket", type=Path, help="bind this path (without socket activation)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=STATE_DIR,
        help=f"where tokens and used codes are kept (default {STATE_DIR}, mode 0700)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help="exit after this many seconds without a connection (0: never)",
    )
    parser.add_argument(
        "--apply-rules",
        action="store_true",
        help="do not serve: ask the running approver to put each plan that waits to the "
        "standing rules ([[approve.rule]]), and log what they decided (opsbot-rules.service, "
        "started by a plan stored)",
    )
    parser.add_argument(
        "--no-watch-plans",
        dest="watch_plans",
        action="store_false",
        help="do not watch the store for plans to put to the standing rules while serving "
        "(opsbot-rules.path's opsbot-rules.service then asks for each)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.apply_rules:
        return trigger.apply_rules(args.socket, verbose=args.verbose)
    logsetup.configure("opsbot-approver", verbose=args.verbose)
    paths = Paths.from_env()
    try:
        live = LiveConfig(paths.config)
        listener = listening_socket(args.socket, "opsbot-approver")
    except OpsbotError as exc:
        # A bad config refuses every click: exiting is right here (nothing waits on us
        # but the page, which says the approver is away), and the journal says why.
        log.error("approver.failed", error=exc.message, hint=exc.hint)
        print(f"opsbot-approver: {exc.message}", file=sys.stderr)
        return exc.exit_status

    service = ApproverService(
        config=live.config,
        store=PlanStore(paths.state_dir),
        approvals_dir=paths.approvals_dir,
        state=StateFile(args.state_dir),
        credentials=credentials_dir(),
        start_apply=lambda busy: start_apply(paths, busy),
        window_apply=lambda window, now: window_apply(paths, window, now),
    )
    server = Server(listener, service, idle_timeout=args.idle_timeout, live=live)
    reload_on_hup(live)
    watcher = watch_plans(server, paths.state_dir / "plans") if args.watch_plans else None

    def stop(signum: int, frame: FrameType | None) -> None:
        server.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve()
    finally:
        if watcher is not None:
            watcher.stop()
        listener.close()
    return 0


def watch_plans(server: Server, plans_dir: Path) -> RulesWatcher | None:
    """Watch the store for plans while serving (approver_svc.watch); None, logged, where
    the store cannot be watched (opsbot-rules.path's doorbell then rings as before)."""
    try:
        watch = PlansWatch(plans_dir)
    except OSError as exc:
        log.warning("rules.unwatched", error=str(exc), hint="opsbot-rules.path still asks")
        return None
    watcher = RulesWatcher(watch, server.rules_seen, seen=server.touch, flag=watch_flag())
    try:
        watcher.start()
    except OSError as exc:  # the flag cannot be written: the doorbell keeps ringing
        log.warning("rules.flag_unwritten", error=str(exc))
        watcher.flag = None
        watcher.start()
    return watcher


if __name__ == "__main__":
    sys.exit(main())
