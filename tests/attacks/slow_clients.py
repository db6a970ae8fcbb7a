"""Misbehaving clients of the executor socket (runs inside the container; stdlib only).

    python slow_clients.py SOCKET DRIPPERS HOARDERS SECONDS

DRIPPERS clients send a valid submit one byte a second; HOARDERS clients pipeline list
requests and never read a reply. Each gives up after SECONDS. Prints one JSON object:
the first reply line each dripper got (or null), and for each hoarder whether the daemon
cut it off (its send failed) and after how long.
"""

import json
import socket
import sys
import threading
import time

SUBMIT = (
    b'{"op":"submit","plan":{"goal":"attack: one byte a second","steps":[{"args":'
    b'{"unit":"demo-web.service"},"tool":"restart_unit"}]},"v":1}\n'
)
LIST = b'{"op":"list","v":1}\n'


def main() -> int:
    path, drippers, hoarders, seconds = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
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

    threads = [threading.Thread(target=drip) for _ in range(drippers)]
    threads += [threading.Thread(target=hoard) for _ in range(hoarders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
