"""Reading /etc/opsbot/opsbot.toml into shared_schema.OpsbotConfig.

The path can be overridden with the environment variable ``OPSBOT_CONFIG``. A missing
file means the defaults; a file that is not TOML, or holds a bad or unknown key, is a
ConfigError whose message names the key path (``diagnose.health.web.url: ...``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from diagnose_svc.errors import ConfigError
from shared_schema import OpsbotConfig, field_errors

DEFAULT_CONFIG_PATH = Path("/etc/opsbot/opsbot.toml")
CONFIG_PATH_VARIABLE = "OPSBOT_CONFIG"


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the configuration is read from: $OPSBOT_CONFIG, else /etc/opsbot/opsbot.toml."""
    override = environ.get(CONFIG_PATH_VARIABLE, "")
    return Path(override) if override else DEFAULT_CONFIG_PATH


def load_config(path: Path | None = None) -> OpsbotConfig:
    """Read and validate the configuration; defaults when the file does not exist."""
    path = config_path() if path is None else path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return OpsbotConfig()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="the diagnose user needs read access to it",
        ) from exc
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 (byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    try:
        return OpsbotConfig.model_validate(document)
    except ValidationError as exc:
        errors = field_errors(exc)
        raise ConfigError(
            "; ".join(str(error) for error in errors),
            hint=f"fix {path}",
        ) from exc
