"""The scenario stack's app: HTTP on 127.0.0.1:$APP_PORT that needs its db.

``GET /healthz`` answers 200 ``ok`` only when the db at $DB_HOST:$DB_PORT answers ``PING``
with ``PONG`` within one second, 503 otherwise; ``GET /`` answers a greeting.  $APP_MODE
must be one of :data:`MODES`, or the app exits 1 at once with one clear line on stderr.
It runs as ``<app>.service`` (Type=notify) under Debian's /usr/bin/python3, stdlib only;
see testbed/stack.py, which installs it into the container.
"""

from __future__ import annotations

import http.server
import os
import socket
import sys
import time

MODES = ("prod", "dev")
DB_TIMEOUT = 1.0


def notify(state: str) -> None:
    """Tell systemd ``state`` (sd_notify without libsystemd); a no-op outside a unit."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(state.encode())


def ping_db(host: str, port: int) -> None:
    """Raise OSError unless the db answers PING with PONG within DB_TIMEOUT seconds."""
    deadline = time.monotonic() + DB_TIMEOUT
    with socket.create_connection((host, port), timeout=DB_TIMEOUT) as conn:
        conn.settimeout(max(deadline - time.monotonic(), 0.01))
        conn.sendall(b"PING\n")
        reply = conn.makefile("rb").readline()
    if reply.strip() != b"PONG":
        raise OSError(f"unexpected reply {reply!r}")


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "opsbot-scenario-app/1"
    app_name = "app"
    greeting = "hello"
    mode = "prod"
    db = ("127.0.0.1", 5433)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            try:
                ping_db(*self.db)
            except OSError as exc:
                why = f"db {self.db[0]}:{self.db[1]} unreachable: {exc}"
                print(f"{self.app_name}: /healthz: {why}", file=sys.stderr, flush=True)
                self.reply(503, f"{why}\n")
            else:
                self.reply(200, "ok\n")
        elif self.path == "/":
            self.reply(200, f"{self.greeting} (mode {self.mode})\n")
        else:
            self.reply(404, "not found\n")

    def reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """No access log: the journal keeps only what an operator needs."""


def main() -> int:
    name = os.environ.get("APP_NAME", "app")
    mode = os.environ.get("APP_MODE", "prod")
    if mode not in MODES:
        print(
            f"{name}: invalid APP_MODE={mode!r}: expected one of {', '.join(MODES)}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    port = int(os.environ["APP_PORT"])
    Handler.app_name = name
    Handler.mode = mode
    Handler.greeting = os.environ.get("APP_GREETING", f"hello from {name}")
    Handler.db = (os.environ.get("DB_HOST", "127.0.0.1"), int(os.environ["DB_PORT"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    with server:
        db = f"{Handler.db[0]}:{Handler.db[1]}"
        print(
            f"{name}: listening on 127.0.0.1:{port} (mode {mode}, db {db})",
            file=sys.stderr,
            flush=True,
        )
        notify("READY=1")
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
