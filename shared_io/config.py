"""Reading /etc/opsbot/opsbot.toml into shared_schema.OpsbotConfig, for every unit.

A missing file means the defaults (an empty allowlist: opsbot may touch nothing). A file
not owned by root, or writable by group or others (shared_io/trusted.py), or one that
cannot be read, is not UTF-8 or TOML, or holds a bad or unknown key is a
:class:`ConfigError` whose message names the file, the line and the key path
(``/etc/opsbot/opsbot.toml:12: diagnose.max_step: unknown key (did you mean
max_steps?)``; shared_io/_config_lines.py finds the line), each further error as
``line N: KEY.PATH: ...``, in the order of the file.

A daemon that lives across edits of the file holds a shared_io.live_config.LiveConfig.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

from pydantic import ValidationError

from shared_io._config_lines import Located, located
from shared_io.errors import ConfigError
from shared_io.paths import config_path
from shared_io.trusted import untrusted_parent, untrusted_reason
from shared_schema import OpsbotConfig

__all__ = ["load_config"]

HINT = "see docs/operating.md, 'The config file', for every key and its default"
#: Far more than any real config; a bigger file is a mistake, not a config.
MAX_CONFIG_BYTES = 1 << 20


def load_config(path: Path | None = None) -> OpsbotConfig:
    """The validated configuration at ``path`` (default: :func:`config_path`)."""
    return load_with_digest(config_path() if path is None else path)[0]


def load_with_digest(path: Path) -> tuple[OpsbotConfig, str]:
    """The configuration at ``path`` and the sha256 of the bytes it was read from."""
    try:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return OpsbotConfig(), hashlib.sha256(b"").hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="the unit's user needs read access to it",
        ) from exc
    # The directory of the file itself, and of the link to it if it is one: whoever may
    # write either may put another file in its place.
    real = Path(os.path.realpath(path))
    reason = untrusted_reason(path, st) or untrusted_parent(path) or untrusted_parent(real)
    if reason:
        raise ConfigError(reason)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes", hint=HINT)
    try:
        text = raw.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})", hint=HINT) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", hint=HINT) from exc
    try:
        return OpsbotConfig.model_validate(document), hashlib.sha256(raw).hexdigest()
    except ValidationError as exc:
        raise ConfigError(
            _said(path, located(exc, text, document, OpsbotConfig)), hint=HINT
        ) from exc


def _said(path: Path, errors: list[Located]) -> str:
    """``FILE:LINE: KEY: MESSAGE``, then ``; line N: KEY: MESSAGE`` for each further
    error (``FILE: KEY: ...`` and ``; KEY: ...`` where the line is not known)."""
    said = []
    for index, error in enumerate(errors):
        where = str(path) if index == 0 else ""
        if error.line is not None:
            where = f"{where}:{error.line}" if index == 0 else f"line {error.line}"
        text = f"{error.path}: {error.message}" if error.path else error.message
        said.append(f"{where}: {text}" if where else text)
    return "; ".join(said)
