"""``opsbot-diagnose serve``: diagnoses on request, over /run/opsbot/diagnose.sock.

Socket-activated (opsbot-diagnose.socket, group opsbot-operators, mode 0660). Each
connection sends one ``DiagnoseRequest`` line (at most 64 KiB, within
``REQUEST_TIMEOUT`` seconds) and gets, live, one JSON line per step event, then the
verdict. At most ``MAX_RUNS`` diagnoses run at once; the service pings the systemd
watchdog while it waits, and exits after ``idle_timeout`` seconds without a connection
(the socket starts it again).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import structlog
from pydantic import ValidationError

from shared_io.framing import LineReader, MessageTooLarge, send_line
from shared_io.server import ThreadedServer
from shared_schema import MAX_MESSAGE_BYTES, WireError, decode_json_object, encode_message
from shared_schema._model import Model
from shared_schema.diagnose_socket import DiagnoseRequest, ErrorMessage, Event, VerdictMessage
from shared_schema.errors import field_errors
from shared_schema.messages import check_version
from shared_schema.verdict import NoteVerdict, PlanVerdict

REQUEST_TIMEOUT = 10.0
SEND_TIMEOUT = 10.0
MAX_RUNS = 4

log = structlog.get_logger("opsbot.diagnose.server")

#: (unit, symptom, on_event) -> verdict; the daemon binds policy, tools and settings.
Diagnose = Callable[[str, str, Callable[[Event], None]], PlanVerdict | NoteVerdict]


def _peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def read_request(conn: socket.socket) -> DiagnoseRequest:
    """The one request of a connection; WireError saying what is wrong with it."""
    reader = LineReader(conn, MAX_MESSAGE_BYTES)
    try:
        line = reader.readline(REQUEST_TIMEOUT)
    except MessageTooLarge as exc:
        raise WireError(f"request larger than {MAX_MESSAGE_BYTES} bytes") from exc
    except TimeoutError as exc:
        raise WireError(f"no complete request within {REQUEST_TIMEOUT:g}s") from exc
    if line is None:
        raise WireError("the connection closed before a request")
    try:
        obj = decode_json_object(line)
        check_version(obj, 1, "this diagnosis service")
        return DiagnoseRequest.model_validate(obj)
    except ValidationError as exc:
        errors = "; ".join(str(e) for e in field_errors(exc))
        raise WireError(f"bad request: {errors}") from exc


class DiagnoseServer(ThreadedServer):
    max_connections = MAX_RUNS
    drain_seconds = 60.0
    ready_status = "waiting for diagnosis requests"

    def __init__(
        self,
        listener: socket.socket,
        diagnose: Diagnose,
        idle_timeout: float,
        notify: Callable[[str], None] | bool = True,
    ) -> None:
        super().__init__(listener, idle_timeout=idle_timeout, notify=notify)
        self.diagnose = diagnose

    def busy(self) -> bytes:
        message = f"{MAX_RUNS} diagnoses are already running; try again soon"
        return encode_message(ErrorMessage(message=message))

    def _send(self, conn: socket.socket, message: Model) -> None:
        send_line(conn, encode_message(message), SEND_TIMEOUT)

    def handle(self, conn: socket.socket) -> None:
        try:
            uid = _peer_uid(conn)
            try:
                request = read_request(conn)
            except WireError as exc:
                self._send(conn, ErrorMessage(message=exc.message))
                return
            client_gone = False

            def stream(event: Event) -> None:
                nonlocal client_gone
                if client_gone:
                    return
                try:
                    self._send(conn, event)
                except OSError:
                    client_gone = True  # the diagnosis goes on; its plan still matters

            log.info("diagnose.requested", unit=request.unit, peer_uid=uid)
            verdict = self.diagnose(request.unit, request.symptom, stream)
            if not client_gone:
                self._send(conn, VerdictMessage(verdict=verdict))
        except Exception as exc:  # one bad run must not take the service down
            log.exception("diagnose.crashed", error=str(exc))
            try:
                self._send(conn, ErrorMessage(message=f"diagnosis failed: {exc}"))
            except OSError:
                pass
