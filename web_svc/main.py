"""``opsbot-web``: the approval page as a service.

Under systemd it serves the socket opsbot-web.socket passes: 127.0.0.1:8750 without a
proxy, or, once ``[web] proxy_group`` names the TLS reverse proxy's group (``listen =
"unix"``), /run/opsbot/web.sock, which only that group may connect to and the only place
a proxy's X-Forwarded-For is believed.
``--listen HOST:PORT`` or ``--listen /PATH`` binds one itself, for a developer or a
test. One process, one event loop, no workers: what it does is small, and what
protects it (shared_schema.config.WebSettings, ``[web]``) is
counted in that one process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from collections.abc import Callable

import structlog
import uvicorn
from starlette.types import ASGIApp

from shared_io import exit_codes, log as logsetup
from shared_io.activation import activated_socket, notify
from shared_io.config import load_with_digest
from shared_io.errors import OpsbotError
from shared_io.paths import config_path
from shared_schema.config import WebSettings
from shared_schema.config_state import page_status
from web_svc.app import create_app
from web_svc.approver import ApproverClient, approver_socket
from web_svc.protocol import MAX_HEADER_BYTES, guarded_protocol
from web_svc.reload import Reloader

log = structlog.get_logger("opsbot.web")

#: Seconds a connection may stay open, idle, between two requests.
KEEP_ALIVE_SECONDS = 5


class Server(uvicorn.Server):
    """uvicorn's server, telling systemd when it is ready (and which file it has in force)
    and when it stops; SIGHUP (``systemctl reload``) calls ``on_reload``."""

    digest: str | None = None
    on_reload: Callable[[], object] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_reload is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.on_reload)
        status = page_status(self.digest) if self.digest else "serving the approval page"
        notify("READY=1", f"STATUS={status}")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        notify("STOPPING=1")
        await super().shutdown(sockets)


def build_server(settings: WebSettings, app: ASGIApp) -> Server:
    """The server for ``app``, with opsbot-web's protocol and nothing uvicorn would
    otherwise add: no proxy headers believed (guard.py decides whom to believe), no access
    log (the URL holds a token), no Server header, no websockets, no lifespan."""
    config = uvicorn.Config(
        app,
        http=guarded_protocol(settings),
        ws="none",
        lifespan="off",
        loop="asyncio",
        proxy_headers=False,
        server_header=False,
        access_log=False,
        log_config=None,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=5,
        # asyncio listens again on the socket it is given: with opsbot-web.socket's Backlog=.
        backlog=1024,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    # uvicorn's warnings ("Invalid HTTP request received") would be one journal line per
    # garbage request; its errors (an exception in the app) still show.
    logging.getLogger("uvicorn.error").setLevel(logging.ERROR)
    return Server(config)


def listening_socket(listen: str | None) -> socket.socket:
    """The socket systemd passed, or one bound to ``listen`` (HOST:PORT or /PATH)."""
    if listen is None:
        sock = activated_socket()
        if sock is None:
            raise OpsbotError(
                "no socket from systemd",
                hint="start opsbot-web.socket, or pass --listen 127.0.0.1:PORT",
                exit_status=exit_codes.USAGE,
            )
        return sock
    if listen.startswith("/"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(listen)
        except OSError as exc:
            sock.close()
            raise OpsbotError(f"cannot listen on {listen}: {exc.strerror}") from exc
        sock.listen(128)
        return sock
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise OpsbotError(
            f"--listen {listen}: neither HOST:PORT nor /PATH", exit_status=exit_codes.USAGE
        )
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as exc:
        sock.close()
        raise OpsbotError(f"cannot listen on {listen}: {exc.strerror}") from exc
    sock.listen(128)
    return sock


def check_family(settings: WebSettings, sock: socket.socket) -> None:
    """The socket is the kind the config says: a proxy's X-Forwarded-For is believed
    only on a Unix socket, and only when the config says the proxy is there."""
    unix = sock.family == socket.AF_UNIX
    if unix and settings.listen != "unix":
        raise OpsbotError(
            f"[web] listen is {settings.listen!r} but the page was given a Unix socket",
            hint="set [web] proxy_group (the Unix socket is then the default), then "
            "`opsbot firewall --write`",
            exit_status=exit_codes.CONFIG,
        )
    if not unix and settings.listen == "unix":
        raise OpsbotError(
            '[web] listen is "unix" but the page was given a TCP socket',
            hint="run `opsbot firewall --write` (it writes opsbot-web.socket's listen "
            "drop-in), then `systemctl restart opsbot-web.socket`",
            exit_status=exit_codes.CONFIG,
        )


def where(sock: socket.socket) -> str:
    name = sock.getsockname()
    return str(name) if isinstance(name, str) else f"{name[0]}:{name[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-web",
        description="The approval page: shows a plan a link is for, and relays the "
        "approver's TOTP code to root's opsbot-approver, which alone decides. Normally "
        "started by opsbot-web.socket (127.0.0.1:8750, or /run/opsbot/web.sock with "
        "[web] proxy_group).",
    )
    parser.add_argument("--listen", metavar="HOST:PORT|/PATH", help="bind this (not under systemd)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logsetup.configure("opsbot-web", verbose=args.verbose)
    try:
        config, digest = load_with_digest(config_path())
        settings = config.web
        sock = listening_socket(args.listen)
        check_family(settings, sock)
    except OpsbotError as exc:
        print(f"opsbot-web: {exc}", file=sys.stderr)
        return exc.exit_status
    log.info("web.started", listen=where(sock), approver=str(approver_socket()))
    client = ApproverClient(approver_socket(), config_digest=digest)
    server = build_server(settings, create_app(settings, approver_socket(), client=client))
    server.digest = digest

    def stop() -> None:
        server.should_exit = True

    server.on_reload = Reloader(config_path(), settings, digest, client, stop)
    server.run(sockets=[sock])
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
