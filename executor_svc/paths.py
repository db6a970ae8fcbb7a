"""Where the executor keeps things. Each path can be moved by an environment variable
(used by tests and by operators with unusual layouts); the defaults match units/."""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Paths:
    config: Path
    state_dir: Path
    approvals_dir: Path
    socket: Path
    diagnose_socket: Path

    @classmethod
    def from_env(cls) -> "Paths":
        env = os.environ
        return cls(
            config=Path(env.get("OPSBOT_CONFIG", "/etc/opsbot/opsbot.toml")),
            state_dir=Path(env.get("OPSBOT_STATE_DIR", "/var/lib/opsbot")),
            approvals_dir=Path(env.get("OPSBOT_APPROVALS_DIR", "/var/lib/opsbot-approvals")),
            socket=Path(env.get("OPSBOT_SOCKET", "/run/opsbot/executor.sock")),
            diagnose_socket=Path(env.get("OPSBOT_DIAGNOSE_SOCKET", "/run/opsbot/diagnose.sock")),
        )
