"""What a running daemon says of its configuration when ``opsbot check-config`` asks: the
digest of the file in force, the digest of the file it started from (what it reads only
at start came from that one), the error of an edit that did not load, and the keys it
reads only at start whose value in force differs from the one it started with (a
restart takes them). Each socket wraps it in its own kind of message."""

from __future__ import annotations

import re
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


# -- the page's word, in its systemd status -----------------------------------------------
# The approval page (opsbot-web) has no socket check-config may ask: it says which file it
# has in force in its status (sd_notify STATUS=, `systemctl show -P StatusText`), at
# start and after each `systemctl reload`; check-config reads it there.

_PAGE_STATUS = re.compile(r"config sha256 ([0-9a-f]{64})( \(a newer file did not load\))?")


def page_status(digest: str, reload_failed: bool = False) -> str:
    """The page's status line for the file of ``digest`` in force (``reload_failed``: the
    file saved since did not load, and this one stays)."""
    kept = " (a newer file did not load)" if reload_failed else ""
    return f"serving the approval page; config sha256 {digest}{kept}"


def parse_page_status(text: str) -> tuple[str, bool] | None:
    """(digest in force, whether a newer file did not load) from the page's status, or
    None for a status that does not say (a page of an older version)."""
    match = _PAGE_STATUS.search(text)
    return None if match is None else (match[1], match[2] is not None)
