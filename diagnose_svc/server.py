"""``opsbot-diagnose serve``: diagnoses on request, over /run/opsbot/diagnose.sock.

Socket-activated (opsbot-diagnose.socket, group opsbot-operators, mode 0660). Each
connection sends one ``DiagnoseRequest`` line (at most 64 KiB, complete within
``REQUEST_TIMEOUT`` seconds of connecting however slowly it trickles) and gets, live, one
JSON line per step event, then the verdict.

Reading a request costs a thread, not a run: up to ``MAX_CONNECTIONS`` connections at
once, at most ``CONNECTIONS_PER_UID`` of one user (slow readers count against their own
user). A request read is then a diagnosis only within the quota (diagnose_svc.quota): at
most ``MAX_RUNS`` at once on the host, ``[diagnose] runs_per_uid`` at once and
``[diagnose] runs_per_minute_per_uid`` a minute for one user (root: only ``MAX_RUNS``).
A request refused gets one ``diagnose.error`` naming the limit and its key. The service
pings the systemd watchdog while it waits, and exits after ``idle_timeout`` seconds
without a connection (the socket starts it again).

A request from the service's own user is a unit's failure (opsbot-onfailure@, which runs
as that user in the same sandbox and asks here rather than load the diagnosis itself:
diagnose_svc.onfailure): ``diagnose_failed`` answers it, as ``opsbot-diagnose run``
would, and that uid has no cap of its own (it counts towards ``MAX_RUNS``). Whoever runs
as that user may run ``opsbot-diagnose run`` anyway: nothing is reached that was not.
"""

from __future__ import annotations

import os
import pwd
import socket
import time
from collections.abc import Callable

import structlog
from pydantic import ValidationError

from diagnose_svc.quota import RunQuota
from diagnose_svc.record import ASKED_BY
from shared_io.admission import Refusal, peer_uid
from shared_io.errors import OpsbotError
from shared_io.exit_codes import CONFIG, REFUSED
from shared_io.framing import Clock, LineReader, MessageTooLarge, send_line
from shared_io.server import ThreadedServer
from shared_schema import (
    MAX_MESSAGE_BYTES,
    DiagnoseSettings,
    WireError,
    decode_json_object,
    encode_message,
)
from shared_schema._model import Model
from shared_schema.config_state import ConfigState
from shared_schema.diagnose_socket import (
    ConfigMessage,
    ConfigQuery,
    DiagnoseRequest,
    ErrorMessage,
    Event,
    VerdictMessage,
)
from shared_schema.errors import field_errors
from shared_schema.messages import check_version
from shared_schema.verdict import NoteVerdict, PlanVerdict

REQUEST_TIMEOUT = 10.0
SEND_TIMEOUT = 10.0
#: Diagnoses running at once on the host.
MAX_RUNS = 4
#: Connections at once: room to read requests from slow clients without starving runs.
MAX_CONNECTIONS = 64
#: Connections of one user at once (reading its request or running).
CONNECTIONS_PER_UID = 8

log = structlog.get_logger("opsbot.diagnose.server")

#: (unit, symptom, on_event) -> verdict; the daemon binds policy, tools and settings.
Diagnose = Callable[[str, str, Callable[[Event], None]], PlanVerdict | NoteVerdict]


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def read_request(
    conn: socket.socket, clock: Clock = time.monotonic
) -> DiagnoseRequest | ConfigQuery:
    """The one request of a connection, complete within ``REQUEST_TIMEOUT`` of now;
    WireError saying what is wrong with it."""
    reader = LineReader(conn, MAX_MESSAGE_BYTES, clock=clock)
    try:
        line = reader.readline_by(clock() + REQUEST_TIMEOUT)
    except MessageTooLarge as exc:
        raise WireError(f"request larger than {MAX_MESSAGE_BYTES} bytes") from exc
    except TimeoutError as exc:
        raise WireError(f"no complete request within {REQUEST_TIMEOUT:g}s") from exc
    if line is None:
        raise WireError("the connection closed before a request")
    try:
        obj = decode_json_object(line)
        check_version(obj, 1, "this diagnosis service")
        if obj.get("op") == "config":
            return ConfigQuery.model_validate(obj)
        return DiagnoseRequest.model_validate(obj)
    except ValidationError as exc:
        errors = "; ".join(str(e) for e in field_errors(exc))
        raise WireError(f"bad request: {errors}") from exc


