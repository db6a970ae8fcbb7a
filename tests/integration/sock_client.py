"""Send raw bytes to a Unix socket and print what comes back (runs inside the container).

    python sock_client.py SOCKET < message
Stdlib only, so any user in the container can run it with any Python. Exit status 3 when
the connection itself is refused (the kernel said no), with the error on stderr.
"""

import socket
import sys


def main() -> int:
    path = sys.argv[1]
    data = sys.stdin.buffer.read()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(path)
    except OSError as exc:
        print(f"connect: {exc.strerror}", file=sys.stderr)
        return 3
    with sock:
        if data:
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    sys.stdout.write(b"".join(chunks).decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
