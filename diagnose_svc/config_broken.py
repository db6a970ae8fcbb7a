"""``opsbot-diagnose serve`` while opsbot.toml does not load.

:class:`ConfigBroken` keeps the diagnose socket up: each connection's request is read and
answered with one ``diagnose.error`` carrying the ConfigError (file, line, key) and its
hint; no diagnosis runs. A daemon that exited at start instead would be started again by
the socket until systemd gave up (start-limit-hit) and closed it. It exits when idle like
:class:`~diagnose_svc.server.DiagnoseServer`; once the file loads, the next request is
told to try again and the daemon exits, so the socket starts one that reads it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from diagnose_svc.server import DiagnoseServer, read_request
from shared_io.config import load_config
from shared_io.errors import ConfigError
from shared_schema import WireError
from shared_schema.diagnose_socket import ErrorMessage, Event


def _no_diagnosis(unit: str, symptom: str, on_event: Callable[[Event], None]) -> NoReturn:
    raise AssertionError("ConfigBroken runs no diagnosis")


class ConfigBroken(DiagnoseServer):
    def __init__(
        self,
        listener: socket.socket,
        error: ConfigError,
        config: Path | None,
        idle_timeout: float,
        notify: Callable[[str], None] | bool = True,
    ) -> None:
        super().__init__(listener, _no_diagnosis, idle_timeout, notify)
        self.error = error
        self.config = config
        self.ready_status = "not diagnosing: " + " ".join(error.message.split())

    def _answer(self) -> ErrorMessage:
        try:
            load_config(self.config)
        except ConfigError as exc:
            return ErrorMessage(
                message=f"invalid configuration: {exc.message}",
                hint=exc.hint or "",
                exit_status=exc.exit_status,
            )
        self.stopping.set()
        return ErrorMessage(
            message="the configuration was fixed since the diagnosis service started",
            hint="try again",
        )

    def handle(self, conn: socket.socket) -> None:
        try:
            read_request(conn, self.clock)
        except WireError:
            pass  # whatever it asked, the answer is the same
        self._send(conn, self._answer())
