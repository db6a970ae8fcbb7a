"""What every opsbot unit does on the host, written once: run a program, log to the
journal, frame a socket message, take a socket from systemd, read the config file, read
a unit's state, keep a file.

    errors       OpsbotError (message, hint, exit status) and the errors below it
    run          the one subprocess runner: argv only, bounded in time and output
    log          structlog to journald, the same field names on every unit
    framing      newline-delimited messages on Unix sockets: size limits and deadlines
    activation   the listening socket systemd passes, and sd_notify
    server       a threaded accept loop with a bounded number of connections
    admission    who may hold one more connection: per user, a reserve, a total
    config       /etc/opsbot/opsbot.toml read into shared_schema.OpsbotConfig
    paths        where things live, each movable by an environment variable
    unit_show    ``systemctl show``, the one reader of a unit's state
    live_config  the config file read again when it changed, for a daemon
    files        files written atomically and durably, read without following a link
    exports      a package's public names, loaded when first used

No write tool and no policy lives here: the diagnosis half imports this package too.
Names are exported here and loaded when first used, so that importing one imports only
what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.exports import lazy_exports

if TYPE_CHECKING:
    from shared_io.activation import listening_socket
    from shared_io.config import load_config
    from shared_io.errors import (
        CommandFailed,
        ConfigError,
        OpsbotError,
        PeerProtocolError,
        SocketUnavailable,
        StoreError,
        UnitStateError,
    )
    from shared_io.files import fsync_dir, read_bounded, write_atomic
    from shared_io.paths import DEFAULTS, Paths, config_path
    from shared_io.run import RunResult, run
    from shared_io.unit_show import UnitProperties, UnitState, read_unit_state, show

#: Each module and the names it exports here.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "shared_io.activation": ("listening_socket",),
    "shared_io.config": ("load_config",),
    "shared_io.errors": (
        "CommandFailed",
        "ConfigError",
        "OpsbotError",
        "PeerProtocolError",
        "SocketUnavailable",
        "StoreError",
        "UnitStateError",
    ),
    "shared_io.files": ("fsync_dir", "read_bounded", "write_atomic"),
    "shared_io.paths": ("DEFAULTS", "Paths", "config_path"),
    "shared_io.run": ("RunResult", "run"),
    "shared_io.unit_show": ("UnitProperties", "UnitState", "read_unit_state", "show"),
}
__all__ = [
    "CommandFailed",
    "ConfigError",
    "DEFAULTS",
    "OpsbotError",
    "Paths",
    "PeerProtocolError",
    "RunResult",
    "SocketUnavailable",
    "StoreError",
    "UnitProperties",
    "UnitState",
    "UnitStateError",
    "config_path",
    "fsync_dir",
    "listening_socket",
    "load_config",
    "read_bounded",
    "read_unit_state",
    "run",
    "show",
    "write_atomic",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
