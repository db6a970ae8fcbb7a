"""The scenario stack's "database": a line protocol on 127.0.0.1:$DB_PORT.

``PING`` is answered with ``PONG``; anything else with ``ERR unknown command``.  It runs
as ``<db>.service`` (Type=notify) under Debian's /usr/bin/python3, stdlib only; see
testbed/stack.py, which installs it into the container.
"""

from __future__ import annotations

import os
import socket
import socketserver
import sys


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


class LineHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            command = line.strip()
            if command == b"PING":
                self.wfile.write(b"PONG\n")
            elif command == b"QUIT":
                return
            else:
                self.wfile.write(b"ERR unknown command\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main() -> int:
    name = os.environ.get("DB_NAME", "db")
    port = int(os.environ["DB_PORT"])
    with Server(("127.0.0.1", port), LineHandler) as server:
        print(f"{name}: listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        notify("READY=1")
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
