"""The operator CLI's side of the executor socket: one request, one reply."""

import socket
from pathlib import Path

from executor_svc.errors import ExecutorError
from shared_schema import MAX_MESSAGE_BYTES, WireError, encode_message, parse_reply
from shared_schema._model import Model
from shared_schema.wire import Accept, PlanDetail, PlanList, Reject, Revise


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
                if len(buffer) > 16 * MAX_MESSAGE_BYTES:
                    raise ExecutorError("the executor's reply is too large")
    except FileNotFoundError as exc:
        raise ExecutorError(
            f"no executor socket at {path}",
            hint="is opsbot-executor.socket enabled? `systemctl enable --now "
            "opsbot-executor.socket`",
        ) from exc
    except PermissionError as exc:
        raise ExecutorError(
            f"permission denied on {path}",
            hint="operators must be in group opsbot-operators (log in again after adding)",
        ) from exc
    except (ConnectionError, TimeoutError, OSError) as exc:
        raise ExecutorError(f"cannot talk to the executor at {path}: {exc}") from exc
    line = buffer.split(b"\n", 1)[0]
    if not line:
        raise ExecutorError("the executor closed the connection without a reply")
    try:
        return parse_reply(line)
    except WireError as exc:
        raise ExecutorError(f"the executor sent a malformed reply: {exc.message}") from exc
