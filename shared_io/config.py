"""Reading /etc/opsbot/opsbot.toml into shared_schema.OpsbotConfig, for every unit.

A missing file means the defaults (an empty allowlist: opsbot may touch nothing). A file
that cannot be read, is not UTF-8 or TOML, or holds a bad or unknown key is a
:class:`ConfigError` whose message names the file and the key path
(``/etc/opsbot/opsbot.toml: diagnose.health.web.url: ...``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from shared_io.errors import ConfigError
from shared_io.paths import config_path
from shared_schema import OpsbotConfig, field_errors

HINT = "see README.md, 'The config file', for every key and its default"


def load_config(path: Path | None = None) -> OpsbotConfig:
    """The validated configuration at ``path`` (default: :func:`config_path`)."""
    path = config_path() if path is None else path
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return OpsbotConfig()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="the unit's user needs read access to it",
        ) from exc
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})", hint=HINT) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", hint=HINT) from exc
    try:
        return OpsbotConfig.model_validate(document)
    except ValidationError as exc:
        errors = "; ".join(str(error) for error in field_errors(exc))
        raise ConfigError(f"{path}: {errors}", hint=HINT) from exc
