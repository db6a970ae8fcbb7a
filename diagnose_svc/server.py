"""``opsbot-diagnose serve``: diagnoses on request, over /run/opsbot/diagnose.sock.

Socket-activated (opsbot-diagnose.socket, group opsbot-operators, mode 0660). Each
connection sends one ``DiagnoseRequest`` line and gets, live, one JSON line per step
event, then the verdict. At most ``MAX_RUNS`` diagnoses run at once; the service pings
the systemd watchdog while it waits, and exits after ``idle_timeout`` seconds without a
connection (the socket starts it again).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable

import structlog
from pydantic import ValidationError

from shared_schema import MAX_MESSAGE_BYTES, WireError, decode_json_object
from shared_schema.canonical import canonical_json
from shared_schema.diagnosis import (
    DiagnoseRequest,
    ErrorMessage,
    Event,
    NoteVerdict,
    PlanVerdict,
    VerdictMessage,
)
from shared_schema.errors import field_errors

SD_LISTEN_FDS_START = 3
REQUEST_TIMEOUT = 10.0
SEND_TIMEOUT = 10.0
MAX_RUNS = 4

log = structlog.get_logger("opsbot.diagnose.server")

#: (unit, symptom, on_event) -> verdict; the daemon binds policy, tools and settings.
Diagnose = Callable[[str, str, Callable[[Event], None]], PlanVerdict | NoteVerdict]


def _line(model: object) -> bytes:
    from pydantic import BaseModel

    assert isinstance(model, BaseModel)
    return canonical_json(model.model_dump(mode="json", exclude_none=True)) + b"\n"


def _peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _read_request(conn: socket.socket) -> bytes:
    conn.settimeout(REQUEST_TIMEOUT)
    buffer = b""
    deadline = time.monotonic() + REQUEST_TIMEOUT
    while b"\n" not in buffer:
        if len(buffer) > MAX_MESSAGE_BYTES:
            raise WireError(f"request larger than {MAX_MESSAGE_BYTES} bytes")
        if time.monotonic() > deadline:
            raise WireError(f"no complete request within {REQUEST_TIMEOUT:g}s")
        chunk = conn.recv(4096)
        if not chunk:
            break
        buffer += chunk
    return buffer.split(b"\n", 1)[0]


class DiagnoseServer:
    def __init__(
        self,
        listener: socket.socket,
        diagnose: Diagnose,
        idle_timeout: float,
        notify: Callable[[str], None],
    ) -> None:
        self.listener = listener
        self.diagnose = diagnose
        self.idle_timeout = idle_timeout
        self.notify = notify
        self.slots = threading.BoundedSemaphore(MAX_RUNS)
        self.active = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def _handle(self, conn: socket.socket) -> None:
        try:
            uid = _peer_uid(conn)
            try:
                request = DiagnoseRequest.model_validate(decode_json_object(_read_request(conn)))
            except WireError as exc:
                conn.sendall(_line(ErrorMessage(message=exc.message)))
                return
            except ValidationError as exc:
                errors = "; ".join(str(e) for e in field_errors(exc))
                conn.sendall(_line(ErrorMessage(message=f"bad request: {errors}")))
                return
            conn.settimeout(SEND_TIMEOUT)
            client_gone = False

            def stream(event: Event) -> None:
                nonlocal client_gone
                if client_gone:
                    return
                try:
                    conn.sendall(_line(event))
                except OSError:
                    client_gone = True  # the diagnosis goes on; its plan still matters

            log.info("diagnose.requested", unit=request.unit, peer_uid=uid)
            verdict = self.diagnose(request.unit, request.symptom, stream)
            if not client_gone:
                conn.sendall(_line(VerdictMessage(verdict=verdict)))
        except Exception as exc:  # one bad run must not take the service down
            log.exception("diagnose.crashed", error=str(exc))
            with contextlib.suppress(OSError):
                conn.sendall(_line(ErrorMessage(message=f"diagnosis failed: {exc}")))
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self.lock:
                self.active -= 1
            self.slots.release()

    def serve(self) -> None:
        self.listener.settimeout(1.0)
        last = time.monotonic()
        self.notify("READY=1\nSTATUS=waiting for diagnosis requests")
        while not self.stopping.is_set():
            self.notify("WATCHDOG=1")
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                with self.lock:
                    idle = self.active == 0
                if idle and self.idle_timeout > 0 and time.monotonic() - last > self.idle_timeout:
                    log.info("diagnose.idle_exit")
                    break
                continue
            last = time.monotonic()
            if not self.slots.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    conn.sendall(
                        _line(
                            ErrorMessage(
                                message=f"{MAX_RUNS} diagnoses are already running; try again soon"
                            )
                        )
                    )
                conn.close()
                continue
            with self.lock:
                self.active += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        self.notify("STOPPING=1")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with self.lock:
                if self.active == 0:
                    break
            self.notify("WATCHDOG=1")
            time.sleep(0.2)


def activated_listener() -> socket.socket | None:
    """The socket systemd passed us, if it did."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        return socket.socket(fileno=SD_LISTEN_FDS_START)
    return None


def bind_listener(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o660)
    sock.listen(16)
    return sock
