"""Send stdin's bytes to a Unix socket as they are and print every line that comes back
until the server closes (runs inside a container, as any user):

    python socket_client.py SOCKET < message

The bytes are sent raw, for the attack tests that send what no client would; the reply
is read with opsbot's own framing. Exit status 3 when the connection itself is refused
(the kernel said no), with the error on stderr.
"""

import socket
import sys

from shared_io.errors import SocketUnavailable
from shared_io.framing import LineReader, connect

REPLY_LIMIT = 16 * 1024 * 1024
TIMEOUT = 30.0


def main() -> int:
    path = sys.argv[1]
    data = sys.stdin.buffer.read()
    try:
        sock = connect(path, TIMEOUT)
    except SocketUnavailable as exc:
        said = getattr(exc.__cause__, "strerror", None) or exc.what
        print(f"connect: {said}", file=sys.stderr)
        return 3
    with sock:
        if data:
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        reader = LineReader(sock, REPLY_LIMIT)
        while (line := reader.readline(TIMEOUT)) is not None:
            sys.stdout.write(line.decode("utf-8", "replace") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
