"""The floor for a submit: a bare threaded Unix-socket server that, for each line it gets,
writes a file of that size and fsyncs it, then echoes the line back.

    echo_server.py SOCKET DIRECTORY

Threaded like opsbot-executor (one thread per connection, opsbot's own bounded line
reader); no parsing, no validation, no logging. Runs until SIGTERM.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import sys
import threading

from shared_io.framing import LineReader
from shared_schema import MAX_MESSAGE_BYTES

MESSAGE_TIMEOUT = 10.0


def serve(conn: socket.socket, directory: str, counter: itertools.count[int]) -> None:
    reader = LineReader(conn, MAX_MESSAGE_BYTES)
    with conn:
        while True:
            line = reader.readline(MESSAGE_TIMEOUT)
            if line is None:
                return
            path = os.path.join(directory, f"{next(counter)}.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
            try:
                os.write(fd, line + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            conn.sendall(line + b"\n")


def main() -> int:
    path, directory = sys.argv[1], sys.argv[2]
    os.makedirs(directory, exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(256)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    counter = itertools.count()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, directory, counter), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
