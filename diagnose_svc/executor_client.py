"""The Submitter over the executor's Unix socket (/run/opsbot/executor.sock).

One connection per submission: send one ``submit`` request (canonical JSON and a
newline), read one reply line of at most 64 KiB, close. Anything that keeps the executor
from answering is an ExecutorUnavailable naming the socket path; an answer that is not
a reply to a submission is an ExecutorProtocolError.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import structlog

from diagnose_svc.errors import ExecutorProtocolError, ExecutorUnavailable
from diagnose_svc.limits import REPLY_READ_LIMIT, SYMPTOM_LIMIT
from diagnose_svc.submitter import SubmitReply
from shared_schema import (
    Accept,
    Reject,
    Revise,
    WireError,
    encode_message,
    parse_reply,
)
from shared_schema import SubmitPlan as SubmitPlanRequest

log = structlog.get_logger(__name__)

DEFAULT_SOCKET_PATH = Path("/run/opsbot/executor.sock")
DEFAULT_TIMEOUT_SECONDS = 10.0


class ExecutorClient:
    """Submits plans to the executor over its Unix socket; implements Submitter."""

    def __init__(
        self,
        socket_path: Path = DEFAULT_SOCKET_PATH,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = socket_path
        self.timeout_seconds = timeout_seconds

    def submit(self, plan: dict[str, Any], run_id: str, symptom: str) -> SubmitReply:
        request = SubmitPlanRequest(
            plan=plan, run_id=run_id, symptom=symptom[:SYMPTOM_LIMIT] or None
        )
        line = self._exchange(encode_message(request))
        try:
            reply = parse_reply(line)
        except WireError as exc:
            raise ExecutorProtocolError(
                f"the executor at {self.socket_path} sent a reply opsbot cannot read: {exc.message}"
            ) from exc
        if not isinstance(reply, Accept | Revise | Reject):
            raise ExecutorProtocolError(
                f"the executor at {self.socket_path} answered a submission with {reply.verdict}"
            )
        log.info("diagnose.submitted", run_id=run_id, verdict=reply.verdict)
        return reply

    def _unavailable(self, what: str, exc: BaseException | None = None) -> ExecutorUnavailable:
        detail = f": {exc}" if exc is not None and str(exc) else ""
        return ExecutorUnavailable(
            f"executor socket {self.socket_path}: {what}{detail}",
            hint="is opsbot-executor.service running? (systemctl status opsbot-executor)",
        )

    def _exchange(self, message: bytes) -> bytes:
        deadline = time.monotonic() + self.timeout_seconds
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(self.timeout_seconds)
            try:
                sock.connect(str(self.socket_path))
            except FileNotFoundError as exc:
                raise self._unavailable("does not exist") from exc
            except ConnectionRefusedError as exc:
                raise self._unavailable("connection refused (nobody listens)") from exc
            except PermissionError as exc:
                raise self._unavailable("permission denied", exc) from exc
            except TimeoutError as exc:
                raise self._unavailable(f"no connection within {self.timeout_seconds:g} s") from exc
            except OSError as exc:
                raise self._unavailable("cannot connect", exc) from exc
            try:
                sock.sendall(message)
                return self._read_line(sock, deadline)
            except TimeoutError as exc:
                raise self._unavailable(f"no reply within {self.timeout_seconds:g} s") from exc
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise self._unavailable("the executor closed the connection", exc) from exc
            except OSError as exc:
                raise self._unavailable("talking to the executor failed", exc) from exc

    def _read_line(self, sock: socket.socket, deadline: float) -> bytes:
        buffer = bytearray()
        while True:
            newline = buffer.find(b"\n")
            if newline >= 0:
                return bytes(buffer[:newline])
            if len(buffer) > REPLY_READ_LIMIT:
                raise ExecutorProtocolError(
                    f"the executor at {self.socket_path} sent more than {REPLY_READ_LIMIT} "
                    "bytes without ending its reply"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            chunk = sock.recv(65536)
            if not chunk:
                what = (
                    "closed the connection without replying"
                    if not buffer
                    else ("closed the connection in the middle of its reply")
                )
                raise self._unavailable(f"the executor {what}")
            buffer += chunk
