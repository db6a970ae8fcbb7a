"""Who may hold one more connection to an opsbot socket, decided in the accept loop from
the peer's uid (SO_PEERCRED) before a byte of its message is read.

Three limits, checked in this order:

``per_uid``
    one user (uid) holds at most this many connections at once;
``shared``
    the users that are not *privileged* hold together at most ``total - reserved``, so
    ``reserved`` connections stay for the privileged ones whatever the others do;
``total``
    the server holds at most ``total`` connections at once.

A privileged uid (the executor's: its diagnose user and root) is bound only by
``total``: it may use the reserve and the shared room alike. :class:`Refusal` says which
limit a refused connection met, for the server's one-line answer.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Limit = Literal["per_uid", "shared", "total"]


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process on the other end, as the kernel says."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def peer_uid(conn: socket.socket) -> int:
    return peer_credentials(conn)[1]


def _nobody_is_privileged(uid: int) -> bool:
    return False


@dataclass(frozen=True)
class Admitted:
    """One connection let in; hand it back to :meth:`Admission.release` when it ends."""

    uid: int
    privileged: bool


@dataclass(frozen=True)
class Refusal:
    """A connection refused: which ``limit`` it met, whose (``uid``), and the number."""

    limit: Limit
    uid: int
    allowed: int


class Admission:
    """Connection counts per uid against the three limits; thread-safe."""

    def __init__(
        self,
        *,
        total: int,
        per_uid: int,
        reserved: int = 0,
        privileged: Callable[[int], bool] = _nobody_is_privileged,
    ) -> None:
        if not 0 <= reserved < total:
            raise ValueError(f"reserved ({reserved}) must be at least 0 and less than {total}")
        self.total = total
        self.per_uid = per_uid
        self.reserved = reserved
        self.privileged = privileged
        self._held: dict[int, int] = {}
        self._shared_held = 0
        self._lock = threading.Lock()

    @property
    def shared(self) -> int:
        """How many connections the users that are not privileged may hold together."""
        return self.total - self.reserved

    @property
    def active(self) -> int:
        with self._lock:
            return sum(self._held.values())

    def held(self, uid: int) -> int:
        with self._lock:
            return self._held.get(uid, 0)

    def admit(self, uid: int) -> Admitted | Refusal:
        """Count one more connection of ``uid``, or say which limit refuses it."""
        privileged = self.privileged(uid)
        with self._lock:
            held = self._held.get(uid, 0)
            if not privileged:
                if held >= self.per_uid:
                    return Refusal("per_uid", uid, self.per_uid)
                if self._shared_held >= self.shared:
                    return Refusal("shared", uid, self.shared)
            if sum(self._held.values()) >= self.total:
                return Refusal("total", uid, self.total)
            self._held[uid] = held + 1
            if not privileged:
                self._shared_held += 1
        return Admitted(uid, privileged)

    def release(self, admitted: Admitted) -> None:
        """A connection that :meth:`admit` let in has ended."""
        uid = admitted.uid
        with self._lock:
            held = self._held.get(uid, 0)
            if held <= 0:
                raise RuntimeError(f"uid {uid} released a connection it does not hold")
            if held == 1:
                del self._held[uid]
            else:
                self._held[uid] = held - 1
            if not admitted.privileged:
                self._shared_held -= 1
