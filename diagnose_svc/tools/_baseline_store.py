"""Where the last-known-good baseline's snapshots are kept, and how (diagnose_svc/
baseline.py takes them; read_baseline reads them): ``/var/lib/opsbot-diagnose/baseline/``
(``StateDirectory=opsbot-diagnose``, 0700, the diagnose user's alone), each snapshot
written atomically, kept at most :data:`KEEP_DAYS` days and :data:`MAX_BYTES` in all, and
one that says what the newest says is not kept twice (the newest is refreshed)."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from diagnose_svc._model import Model
from shared_io.files import write_atomic

#: Where, unless systemd says otherwise ($STATE_DIRECTORY of StateDirectory=).
DEFAULT_STATE = Path("/var/lib/opsbot-diagnose")
KEEP_DAYS = 3
#: All snapshots together at most (the oldest go first).
MAX_BYTES = 256 * 1024
PREFIX = "snapshot-"


class BaselineEdge(Model):
    """``client`` reached ``server`` at ``endpoint``: seen connected (``observed``) or
    configured so (``configured``)."""

    client: str
    server: str
    endpoint: str
    source: str


class BaselineListener(Model):
    unit: str
    endpoint: str


class Snapshot(Model):
    taken_at: datetime
    #: unit -> "active/running" for every unit in scope and every unit an edge names.
    units: dict[str, str]
    listeners: list[BaselineListener]
    edges: list[BaselineEdge]
    #: health target -> the status it answered.
    health: dict[str, int]

    def same_as(self, other: Snapshot) -> bool:
        mine = self.model_dump(exclude={"taken_at"})
        return mine == other.model_dump(exclude={"taken_at"})


def directory() -> Path:
    """The baseline's directory: under the state directory systemd made for the unit
    (StateDirectory=opsbot-diagnose), or the default."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return (Path(state) if state else DEFAULT_STATE) / "baseline"


def _snapshots(where: Path) -> list[Path]:
    try:
        return sorted(
            p for p in where.iterdir() if p.name.startswith(PREFIX) and p.suffix == ".json"
        )
    except FileNotFoundError:
        return []


def _read(path: Path) -> Snapshot | None:
    try:
        return Snapshot.model_validate_json(path.read_bytes()[: MAX_BYTES + 1])
    except (OSError, ValidationError, ValueError):
        return None  # half-written by a killed process, or not ours: not evidence


def load(where: Path | None = None, now: datetime | None = None) -> list[Snapshot]:
    """The snapshots kept, newest first, none older than KEEP_DAYS."""
    where = where or directory()
    now = now or datetime.now(UTC)
    out = []
    for path in reversed(_snapshots(where)):
        found = _read(path)
        if found is not None and now - found.taken_at <= timedelta(days=KEEP_DAYS):
            out.append(found)
    return out


def save(snap: Snapshot, where: Path | None = None) -> Path | None:
    """Keep ``snap`` (atomically, 0600 in a 0700 directory) unless the newest snapshot
    says the same; then prune by age and size. The path written, or None."""
    where = where or directory()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept = _snapshots(where)
    newest = _read(kept[-1]) if kept else None
    if newest is not None and newest.same_as(snap):
        # The same host: the newest snapshot stands, younger (its time is when last seen).
        path, written = kept[-1], None
    else:
        path = written = where / f"{PREFIX}{snap.taken_at:%Y%m%dT%H%M%S%fZ}.json"
    data = json.dumps(snap.model_dump(mode="json"), sort_keys=True).encode()
    write_atomic(path, data, mode=0o600)
    prune(where, snap.taken_at)
    return written


def prune(where: Path, now: datetime) -> None:
    """Drop snapshots older than KEEP_DAYS, then the oldest until MAX_BYTES is kept."""
    paths = _snapshots(where)
    sizes: dict[Path, int] = {}
    for path in paths:
        found = _read(path)
        if found is None or now - found.taken_at > timedelta(days=KEEP_DAYS):
            path.unlink(missing_ok=True)
            continue
        with contextlib.suppress(FileNotFoundError):  # another run pruned it meanwhile
            sizes[path] = path.stat().st_size
    order = sorted(sizes)
    while order and sum(sizes[p] for p in order) > MAX_BYTES:
        order.pop(0).unlink(missing_ok=True)
