"""Misbehaving clients of opsbot's sockets (runs inside the container; stdlib only).

    python slow_clients.py SOCKET DRIPPERS HOARDERS SECONDS
    python slow_clients.py hold SOCKET CONNECTIONS SECONDS INTERVAL
    python slow_clients.py flood SOCKET SLOW LOOPS SECONDS
    python slow_clients.py page PORT SOURCES PER_SOURCE SECONDS

The first form, on the executor socket: DRIPPERS clients send a valid submit one byte a
second; HOARDERS clients pipeline list requests and never read a reply. Each gives up
after SECONDS. Prints one JSON object: the first reply line each dripper got (or null),
and for each hoarder whether the daemon cut it off (its send failed) and after how long.

``hold``, on the executor socket: CONNECTIONS clients each keep a connection open by
sending a blank line every INTERVAL seconds, and open a new one as soon as theirs is
refused or closed, for SECONDS. Prints the most connections held at once, each refusal's
reason (with how often), and how long each held connection lasted.

``flood``, on the diagnose socket: SLOW clients each send a request a byte every 9 s
(and reconnect when cut off), LOOPS clients ask for a diagnosis of demo-web.service
again and again, for SECONDS. Prints how many diagnoses started for the loops (and most
at once), and each error message (with how often).

``page``, on the approval page at 127.0.0.1:PORT: PER_SOURCE clients from each of the
loopback addresses 127.0.0.1 to 127.0.0.SOURCES keep a connection each, sending a GET
every 4 s (within uvicorn's 5 s keep-alive, and 8 a source stay under 120 a minute), and
connect again as soon as theirs is refused or closed, for SECONDS. Prints a line
``{"holding": N}`` once N (the most connections held at once, each answered) reaches
SOURCES x PER_SOURCE or stops growing for 10 s, then the JSON object: the most held,
connects, refusals and requests answered.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable

SUBMIT = (
    b'{"op":"submit","plan":{"goal":"attack: one byte a second","steps":[{"args":'
    b'{"unit":"demo-web.service"},"tool":"restart_unit"}]},"v":1}\n'
)
LIST = b'{"op":"list","v":1}\n'
DIAGNOSE = b'{"op":"diagnose","unit":"demo-web.service","v":1}\n'


def slow_and_hoarding(path: str, drippers: int, hoarders: int, seconds: float) -> dict[str, object]:
    result: dict[str, list[object]] = {"drip": [], "hoard": []}
    lock = threading.Lock()

    def drip() -> None:
        reply = None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.settimeout(seconds + 5)
            started = time.monotonic()
            try:
                for byte in SUBMIT:
                    if time.monotonic() - started > seconds:
                        break
                    sock.sendall(bytes([byte]))
                    time.sleep(1.0)
            except OSError:
                pass
            try:
                reply = sock.recv(65536).split(b"\n")[0].decode() or None
            except OSError:
                reply = None
        with lock:
            result["drip"].append(reply)

    def hoard() -> None:
        cut = None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.settimeout(seconds + 5)
            started = time.monotonic()
            try:
                while time.monotonic() - started < seconds:
                    sock.sendall(LIST * 500)
            except OSError:
                cut = round(time.monotonic() - started, 2)
        with lock:
            result["hoard"].append(cut)

    run([drip] * drippers + [hoard] * hoarders)
    return dict(result)


def run(targets: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def first_line(sock: socket.socket, timeout: float) -> bytes | None:
    """A line the server sent within ``timeout`` (b"" when it closed); None if none."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except TimeoutError:
        return None if not data else data
    except OSError:
        return data
    return data.split(b"\n")[0]


def hold(path: str, connections: int, seconds: float, interval: float) -> dict[str, object]:
    """Hold as many connections as the executor lets one user hold, by blank lines."""
    end = time.monotonic() + seconds
    lock = threading.Lock()
    state = {"held": 0, "most": 0, "connects": 0}
    refusals: collections.Counter[str] = collections.Counter()
    lasted: list[float] = []

    def holder() -> None:
        while time.monotonic() < end:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                try:
                    sock.connect(path)
                except OSError as exc:
                    with lock:
                        refusals[f"connect: {exc.strerror}"] += 1
                    time.sleep(0.2)
                    continue
                with lock:
                    state["connects"] += 1
                line = first_line(sock, 1.0)
                if line is not None:  # refused at once (or closed)
                    with lock:
                        refusals[reason_of(line)] += 1
                    time.sleep(0.5)
                    continue
                opened = time.monotonic() - 1.0
                with lock:
                    state["held"] += 1
                    state["most"] = max(state["most"], state["held"])
                try:
                    while time.monotonic() < end:
                        sock.sendall(b"\n")
                        line = first_line(sock, min(interval, max(0.01, end - time.monotonic())))
                        if line is not None:  # the executor hung up (or said why)
                            if line:
                                with lock:
                                    refusals[reason_of(line)] += 1
                            with lock:
                                lasted.append(round(time.monotonic() - opened, 1))
                            break
                except OSError:
                    with lock:
                        lasted.append(round(time.monotonic() - opened, 1))
                finally:
                    with lock:
                        state["held"] -= 1

    run([holder] * connections)
    return {
        "most_held": state["most"],
        "connects": state["connects"],
        "refusals": dict(refusals),
        "lasted": sorted(lasted),
    }


