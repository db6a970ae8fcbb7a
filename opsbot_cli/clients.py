"""The console's side of both sockets: one request and one reply to the executor, one
request and a stream of events to the diagnosis service. Each failure to reach a daemon
is one line with a hint that says what to check."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsbot_cli import wire
from opsbot_cli.errors import ConsoleError
from shared_io import framing
from shared_io.errors import PeerProtocolError, SocketUnavailable

if TYPE_CHECKING:  # the models, imported where a model is sent (plans and show send none)
    from shared_schema import ReplyModel
    from shared_schema._model import Model
    from shared_schema.diagnose_socket import (
        DiagnoseRequest,
        ErrorMessage,
        FinishedEvent,
        StartedEvent,
        StepEvent,
        VerdictMessage,
    )

EXECUTOR_TIMEOUT = 30.0
#: A diagnosis reports each step as it happens; this long without one, it is lost.
DIAGNOSE_TIMEOUT = 600.0


def _config_cause() -> str | None:
    """Why the daemons could not start, if the console can read the config and it is
    invalid (the same ConfigError the daemons meet); None if it loads or is unreadable."""
    from shared_io.config import load_config
    from shared_io.errors import ConfigError
    from shared_io.paths import config_path

    path = config_path()
    try:
        if path.exists() and not os.access(path, os.R_OK):
            return None
    except OSError:  # a directory on its way is not this user's to search
        return None
    try:
        load_config(path)
    except ConfigError as exc:
        return exc.message
    return None


def _down_hint(unit: str) -> str:
    """What to check when nothing (or nothing alive) answers on ``unit``'s socket."""
    service = unit.removesuffix(".socket") + ".service"
    steps = (
        f"`systemctl status {unit} {service}`; if failed (start-limit-hit): "
        f"`systemctl reset-failed {unit} {service}` then `systemctl start {unit}`"
    )
    cause = _config_cause()
    if cause is not None:
        return f"the config is invalid: {cause}; fix it (`opsbot check-config`), then {steps}"
    return steps


def _unreachable(exc: SocketUnavailable, daemon: str, unit: str) -> ConsoleError:
    if exc.reason == "missing":
        return ConsoleError(
            f"no socket at {exc.path}",
            hint=f"is {unit} enabled? `systemctl enable --now {unit}`; {_down_hint(unit)}",
        )
    if exc.reason == "permission":
        return ConsoleError(
            f"permission denied on {exc.path}",
            hint="operators must be in group opsbot-operators (log in again after adding)",
        )
    if isinstance(exc, PeerProtocolError):
        return ConsoleError(f"the {daemon} sent a malformed reply: {exc.what}")
    hint = _down_hint(unit) if exc.reason in ("refused", "closed") else None
    return ConsoleError(f"cannot talk to the {daemon} at {exc.path}: {exc.what}", hint=hint)


def request_json(path: Path, line: bytes, timeout: float = EXECUTOR_TIMEOUT) -> dict[str, Any]:
    """One request line to the executor (opsbot_cli.wire builds it), its one reply as a
    JSON object that speaks the protocol; its shape is the caller's to check."""
    try:
        reply = framing.exchange(path, line, limit=wire.max_reply_bytes(), timeout=timeout)
    except SocketUnavailable as exc:
        raise _unreachable(exc, "executor", "opsbot-executor.socket") from exc
    try:
        return wire.decode_reply(reply)
    except wire.MalformedReply as exc:
        raise malformed(exc.what) from exc


def ask_json(
    path: Path, line: bytes, shape: Callable[[dict[str, Any]], dict[str, Any] | str]
) -> dict[str, Any]:
    """:func:`request_json`, its reply checked by ``shape`` (opsbot_cli.wire's
    ``plan_list``, ``plan_detail``): what it returns, or the executor's refusal as one
    line, or a malformed reply said as one."""
    from opsbot_cli.screen import printable

    reply = request_json(path, line)
    try:
        shaped = shape(reply)
    except wire.MalformedReply as exc:
        raise malformed(exc.what) from exc
    if isinstance(shaped, str):
        raise ConsoleError(printable(shaped))
    return shaped


def malformed(what: str) -> ConsoleError:
    """A reply that is not what the executor's models allow, said in one line."""
    return ConsoleError(f"the executor sent a malformed reply: {what}")


def request(path: Path, message: Model, timeout: float = EXECUTOR_TIMEOUT) -> ReplyModel:
    """One request to the executor, its one reply, both validated by the models."""
    from shared_schema import MAX_REPLY_BYTES, WireError, encode_message, parse_reply

    try:
        line = framing.exchange(
            path, encode_message(message), limit=MAX_REPLY_BYTES, timeout=timeout
        )
    except SocketUnavailable as exc:
        raise _unreachable(exc, "executor", "opsbot-executor.socket") from exc
    try:
        return parse_reply(line)
    except WireError as exc:
        raise malformed(exc.message) from exc


def diagnose_stream(
    path: Path, message: DiagnoseRequest, timeout: float = DIAGNOSE_TIMEOUT
) -> Iterator[StartedEvent | StepEvent | FinishedEvent | VerdictMessage | ErrorMessage]:
    """Ask the diagnosis service; yield each event as it arrives, then the verdict."""
    from pydantic import ValidationError

    from shared_schema import MAX_MESSAGE_BYTES, WireError, decode_json_object, encode_message
    from shared_schema.diagnose_socket import STREAM_ITEM

    lines = framing.stream(path, encode_message(message), limit=MAX_MESSAGE_BYTES, timeout=timeout)
    try:
        for line in lines:
            try:
                yield STREAM_ITEM.validate_python(decode_json_object(line))
            except (WireError, ValidationError) as exc:
                raise ConsoleError(
                    f"the diagnosis service sent a malformed line: {str(exc)[:200]}"
                ) from exc
    except SocketUnavailable as exc:
        raise _unreachable(exc, "diagnosis service", "opsbot-diagnose.socket") from exc
