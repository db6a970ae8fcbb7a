"""One node of a generated service graph (testbed/graph.py): an HTTP service on
127.0.0.1 that is healthy only when the nodes it depends on are.

    node.py --config /etc/opsbot-graph/NAME.json          serve (Type=notify)
    node.py --config /etc/opsbot-graph/NAME.json --check  check the config, exit 0 or 1
    node.py --config /etc/opsbot-graph/NAME.json --once   a job (Type=oneshot, run by a
                                                          timer): every upstream's
                                                          /healthz once, exit 0 or 1

The config (JSON): ``name``, ``port``, ``upstreams`` (ports of the nodes it depends on),
``role`` ("proxy": ``GET /`` is passed to its first upstream; else an app or a store),
``upstream_timeout`` (seconds), ``maintenance`` (answer 503 while true), ``state_dir``
(where it writes a state file at start), ``balance`` (true: healthy while any upstream
is, as a load balancer routes around a member that is down). Stdlib only, run by
Debian's /usr/bin/python3.

``GET /healthz``: 200 when not in maintenance and every upstream's /healthz answers 200
within ``upstream_timeout``, else 503 (or, for a proxy, what its first upstream's failure
is: 502 refused, 504 timed out). Every request line is logged to stdout (the journal), so
any client can put text into this unit's journal: that is the point of some faults.
Signals: SIGHUP reloads the config (a bad one is logged and the old kept); SIGUSR1 makes
every answer take 5 s (a slow service, in memory until it restarts). Environment
NODE_MODE must be "prod" or "dev", else it exits 1 at once saying so; NODE_CRASH_AFTER=N
makes it exit 1 N seconds after it is ready (a fix that cannot hold);
NODE_NEEDS_UPSTREAMS=1 makes it exit 1 at start when an upstream refuses a connection (a
client that loops under Restart=always while its backend is down). ``session`` (true in
the config): it holds one connection to its first upstream, opened at start (tried
again until it opens); once that connection is lost (the backend died), every answer is
503 "lost its session" until the node is restarted, whatever the backend does meanwhile
(a client that keeps a dead session, as some do). Socket-activated, it
serves on the socket systemd passes (fd 3); under WatchdogSec= it pings the watchdog.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

MODES = ("prod", "dev")
SLOW_SECONDS = 5.0
REQUIRED = ("name", "port", "upstreams", "role")


def notify(state: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(state.encode())


def load(path: str) -> dict[str, Any]:
    """The config, or SystemExit with one clear line (the file, and what is wrong)."""
    try:
        with open(path) as handle:
            config: dict[str, Any] = json.load(handle)
    except PermissionError as exc:
        raise SystemExit(f"cannot read {path}: {exc.strerror} (errno {exc.errno})") from exc
    except FileNotFoundError as exc:
        raise SystemExit(f"cannot read {path}: No such file or directory") from exc
    except ValueError as exc:
        raise SystemExit(f"{path}: invalid configuration: {exc}") from exc
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        raise SystemExit(f"{path}: invalid configuration: missing {', '.join(missing)}")
    return config


class State:
    config: dict[str, Any] = {}
    slow = False
    session = ""  # "open", then "lost" (config "session")


def get(port: int, path: str, timeout: float) -> int:
    """The status of GET http://127.0.0.1:PORT/PATH; 502 refused, 504 timed out."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except ConnectionRefusedError:
        return 502
    except TimeoutError:
        return 504
    except OSError:
        return 502
    finally:
        conn.close()


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "opsbot-graph-node/1"

    def log_message(self, format: str, *args: Any) -> None:
        print(f"{State.config.get('name')}: {self.address_string()} {format % args}", flush=True)

    def reply(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if State.slow:
            time.sleep(SLOW_SECONDS)
        config = State.config
        timeout = float(config.get("upstream_timeout", 1.5))
        if config.get("session") and State.session != "open":
            why = "lost its session to" if State.session == "lost" else "has no session yet to"
            self.reply(503, f"{config['name']} {why} :{config['upstreams'][0]}\n")
            return
        if self.path == "/healthz":
            if config.get("maintenance"):
                self.reply(503, "in maintenance\n")
                return
            if config.get("balance"):
                answers = [get(int(p), "/healthz", timeout) for p in config["upstreams"]]
                if 200 in answers:
                    # A balancer routes around a member that is down: still 200.
                    up = answers.count(200)
                    self.reply(200, f"ok ({up} of {len(answers)} upstreams)\n")
                    return
            for port in config["upstreams"]:
                status = get(int(port), "/healthz", timeout)
                if status != 200:
                    relayed = status if config["role"] == "proxy" else 503
                    self.reply(relayed, f"upstream :{port} answered {status}\n")
                    return
            self.reply(200, "ok\n")
            return
        if config["role"] == "proxy" and config["upstreams"]:
            status = get(int(config["upstreams"][0]), self.path, timeout)
            self.reply(status if status != 200 else 200, f"proxied: {status}\n")
            return
        self.reply(200, f"hello from {config['name']}\n")


def hold_session(name: str, port: int) -> None:
    """Open one connection to 127.0.0.1:PORT (again and again until it opens) and keep
    it; when the peer closes it, the session is lost for good."""
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
            break
        except OSError:
            time.sleep(0.5)
    sock.settimeout(None)
    State.session = "open"
    print(f"{name}: session to :{port} open", flush=True)
    try:
        while sock.recv(1024):
            pass
    except OSError:
        pass
    State.session = "lost"
    print(f"{name}: lost its session to :{port}; answering 503 until restarted", flush=True)


def main() -> int:
    args = sys.argv[1:]
    path = args[args.index("--config") + 1]
    config = load(path)
    if "--check" in args:
        print(f"{path}: configuration ok")
        return 0
    if "--once" in args:
        for port in config["upstreams"]:
            status = get(int(port), "/healthz", float(config["upstream_timeout"]))
            if status != 200:
                print(f"{config['name']}: upstream 127.0.0.1:{port} answered {status}; job failed")
                return 1
        print(f"{config['name']}: job done")
        return 0
    mode = os.environ.get("NODE_MODE", "prod")
    if mode not in MODES:
        print(f"{config['name']}: invalid NODE_MODE={mode!r}: must be one of {MODES}", flush=True)
        return 1
    state_dir = config.get("state_dir")
    if state_dir:
        try:
            with open(os.path.join(state_dir, "started"), "w") as handle:
                handle.write(f"{time.time()}\n" + "x" * 4096)
        except OSError as exc:
            print(f"{config['name']}: cannot write {state_dir}/started: {exc.strerror}", flush=True)
            return 1
    if os.environ.get("NODE_NEEDS_UPSTREAMS") == "1":
        for port in config["upstreams"]:
            try:
                socket.create_connection(("127.0.0.1", int(port)), timeout=1.0).close()
            except OSError as exc:
                print(
                    f"{config['name']}: cannot reach its upstream 127.0.0.1:{port}: "
                    f"{exc.strerror or exc}; exiting",
                    flush=True,
                )
                return 1
    State.config = config
    try:
        if os.environ.get("LISTEN_FDS") == "1" and os.environ.get("LISTEN_PID") == str(os.getpid()):
            # Socket-activated: systemd passes the listening socket as fd 3.
            server = http.server.ThreadingHTTPServer(
                ("127.0.0.1", int(config["port"])), Handler, bind_and_activate=False
            )
            server.socket = socket.socket(fileno=3)
        else:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", int(config["port"])), Handler)
    except OSError as exc:
        print(
            f"{config['name']}: cannot listen on 127.0.0.1:{config['port']}: {exc.strerror}",
            flush=True,
        )
        return 1
    server.daemon_threads = True

    def reload(signum: int, frame: object) -> None:
        try:
            State.config = load(path)
            print(f"{config['name']}: configuration reloaded", flush=True)
        except SystemExit as exc:
            print(f"{config['name']}: reload refused: {exc}", flush=True)

    def slow(signum: int, frame: object) -> None:
        State.slow = True

    signal.signal(signal.SIGHUP, reload)
    signal.signal(signal.SIGUSR1, slow)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    notify("READY=1")
    print(f"{config['name']}: listening on 127.0.0.1:{config['port']}", flush=True)
    watchdog = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
    if watchdog:

        def ping() -> None:  # WatchdogSec=: a ping at a third of it, from a thread
            while True:  # that stops with the process (SIGSTOP: no ping, a watchdog kill)
                notify("WATCHDOG=1")
                time.sleep(watchdog / 3e6)

        threading.Thread(target=ping, daemon=True).start()
    crash_after = os.environ.get("NODE_CRASH_AFTER")
    if crash_after:

        def crash() -> None:
            time.sleep(float(crash_after))
            print(f"{config['name']}: lost its upstream connection pool; exiting", flush=True)
            os._exit(1)

        threading.Thread(target=crash, daemon=True).start()
    if config.get("session") and config["upstreams"]:
        session = (config["name"], int(config["upstreams"][0]))
        threading.Thread(target=hold_session, args=session, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
