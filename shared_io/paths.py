"""Where opsbot keeps things. Each path can be moved by an environment variable (tests,
and operators with unusual layouts use them); the defaults match units/."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULTS", "Paths", "config_path"]

DEFAULTS = {
    "OPSBOT_CONFIG": "/etc/opsbot/opsbot.toml",
    "OPSBOT_STATE_DIR": "/var/lib/opsbot",
    "OPSBOT_APPROVALS_DIR": "/var/lib/opsbot-approvals",
    "OPSBOT_SOCKET": "/run/opsbot/executor.sock",
    "OPSBOT_DIAGNOSE_SOCKET": "/run/opsbot/diagnose.sock",
}


def _get(env: Mapping[str, str], name: str) -> Path:
    return Path(env.get(name) or DEFAULTS[name])


@dataclass(frozen=True)
class Paths:
    config: Path
    state_dir: Path
    approvals_dir: Path
    executor_socket: Path
    diagnose_socket: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if env is None else env
        return cls(
            config=_get(env, "OPSBOT_CONFIG"),
            state_dir=_get(env, "OPSBOT_STATE_DIR"),
            approvals_dir=_get(env, "OPSBOT_APPROVALS_DIR"),
            executor_socket=_get(env, "OPSBOT_SOCKET"),
            diagnose_socket=_get(env, "OPSBOT_DIAGNOSE_SOCKET"),
        )


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the configuration is read from: $OPSBOT_CONFIG, else /etc/opsbot/opsbot.toml."""
    return _get(os.environ if env is None else env, "OPSBOT_CONFIG")


def approver_socket_path(env: Mapping[str, str] | None = None) -> Path:
    """Where root's opsbot-approver listens: $OPSBOT_APPROVER_SOCKET, else
    /run/opsbot/approver.sock."""
    env = os.environ if env is None else env
    return Path(env.get("OPSBOT_APPROVER_SOCKET") or "/run/opsbot/approver.sock")
