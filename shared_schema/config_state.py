"""What a running daemon says of its configuration when ``opsbot check-config`` asks: the
digest of the file in force, the digest of the file it started from (what it reads only
at start came from that one), the error of an edit that did not load, and the keys it
reads only at start whose value in force differs from the one it started with (a
restart takes them). Each socket wraps it in its own kind of message."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shared_schema._model import Model
from shared_schema.units import Sha256Hex

KeyPath = Annotated[str, Field(max_length=100)]


class ConfigState(Model):
    digest: Sha256Hex
    started_digest: Sha256Hex
    #: The message of the last edit that did not load ("" once one loaded).
    error: Annotated[str, Field(max_length=2000)] = ""
    #: Keys read only at start whose value now differs: a restart takes them.
    restart_keys: Annotated[list[KeyPath], Field(max_length=32)] = []
