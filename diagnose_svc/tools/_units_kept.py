"""Where the host's services, as _host_units read them, are kept between the diagnose
user's processes: ``units.json`` in its state directory (``StateDirectory=
opsbot-diagnose``, 0700, its alone), so a diagnosis started for a failed unit (its own
process) or a verification run does not show every service again. Written atomically,
only by a process systemd gave that directory (``$STATE_DIRECTORY``); read back only
in the same boot, whole and in its shape, else ignored (read anew): it is a cache, never
evidence, and what it says is checked against systemd's counters and each file's stamp
before it is used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared_io.errors import StoreError
from shared_io.files import write_atomic

log = structlog.get_logger("opsbot.diagnose.units")

NAME = "units.json"
#: Read at most (about 300 bytes a service: 100,000 services).
MAX_BYTES = 32 * 1024 * 1024

Stamp = tuple[int, int, int] | None


class KeptDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    unit: str
    environment: list[str]
    commands: list[list[str]]
    environment_files: list[tuple[str, bool]]
    runtime_directories: list[str]
    files: list[tuple[str, Stamp]]


class KeptRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    listen: str
    unit: str
    activates: str = ""


class Kept(BaseModel):
    """What one process read, for the next (see _host_units.HostUnits)."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    boot: str
    stamp: tuple[str, str, Stamp]
    names: list[str]
    definitions: list[KeptDefinition]
    dirs: dict[str, tuple[Stamp, list[str]]] = Field(default_factory=dict)
    dropins: dict[str, Stamp] = Field(default_factory=dict)
    sockets: list[KeptRow] | None = None


def where() -> Path | None:
    """The file, when systemd gave this process the state directory; else None (a test,
    an operator's shell: nothing is kept)."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return Path(state) / NAME if state else None


def load(boot: str) -> Kept | None:
    """What the last process kept, for this boot (``boot``: when its userspace started);
    None when there is none, it is another boot's, or it is not whole (it is read anew)."""
    path = where()
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        log.warning("units.kept_too_big", path=str(path))
        return None
    try:
        kept = Kept.model_validate_json(data)
    except ValidationError:
        log.warning("units.kept_unreadable", path=str(path))
        return None
    return kept if boot and kept.boot == boot else None


def save(kept: Mapping[str, Any]) -> None:
    """Keep ``kept`` (:class:`Kept`'s shape, as plain data) for the next process (nothing
    when there is no state directory, or it cannot be written: the next one reads anew)."""
    path = where()
    if path is None:
        return
    try:
        write_atomic(path, json.dumps(kept, separators=(",", ":")).encode(), mode=0o600)
    except StoreError as exc:
        log.warning("units.kept_not_written", why=exc.message)
