#!/usr/bin/python3
"""A Python service written the way small real apps are: configured by its environment
(an ``EnvironmentFile=`` in /etc/default or /etc/NAME/INSTANCE.env), logging with the
logging module (a traceback when something breaks), talking to redis and memcached over
their own protocols, and failing the way Python fails: ``OSError: [Errno 98] Address
already in use`` (no port in it), ``[Errno 24] Too many open files``, ``[Errno 28] No space
left on device``. The real-software graphs of the generated suite (testbed/daemons.py)
run it in four roles:

    web        HTTP on PORT or on the Unix socket LISTEN_SOCKET; /healthz is 200 when
               every backend it is configured with answers (REDIS_URL, MEMCACHED,
               BACKEND_URL or BACKEND_SOCKET), else 503 saying which one failed
    producer   a web app that also queues a job on QUEUE_KEY (redis) every QUEUE_EVERY
               seconds; /healthz says 503 "queue full" once more than QUEUE_MAX wait
    consumer   a worker with no port: takes jobs off QUEUE_KEY (BLPOP); a connection the
               broker dropped is lost for good (the bug of many workers: it logs it and
               waits to be restarted)
    (any)      SPOOL=1: each request writes a small file into STATE_DIR/spool, as an app
               that keeps uploads or a cache on disk does
    (any)      TLS_CERT and TLS_KEY: it serves HTTPS with them; a BACKEND_URL of https://
               is checked against the CA in TLS_CA (Python's ssl: "certificate verify
               failed: certificate has expired")

SIGUSR2 starts a descriptor leak (each request opens a file it never closes), as a bug
on a code path does. Stdlib only: it runs with Debian's /usr/bin/python3.
"""

from __future__ import annotations

import http.client
import http.server
import logging
import os
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from typing import BinaryIO

log = logging.getLogger("app")
LEAKED: list[object] = []
LEAK = threading.Event()


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


# -- the backends' protocols -------------------------------------------------------------------


def _redis_address() -> tuple[str, object]:
    url = urllib.parse.urlsplit(env("REDIS_URL"))
    if url.scheme == "unix":
        return "unix", url.path
    return "tcp", (url.hostname or "127.0.0.1", url.port or 6379)


def redis_connect(timeout: float = 2.0) -> socket.socket:
    family, address = _redis_address()
    sock = socket.socket(socket.AF_UNIX if family == "unix" else socket.AF_INET)
    sock.settimeout(timeout)
    sock.connect(address)  # type: ignore[arg-type]
    return sock


def _resp(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_reply(reader: BinaryIO) -> object:
    line = reader.readline()
    if not line:
        raise ConnectionError("Connection closed by server.")
    kind, rest = line[:1], line[1:].rstrip(b"\r\n")
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = reader.read(size + 2)
        return data[:-2].decode()
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_reply(reader) for _ in range(count)]
    raise RuntimeError(f"unexpected reply from redis: {line!r}")


