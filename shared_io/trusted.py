"""Files that decide what opsbot may do must be root's: the config and its credentials.

A config an operator can write widens the allowlist and, through ``opsbot polkit-rule``,
the polkit rule; so every entry point refuses a config file (and a credential file) that
is not owned by root, or that group or others may write, and one in a directory others
may write (they could put another file in its place). The error is one line naming the
file and the command that fixes it.

A process that is not root may also trust a file of its own uid: it gives that process
nothing it could not do already (development, tests). Credentials that systemd passes
in ``$CREDENTIALS_DIRECTORY`` belong to the unit's user, read-only: they pass too.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def untrusted_reason(
    path: Path, st: os.stat_result, *, is_dir: bool = False, secret: bool = False
) -> str | None:
    """Why ``path`` (with ``st``, from fstat or lstat) may not be trusted, or None;
    ``secret`` for a key file (the fix it names is then mode 0600)."""
    euid = os.geteuid()
    what = "directory" if is_dir else "file"
    fix_mode = "0755" if is_dir else "0600" if secret else "0644"
    fix = f"fix: chown root:root {path} && chmod {fix_mode} {path}"
    if st.st_uid != 0 and not (euid != 0 and st.st_uid == euid):
        return (
            f"{path} is owned by {_owner(st.st_uid)}, not root; "
            f"opsbot refuses a {what} others can change ({fix})"
        )
    if st.st_mode & 0o022:
        return (
            f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"opsbot refuses a {what} others can change ({fix})"
        )
    return None


def untrusted_parent(path: Path) -> str | None:
    """Why the directory holding ``path`` may not be trusted, or None (also when it is
    missing: then so is the file)."""
    parent = path.parent
    try:
        st = os.stat(parent)
    except OSError:
        return None
    if st.st_mode & stat.S_ISVTX and st.st_uid == 0:
        return None  # /tmp-like: others cannot replace a file they do not own
    return untrusted_reason(parent, st, is_dir=True)
