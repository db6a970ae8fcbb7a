"""Where the last-known-good baseline's snapshots are kept, and how (diagnose_svc/
baseline.py takes them; read_baseline reads them): ``/var/lib/opsbot-diagnose/baseline/``
(``StateDirectory=opsbot-diagnose``, 0700, the diagnose user's alone), each snapshot
written atomically, kept at most :data:`KEEP_DAYS` days and :data:`MAX_BYTES` in all, and
one that says what the newest says is not kept twice (the newest is refreshed).

A subverted diagnose process can write anything here, and what it wrote outlives it (a
reinstall keeps /var/lib). So a snapshot is evidence only in the shape a healthy host
leaves: unit names by systemd's grammar, at most :data:`MAX_ENTRIES` of each kind, an
endpoint of one printable line, and a time that is not ahead of the clock (one dated in
the future would be kept, and be the newest, for ever); anything else is dropped as if
half-written. A forgery in that shape stays possible: what a diagnosis builds on it is a
proposal, and a standing rule acts only on root's own reading of each unit
(plans/readings.py)."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StringConstraints, ValidationError

from diagnose_svc._model import Model
from shared_io.files import write_atomic
from shared_schema import UnitName

#: Where, unless systemd says otherwise ($STATE_DIRECTORY of StateDirectory=).
DEFAULT_STATE = Path("/var/lib/opsbot-diagnose")
KEEP_DAYS = 3
#: All snapshots together at most (the oldest go first).
MAX_BYTES = 256 * 1024
PREFIX = "snapshot-"
#: Entries of each kind in one snapshot at most (a snapshot stays a few KiB).
MAX_ENTRIES = 200
#: How far ahead of the clock a snapshot's time may be (clocks step back a little).
CLOCK_SKEW = timedelta(minutes=5)

#: Where a unit listened or was reached: "address:port", ":port", or a Unix socket's path;
#: one printable line (it is quoted in a plan's reason).
Endpoint = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[!-~]+$")]
#: A unit's "ActiveState/SubState".
State = Annotated[str, StringConstraints(max_length=64, pattern=r"^[a-z-]+/[a-z-]+$")]
#: A health target's name, as [diagnose.health.NAME] allows one (shared_schema.config).
TargetName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]
#: An HTTP status.
Status = Annotated[int, Field(ge=100, le=999)]


class BaselineEdge(Model):
    """``client`` reached ``server`` at ``endpoint``: seen connected (``observed``) or
    configured so (``configured``)."""

    client: UnitName
    server: UnitName
    endpoint: Endpoint
    source: Literal["observed", "configured"]


class BaselineListener(Model):
    unit: UnitName
    endpoint: Endpoint


class Snapshot(Model):
    taken_at: AwareDatetime
    #: unit -> "active/running" for every unit in scope and every unit an edge names.
    units: Annotated[dict[UnitName, State], Field(max_length=MAX_ENTRIES)]
    listeners: Annotated[list[BaselineListener], Field(max_length=MAX_ENTRIES)]
    edges: Annotated[list[BaselineEdge], Field(max_length=MAX_ENTRIES)]
    #: health target -> the status it answered.
    health: Annotated[dict[TargetName, Status], Field(max_length=MAX_ENTRIES)]

    def same_as(self, other: Snapshot) -> bool:
        mine = self.model_dump(exclude={"taken_at"})
        return mine == other.model_dump(exclude={"taken_at"})


def directory() -> Path:
    """The baseline's directory: under the state directory systemd made for the unit
    (StateDirectory=opsbot-diagnose), or the default."""
    return state_directory() / "baseline"


def state_directory() -> Path:
    """The diagnose user's state directory: the one systemd made for the unit
    ($STATE_DIRECTORY of StateDirectory=opsbot-diagnose), or the default."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return Path(state) if state else DEFAULT_STATE


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


def _current(found: Snapshot | None, now: datetime) -> bool:
    """``found`` was read, is at most KEEP_DAYS old, and is not dated ahead of the clock."""
    return found is not None and -CLOCK_SKEW <= now - found.taken_at <= timedelta(days=KEEP_DAYS)


def load(where: Path | None = None, now: datetime | None = None) -> list[Snapshot]:
    """The snapshots kept, newest first (by the time each says it was taken, not by its
    file's name), none older than KEEP_DAYS or dated ahead of the clock."""
    where = where or directory()
    now = now or datetime.now(UTC)
    found = [_read(path) for path in _snapshots(where)]
    kept = [snap for snap in found if snap is not None and _current(snap, now)]
    return sorted(kept, key=lambda snap: snap.taken_at, reverse=True)


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
    """Drop snapshots that cannot be read, are older than KEEP_DAYS or are dated ahead of
    the clock, then the oldest until MAX_BYTES is kept."""
    paths = _snapshots(where)
    sizes: dict[Path, int] = {}
    for path in paths:
        if not _current(_read(path), now):
            path.unlink(missing_ok=True)
            continue
        with contextlib.suppress(FileNotFoundError):  # another run pruned it meanwhile
            sizes[path] = path.stat().st_size
    order = sorted(sizes)
    while order and sum(sizes[p] for p in order) > MAX_BYTES:
        order.pop(0).unlink(missing_ok=True)