class Redis:
    """One connection to redis, kept (a pool of one)."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.sock = redis_connect(timeout)
        self.reader = self.sock.makefile("rb")

    def call(self, *words: str) -> object:
        self.sock.sendall(_resp(*words))
        return _read_reply(self.reader)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def redis_call(*words: str) -> object:
    client = Redis()
    try:
        return client.call(*words)
    finally:
        client.close()


def memcached_version() -> str:
    host, _, port = env("MEMCACHED").rpartition(":")
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=2) as sock:
        sock.sendall(b"version\r\n")
        return sock.recv(128).decode().strip()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path_ = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path_)


def backend_health() -> tuple[int, str]:
    if env("BACKEND_SOCKET"):
        conn: http.client.HTTPConnection = _UnixConnection(env("BACKEND_SOCKET"), 2.0)
        where = env("BACKEND_SOCKET")
    else:
        url = urllib.parse.urlsplit(env("BACKEND_URL"))
        host = url.hostname or "127.0.0.1"
        if url.scheme == "https":
            context = ssl.create_default_context(cafile=env("TLS_CA") or None)
            conn = http.client.HTTPSConnection(host, url.port or 443, timeout=2, context=context)
        else:
            conn = http.client.HTTPConnection(host, url.port or 80, timeout=2)
        where = env("BACKEND_URL")
    try:
        conn.request("GET", "/healthz")
        answer = conn.getresponse()
        return answer.status, f"backend {where} answered {answer.status}"
    finally:
        conn.close()


# -- health ------------------------------------------------------------------------------------


def health() -> tuple[int, str]:
    """200 when every backend answers; else 503 naming the one that failed."""
    try:
        if env("REDIS_URL"):
            if redis_call("PING") != "PONG":
                return 503, "redis did not answer PONG"
            if env("ROLE") == "producer":
                waiting = redis_call("LLEN", env("QUEUE_KEY", "jobs"))
                limit = int(env("QUEUE_MAX", "200"))
                if isinstance(waiting, int) and waiting > limit:
                    return 503, f"queue full: {waiting} jobs waiting (max {limit})"
        if env("MEMCACHED"):
            memcached_version()
        if env("BACKEND_URL") or env("BACKEND_SOCKET"):
            status, said = backend_health()
            if status != 200:
                return 503, said
    except (OSError, ConnectionError, RuntimeError) as exc:
        log.error("health check failed: %s", exc)
        return 503, f"{type(exc).__name__}: {exc}"
    return 200, "ok"


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "app/1.4"
    tls_failed = False

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.settimeout(5)
                self.connection.do_handshake()
            except OSError as exc:  # ssl.SSLError is one
                log.warning("TLS handshake with %s failed: %s", self.client_address[0], exc)
                self.tls_failed = True

    def handle(self) -> None:
        if not self.tls_failed:
            super().handle()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        try:
            if LEAK.is_set():
                LEAKED.append(open(__file__, "rb"))  # noqa: SIM115 (the leak is the point)
            if env("SPOOL"):
                spool = os.path.join(env("STATE_DIR", "/tmp"), "spool")
                os.makedirs(spool, exist_ok=True)
                with open(os.path.join(spool, f"req-{time.time_ns()}"), "w") as handle:
                    handle.write(self.path)
            status, said = health() if self.path.startswith("/healthz") else (200, "hello")
        except OSError:
            log.error("request %s failed\n%s", self.path, traceback.format_exc().rstrip())
            status, said = 500, "internal error"
        body = (said + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *args: object) -> None:
        log.info("%s %s", self.address_string(), fmt % args)


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):  # type: ignore[no-untyped-def]
        request, _ = super().get_request()
        return request, ("local", 0)


def serve() -> None:
    if env("LISTEN_SOCKET"):
        path = env("LISTEN_SOCKET")
        if os.path.exists(path):
            os.unlink(path)
        server: socketserver.BaseServer = UnixHTTPServer(path, Handler)
        os.chmod(path, 0o666)
        log.info("listening on %s", path)
    else:
        # Address already in use comes out as Python says it: "[Errno 98] Address already
        # in use", with no address or port in it.
        server = http.server.ThreadingHTTPServer(("127.0.0.1", int(env("PORT"))), Handler)
        if env("TLS_CERT"):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(env("TLS_CERT"), env("TLS_KEY") or None)
            # The handshake in the worker thread, not in accept(): a client that gives up
            # on it (an expired certificate) costs the listener nothing.
            server.socket = context.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        log.info("listening on 127.0.0.1:%s%s", env("PORT"), " (TLS)" if env("TLS_CERT") else "")
    if env("ROLE") == "producer":
        threading.Thread(target=produce, daemon=True).start()
    notify("READY=1")
    server.serve_forever()


# -- queue roles ----------------------------------------------------------------------------


def produce() -> None:
    every = float(env("QUEUE_EVERY", "0.02"))
    client: Redis | None = None
    number = 0
    while True:
        try:
            client = client or Redis()
            client.call("RPUSH", env("QUEUE_KEY", "jobs"), f"job-{number}")
            number += 1
        except (OSError, ConnectionError, RuntimeError) as exc:
            log.warning("could not queue a job: %s", exc)
            client = None
            time.sleep(1)
        time.sleep(every)


def consume() -> None:
    notify("READY=1")
    client = Redis(timeout=None)  # type: ignore[arg-type]
    log.info("consuming %s", env("QUEUE_KEY", "jobs"))
    while True:
        try:
            client.call("BLPOP", env("QUEUE_KEY", "jobs"), "0")
        except (OSError, ConnectionError) as exc:
            # The worker's bug: the broker dropped its connection; it is never made again.
            log.error("lost the connection to redis: %s; waiting to be restarted", exc)
            while True:
                time.sleep(3600)


def notify(state: str) -> None:
    address = env("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(state.encode(), address)


def main() -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    signal.signal(signal.SIGUSR2, lambda *_: LEAK.set())
    if env("PORT") and not env("PORT").isdigit():
        log.error("invalid PORT %r: not a number", env("PORT"))
        return 2
    try:
        if env("ROLE") == "consumer":
            consume()
        else:
            serve()
    except OSError:
        log.critical("cannot start\n%s", traceback.format_exc().rstrip())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
