"""systemd's side of a socket-activated daemon: the listening socket it passes, and
sd_notify (READY=1, STATUS=..., WATCHDOG=1, STOPPING=1).

Without socket activation (a developer's shell, a test), :func:`bind` makes the socket
at a path instead; :func:`notify` does nothing when systemd did not ask for it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from shared_io.errors import OpsbotError

__all__ = ["listening_socket"]

#: The first file descriptor systemd passes (sd_listen_fds(3)).
SD_LISTEN_FDS_START = 3


def activated_socket() -> socket.socket | None:
    """The one listening socket systemd passed to this process, if it passed one."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        return socket.socket(fileno=SD_LISTEN_FDS_START)
    return None


def bind(path: str | Path, *, mode: int = 0o660, backlog: int = 128) -> socket.socket:
    """A Unix stream socket listening at ``path`` (a stale one there is replaced)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, mode)
    sock.listen(backlog)
    return sock


def listening_socket(socket_path: Path | None, unit: str) -> socket.socket:
    """The socket systemd passed (``unit``'s socket unit), or one bound at
    ``socket_path`` (``--socket``, without socket activation); OpsbotError otherwise."""
    activated = activated_socket()
    if activated is not None:
        return activated
    if socket_path is None:
        raise OpsbotError(f"no socket: start {unit} through {unit}.socket, or pass --socket")
    return bind(socket_path)


def notify(*lines: str) -> None:
    """Tell systemd about this service's state, if it is listening (NOTIFY_SOCKET)."""
    if not os.environ.get("NOTIFY_SOCKET"):
        return
    from systemd import daemon  # imported here: only a daemon under systemd needs it

    daemon.notify("\n".join(lines))