class DiagnoseServer(ThreadedServer):
    max_connections = MAX_CONNECTIONS
    connections_per_uid = CONNECTIONS_PER_UID
    drain_seconds = 60.0
    ready_status = "waiting for diagnosis requests"

    def __init__(
        self,
        listener: socket.socket,
        diagnose: Diagnose,
        idle_timeout: float,
        notify: Callable[[str], None] | bool = True,
        *,
        settings: DiagnoseSettings | None = None,
        clock: Clock = time.monotonic,
        config_state: Callable[[], ConfigState] | None = None,
        diagnose_failed: Diagnose | None = None,
        own_uid: int | None = None,
    ) -> None:
        #: The service's own user: its requests are units' failures (when
        #: ``diagnose_failed`` is given).
        self.own_uid = os.getuid() if own_uid is None else own_uid
        self.diagnose_failed = diagnose_failed
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify, clock=clock)
        self.diagnose = diagnose
        self.config_state = config_state
        limits = settings or DiagnoseSettings()
        self.quota = RunQuota(
            max_runs=MAX_RUNS,
            per_uid=limits.runs_per_uid,
            per_minute=limits.runs_per_minute_per_uid,
            clock=clock,
            exempt=self.privileged,
        )

    def privileged(self, uid: int) -> bool:
        """Root (it sets the caps), and a unit's failure: no cap of its own; their runs
        count towards MAX_RUNS."""
        return uid == 0 or self.failure_of(uid)

    def failure_of(self, uid: int) -> bool:
        """Whether ``uid``'s request is a unit's failure (opsbot-onfailure@ asking)."""
        return self.diagnose_failed is not None and uid == self.own_uid

    def busy(self, refusal: Refusal) -> bytes:
        if refusal.limit == "per_uid":
            message = (
                f"{_user_name(refusal.uid)} already has {refusal.allowed} connections open to "
                "the diagnosis service, the most one user may; close some and try again"
            )
        else:
            message = (
                f"the diagnosis service holds {refusal.allowed} connections, the most it "
                "takes at once; try again soon"
            )
        return encode_message(ErrorMessage(message=message))

    def _send(self, conn: socket.socket, message: Model) -> None:
        send_line(conn, encode_message(message), SEND_TIMEOUT)

    def handle(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            try:
                request = read_request(conn, self.clock)
            except WireError as exc:
                self._send(conn, ErrorMessage(message=exc.message))
                return
            if isinstance(request, ConfigQuery):
                self._config(conn)
                return
            refusal = self.quota.start(uid, _user_name(uid))
            if refusal is not None:
                log.warning(
                    "diagnose.refused", unit=request.unit, peer_uid=uid, limit=refusal.limit
                )
                self._send(conn, ErrorMessage(message=refusal.message))
                return
            try:
                self._run(conn, uid, request)
            finally:
                self.quota.finish(uid)
        except OpsbotError as exc:  # refused for the operator's reason (e.g. out of scope)
            log.warning("diagnose.refused", reason=exc.message)
            try:
                # Only what the console's table means: out of scope (5), a bad config (78).
                status = exc.exit_status if exc.exit_status in (REFUSED, CONFIG) else 1
                error = ErrorMessage(message=exc.message, hint=exc.hint or "", exit_status=status)
                self._send(conn, error)
            except OSError:
                pass
        except Exception as exc:  # one bad run must not take the service down
            log.exception("diagnose.crashed", error=str(exc))
            try:
                self._send(conn, ErrorMessage(message=f"diagnosis failed: {exc}"))
            except OSError:
                pass

    def _config(self, conn: socket.socket) -> None:
        if self.config_state is None:
            self._send(conn, ErrorMessage(message="this service does not know its config file"))
        else:
            self._send(conn, ConfigMessage(**self.config_state().model_dump()))

    def _run(self, conn: socket.socket, uid: int, request: DiagnoseRequest) -> None:
        client_gone = False

        def stream(event: Event) -> None:
            nonlocal client_gone
            if client_gone:
                return
            try:
                self._send(conn, event)
            except OSError:
                client_gone = True  # the diagnosis goes on; its plan still matters

        failed = self.failure_of(uid)
        log.info("diagnose.requested", unit=request.unit, peer_uid=uid, failed=failed or None)
        diagnose = self.diagnose_failed if failed and self.diagnose_failed else self.diagnose
        # Who asked, for the diagnosis's record (diagnose_svc/record.py).
        ASKED_BY.set("unit failure (opsbot-onfailure@)" if failed else _user_name(uid))
        verdict = diagnose(request.unit, request.symptom, stream)
        if not client_gone:
            self._send(conn, VerdictMessage(verdict=verdict))
