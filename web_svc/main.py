"""``opsbot-web``: the approval page as a service.

Under systemd it serves the socket opsbot-web.socket passes (127.0.0.1:8750 by
default: operators put it behind their TLS reverse proxy); ``--listen HOST:PORT`` binds
one itself, for a developer or a test. One process, one event loop, no workers: what it
does is small, and what protects it (shared_schema.config.WebSettings, ``[web]``) is
counted in that one process.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys

import structlog
import uvicorn
from starlette.types import ASGIApp

from shared_io import exit_codes
from shared_io import log as logsetup
from shared_io.activation import activated_socket, notify
from shared_io.config import load_config
from shared_io.errors import OpsbotError
from shared_schema.config import WebSettings
from web_svc.app import create_app
from web_svc.approver import approver_socket
from web_svc.protocol import MAX_HEADER_BYTES, guarded_protocol

log = structlog.get_logger("opsbot.web")

#: Seconds a connection may stay open, idle, between two requests.
KEEP_ALIVE_SECONDS = 5


class Server(uvicorn.Server):
    """uvicorn's server, telling systemd when it is ready and when it stops."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        notify("READY=1", "STATUS=serving the approval page")

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
    """The socket systemd passed, or one bound to ``listen`` (HOST:PORT)."""
    if listen is None:
        sock = activated_socket()
        if sock is None:
            raise OpsbotError(
                "no socket from systemd",
                hint="start opsbot-web.socket, or pass --listen 127.0.0.1:PORT",
                exit_status=exit_codes.USAGE,
            )
        return sock
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise OpsbotError(f"--listen {listen}: not HOST:PORT", exit_status=exit_codes.USAGE)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="opsbot-web",
        description="The approval page: shows a plan a link is for, and relays the "
        "approver's TOTP code to root's opsbot-approver, which alone decides. Normally "
        "started by opsbot-web.socket (127.0.0.1:8750).",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="bind this (not under systemd)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logsetup.configure("opsbot-web", verbose=args.verbose)
    try:
        settings = load_config().web
        sock = listening_socket(args.listen)
    except OpsbotError as exc:
        print(f"opsbot-web: {exc}", file=sys.stderr)
        return exc.exit_status
    where = sock.getsockname()
    log.info("web.started", listen=f"{where[0]}:{where[1]}", approver=str(approver_socket()))
    app = create_app(settings, approver_socket())
    build_server(settings, app).run(sockets=[sock])
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
