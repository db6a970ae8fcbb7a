"""Reading the executor's policy from /etc/opsbot/opsbot.toml."""

import tomllib
from pathlib import Path

from pydantic import ValidationError

from executor_svc.errors import ConfigError
from shared_schema import OpsbotConfig, field_errors


def load_config(path: Path) -> OpsbotConfig:
    """The validated config; a missing file means defaults (an empty allowlist)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return OpsbotConfig()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return OpsbotConfig.model_validate(data)
    except ValidationError as exc:
        errors = field_errors(exc)
        raise ConfigError(
            f"{path}: " + "; ".join(str(e) for e in errors),
            hint="see README.md, 'The config file', for every key and its default",
        ) from exc