def reason_of(line: bytes) -> str:
    with contextlib.suppress(ValueError):
        reply = json.loads(line)
        return str(reply.get("reason") or reply.get("message") or line.decode())
    return line.decode("utf-8", "replace")


def flood(path: str, slow: int, loops: int, seconds: float) -> dict[str, object]:
    """Slow requests and fast loops of diagnoses, from one user."""
    end = time.monotonic() + seconds
    lock = threading.Lock()
    errors: collections.Counter[str] = collections.Counter()
    state = {"started": 0, "verdicts": 0, "running": 0, "most_at_once": 0}

    def trickle() -> None:
        while time.monotonic() < end:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                try:
                    sock.connect(path)
                    for byte in DIAGNOSE:
                        if time.monotonic() >= end:
                            break
                        sock.sendall(bytes([byte]))
                        line = first_line(sock, min(9.0, max(0.01, end - time.monotonic())))
                        if line is not None:
                            break
                except OSError:
                    time.sleep(0.2)

    def loop() -> None:
        while time.monotonic() < end:
            running = False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(60)
                buffer = b""
                try:
                    sock.connect(path)
                    sock.sendall(DIAGNOSE)
                    while chunk := sock.recv(65536):
                        buffer += chunk
                        *lines, buffer = buffer.split(b"\n")
                        for raw in lines:
                            running = seen(json.loads(raw), running)
                except OSError:
                    pass
                if buffer.strip():
                    running = seen(json.loads(buffer), running)
            if running:
                with lock:
                    state["running"] -= 1
            time.sleep(0.05)

    def seen(item: dict[str, object], running: bool) -> bool:
        """Count one line of a loop's answer; whether its diagnosis is running."""
        with lock:
            if item.get("event") == "diagnose.started":
                state["started"] += 1
                state["running"] += 1
                state["most_at_once"] = max(state["most_at_once"], state["running"])
                return True
            if item.get("event") == "diagnose.verdict":
                state["verdicts"] += 1
            elif item.get("event") == "diagnose.error":
                errors[str(item.get("message"))] += 1
        return running

    run([trickle] * slow + [loop] * loops)
    del state["running"]
    return {**state, "errors": dict(errors)}


PAGE_GET = b"GET /nothing-here HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def answered(sock: socket.socket) -> bool:
    """Whether the page answered PAGE_GET on ``sock`` (a whole response read)."""
    sock.sendall(PAGE_GET)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True


def hold_page(port: int, sources: int, per_source: int, seconds: float) -> dict[str, object]:
    """Hold as many of the page's connections as loopback addresses let a local user."""
    end = time.monotonic() + seconds
    target = sources * per_source
    lock = threading.Lock()
    state = {"held": 0, "most": 0, "connects": 0, "answered": 0}
    refusals: collections.Counter[str] = collections.Counter()
    grew = [time.monotonic()]

    def holder(source: str) -> None:
        while time.monotonic() < end:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                held = False
                try:
                    sock.bind((source, 0))
                    sock.connect(("127.0.0.1", port))
                    with lock:
                        state["connects"] += 1
                    while time.monotonic() < end and answered(sock):
                        with lock:
                            state["answered"] += 1
                            if not held:
                                held = True
                                state["held"] += 1
                                if state["held"] > state["most"]:
                                    state["most"] = state["held"]
                                    grew[0] = time.monotonic()
                        time.sleep(min(4.0, max(0.0, end - time.monotonic())))
                    if time.monotonic() < end:
                        with lock:
                            refusals["closed" if held else "refused"] += 1
                except OSError as exc:
                    with lock:
                        refusals[f"{'closed' if held else 'refused'}: {exc.strerror}"] += 1
                finally:
                    if held:
                        with lock:
                            state["held"] -= 1
            time.sleep(0.2)

    def herald() -> None:
        while time.monotonic() < end:
            with lock:
                most, since = state["most"], time.monotonic() - grew[0]
            if most >= target or (most and since > 10):
                break
            time.sleep(0.1)
        print(json.dumps({"holding": most}), flush=True)

    addresses = [f"127.0.0.{n}" for n in range(1, sources + 1)]
    run([lambda a=a: holder(a) for a in addresses for _ in range(per_source)] + [herald])
    return {
        "most_held": state["most"],
        "connects": state["connects"],
        "answered": state["answered"],
        "refusals": dict(refusals),
    }


def main() -> int:
    if sys.argv[1] == "page":
        port, sources, per_source, seconds = sys.argv[2:6]
        result = hold_page(int(port), int(sources), int(per_source), float(seconds))
    elif sys.argv[1] == "hold":
        path, count, seconds, interval = sys.argv[2:6]
        result = hold(path, int(count), float(seconds), float(interval))
    elif sys.argv[1] == "flood":
        path, slow, loops, seconds = sys.argv[2:6]
        result = flood(path, int(slow), int(loops), float(seconds))
    else:
        path, drippers, hoarders, seconds = sys.argv[1:5]
        result = slow_and_hoarding(path, int(drippers), int(hoarders), float(seconds))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
