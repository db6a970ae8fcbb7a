"""Which config each running daemon has in force, for ``opsbot check-config``.

The executor, the diagnosis service and the approver read opsbot.toml again before an
answer whenever it changed (shared_io.live_config), keep the one read before when a new
file does not load, and read a few keys only at start; the page reads the file at start
and on ``systemctl reload`` (web_svc/reload.py) and says which it has in force in its
systemd status (a page of an older version only tells the approver, with each relay).
Each is asked over its own socket (``config``), and only if systemd says it runs: asking
a socket-activated daemon that does not run would start it, and one that does not run
reads the file when it next starts. What to run is said with each daemon that runs an
older file."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from shared_io import framing
from shared_io.errors import SocketUnavailable, UnitStateError
from shared_io.paths import Paths, approver_socket_path
from shared_io.unit_show import show
from shared_schema.approver_socket import ConfigQuery, ConfigShown, Refused, parse_approver_reply
from shared_schema.config_state import ConfigState, parse_page_status
from shared_schema.diagnose_socket import (
    ConfigMessage,
    ConfigQuery as DiagnoseConfigQuery,
    ErrorMessage,
)
from shared_schema.executor_socket import ConfigReply, ShowConfig
from shared_schema.messages import MAX_REPLY_BYTES, encode_message

RELOAD = "sudo systemctl try-reload-or-restart"
TIMEOUT = 10.0


@dataclass(frozen=True)
class Running:
    """One daemon as check-config reports it."""

    unit: str
    #: "current", "older" (an edit did not load, or it reads keys only at start that
    #: changed), "not running", or "unknown" (it could not be asked).
    status: str
    detail: str = ""
    #: What to run ("" for nothing).
    action: str = ""

    def as_json(self) -> dict[str, str]:
        return {"unit": self.unit, "status": self.status, "detail": self.detail, "do": self.action}


def is_running(unit: str) -> bool | None:
    """Whether systemd runs ``unit`` now (None: it could not say)."""
    try:
        [props] = show([unit], ("ActiveState",), timeout=TIMEOUT)
    except UnitStateError:
        return None
    return props.get("ActiveState") in ("active", "reloading", "activating")


def _judge(unit: str, state: ConfigState, digest: str) -> Running:
    if state.error:
        return Running(
            unit,
            "older",
            f"keeps the file read before (sha256 {state.digest[:12]}): {state.error}",
            f"fix the file; it is read again at the next answer (or `{RELOAD} {unit}`)",
        )
    if state.digest != digest:
        return Running(
            unit,
            "older",
            f"runs sha256 {state.digest[:12]}, the file is {digest[:12]}",
            f"`{RELOAD} {unit}`",
        )
    if state.restart_keys:
        return Running(
            unit,
            "older",
            f"reads {', '.join(state.restart_keys)} only at start",
            f"`sudo systemctl restart {unit}`",
        )
    return Running(unit, "current")


def _ask_executor(paths: Paths) -> ConfigState | str:
    from shared_schema import WireError, parse_reply

    line = framing.exchange(
        paths.executor_socket, encode_message(ShowConfig()), limit=MAX_REPLY_BYTES, timeout=TIMEOUT
    )
    try:
        reply = parse_reply(line)
    except WireError as exc:
        return exc.message
    return reply if isinstance(reply, ConfigReply) else getattr(reply, "reason", str(reply))


def _ask_diagnose(paths: Paths) -> ConfigState | str:
    line = framing.exchange(
        paths.diagnose_socket,
        encode_message(DiagnoseConfigQuery()),
        limit=MAX_REPLY_BYTES,
        timeout=TIMEOUT,
    )
    try:
        return ConfigMessage.model_validate_json(line)
    except ValidationError:
        try:
            return ErrorMessage.model_validate_json(line).message
        except ValidationError:
            return "a reply that is not one (an older version? restart it)"


def _ask_approver() -> ConfigShown | str:
    line = framing.exchange(
        approver_socket_path(),
        encode_message(ConfigQuery()),
        limit=MAX_REPLY_BYTES,
        timeout=TIMEOUT,
    )
    try:
        reply = parse_approver_reply(line)
    except ValidationError:
        return "a reply that is not one (an older version? restart it)"
    if isinstance(reply, Refused):
        return reply.reason
    return reply if isinstance(reply, ConfigShown) else f"answered {reply.op}"


Ask = Callable[[], "ConfigState | str"]


def status_text(unit: str) -> str:
    """``unit``'s status as it told systemd (sd_notify STATUS=; "" when it cannot say)."""
    try:
        [props] = show([unit], ("StatusText",), timeout=TIMEOUT)
    except UnitStateError:
        return ""
    return props.get("StatusText", "")


def running_configs(
    paths: Paths,
    digest: str,
    running: Callable[[str], bool | None] = is_running,
    status: Callable[[str], str] = status_text,
) -> list[Running]:
    """Each daemon's config against the file's ``digest``, in a fixed order (the page's
    from its ``status``)."""
    asks: list[tuple[str, Ask]] = [
        ("opsbot-executor.service", lambda: _ask_executor(paths)),
        ("opsbot-diagnose.service", lambda: _ask_diagnose(paths)),
    ]
    if os.geteuid() == 0:
        asks.append(("opsbot-approver.service", _ask_approver))
    found: list[Running] = []
    relayed: ConfigShown | None = None
    for unit, ask in asks:
        up = running(unit)
        if up is None:
            found.append(Running(unit, "unknown", "systemd could not say whether it runs"))
            continue
        if not up:
            found.append(Running(unit, "not running", "reads the file when it next starts"))
            continue
        try:
            state = ask()
        except SocketUnavailable as exc:
            found.append(Running(unit, "unknown", f"could not be asked: {exc.what}"))
            continue
        if isinstance(state, str):
            found.append(Running(unit, "unknown", f"could not be asked: {state}"))
            continue
        found.append(_judge(unit, state, digest))
        if isinstance(state, ConfigShown):
            relayed = state
    return found + _web(relayed, digest, running, status)


WEB = "opsbot-web.service"


def web_running(said: str, digest: str) -> Running | None:
    """The page as its systemd status says (None: a status that does not say)."""
    page = parse_page_status(said)
    if page is None:
        return None
    page_digest, reload_failed = page
    if page_digest == digest:
        return Running(WEB, "current")
    if reload_failed:
        return Running(
            WEB,
            "older",
            f"keeps the file read before (sha256 {page_digest[:12]}): the newer one did not "
            "load (`journalctl -u opsbot-web` says why)",
            f"fix the file, then `{RELOAD} {WEB}`",
        )
    return Running(
        WEB,
        "older",
        f"runs sha256 {page_digest[:12]}, the file is {digest[:12]}",
        f"`{RELOAD} {WEB}`",
    )


def _web(
    state: ConfigShown | None,
    digest: str,
    running: Callable[[str], bool | None],
    status: Callable[[str], str],
) -> list[Running]:
    """The page, as its systemd status says, or (a page of an older version) as it told
    root's approver with its last relay."""
    unit = WEB
    if not running(unit):
        return []
    said = web_running(status(unit), digest)
    if said is not None:
        return [said]
    if state is None or state.web_digest is None or state.web_seen_at is None:
        return []
    if state.web_digest == digest:
        return [Running(unit, "current")]
    seen = state.web_seen_at.strftime("%H:%M UTC")
    return [
        Running(
            unit,
            "older",
            f"says it runs sha256 {state.web_digest[:12]} (at its last relay, {seen})",
            f"`sudo systemctl restart {unit}`",
        )
    ]


__all__ = ["Running", "is_running", "running_configs", "status_text", "web_running"]
