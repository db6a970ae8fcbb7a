"""Who is on the other end of the socket, as the kernel says (SO_PEERCRED), and what
they may do. Decided before a byte of their message is read."""

import grp
import os
import pwd
import socket
from dataclasses import dataclass
from enum import Enum

from shared_io.admission import peer_credentials

__all__ = ["ALLOWED_OPS", "Peer", "Role", "Roles"]


class Role(Enum):
    ROOT = "root"  # everything
    DIAGNOSE = "diagnose"  # submit; pending and verify (opsbot-verify)
    OPERATOR = "operator"  # list, show
    NOBODY = "nobody"  # refused before parsing


ALLOWED_OPS: dict[Role, frozenset[str]] = {
    Role.ROOT: frozenset({"submit", "list", "show", "pending", "verify", "config"}),
    Role.DIAGNOSE: frozenset({"submit", "pending", "verify"}),
    Role.OPERATOR: frozenset({"list", "show", "config"}),
    Role.NOBODY: frozenset(),
}


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int
    user: str
    role: Role


def user_name(uid: int) -> str:
    """The user's name, or ``uid:N`` for a uid without one."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid:{uid}"


@dataclass(frozen=True)
class Roles:
    """Resolves a uid to a role from the diagnose user's name and the operators group."""

    diagnose_user: str
    operators_group: str

    def role_of(self, uid: int, gid: int, name: str | None = None) -> Role:
        """``name``: the uid's user name, where the caller looked it up already."""
        if uid == 0:
            return Role.ROOT
        name = user_name(uid) if name is None else name
        if name == self.diagnose_user:
            return Role.DIAGNOSE
        try:
            operators = grp.getgrnam(self.operators_group).gr_gid
        except KeyError:
            return Role.NOBODY
        try:
            groups = os.getgrouplist(name, gid)
        except (KeyError, OSError):
            groups = [gid]
        return Role.OPERATOR if operators in groups else Role.NOBODY

    def identify(self, conn: socket.socket) -> Peer:
        pid, uid, gid = peer_credentials(conn)
        name = user_name(uid)  # once a connection: each lookup reads the user database
        return Peer(pid, uid, gid, name, self.role_of(uid, gid, name))
