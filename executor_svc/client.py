"""The operator CLI's side of the executor socket: one request, one reply."""

import socket
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from executor_svc.errors import ExecutorError
from shared_schema import (
    WireError,
    decode_json_object,
    encode_message,
    parse_reply,
)
from shared_schema._model import Model
from shared_schema.diagnosis import (
    STREAM_ITEM,
    DiagnoseRequest,
    ErrorMessage,
    FinishedEvent,
    StartedEvent,
    StepEvent,
    VerdictMessage,
)
from shared_schema.wire import MAX_REPLY_BYTES, Accept, PlanDetail, PlanList, Reject, Revise


def _connect_error(path: Path, exc: OSError, unit: str) -> ExecutorError:
    if isinstance(exc, FileNotFoundError):
        return ExecutorError(
            f"no socket at {path}",
            hint=f"is {unit} enabled? `systemctl enable --now {unit}`",
        )
    if isinstance(exc, PermissionError):
        return ExecutorError(
            f"permission denied on {path}",
            hint="operators must be in group opsbot-operators (log in again after adding)",
        )
    return ExecutorError(f"cannot talk to {path}: {exc}")


def diagnose_stream(
    path: Path, message: DiagnoseRequest, timeout: float = 600.0
) -> Iterator[StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage]:
    """Ask the diagnosis service; yield each event as it arrives, then the verdict."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
            sock.sendall(encode_message(message))
        except OSError as exc:
            raise _connect_error(path, exc, "opsbot-diagnose.socket") from exc
        buffer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError as exc:
                raise ExecutorError(f"lost the diagnosis service at {path}: {exc}") from exc
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    yield STREAM_ITEM.validate_python(decode_json_object(line))
                except (WireError, ValidationError) as exc:
                    raise ExecutorError(
                        f"the diagnosis service sent a malformed line: {str(exc)[:200]}"
                    ) from exc


def request(
    path: Path, message: Model, timeout: float = 30.0
) -> Accept | Revise | Reject | PlanDetail | PlanList:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(encode_message(message))
            buffer = b""
            while b"\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > MAX_REPLY_BYTES:
                    raise ExecutorError("the executor's reply is too large")
    except OSError as exc:
        raise _connect_error(path, exc, "opsbot-executor.socket") from exc
    line = buffer.split(b"\n", 1)[0]
    if not line:
        raise ExecutorError("the executor closed the connection without a reply")
    try:
        return parse_reply(line)
    except WireError as exc:
        raise ExecutorError(f"the executor sent a malformed reply: {exc.message}") from exc
