"""Which code each opsbot daemon runs: the installed code, recorded when it was put in
place, and the daemons that started before it changed.

An install (``packaging/install.sh``, or a package's postinst) runs ``python -m
shared_io.code_stamp record`` once the code is in place: it hashes each installed package
of opsbot's (every file but caches) and the venv's other distributions (name and
version), and writes ``opsbot-code.json`` in the venv with each part's sha256 and the
time it last changed (a part whose sha256 is the one recorded before keeps its time).
A venv under /usr is a package's, whose files are dpkg's: its stamp is
:data:`PACKAGED_STAMP` instead (:func:`stamp_path`), which the package's postinst writes
and its postrm purges.
A daemon runs older code when systemd says it started (``ExecMainStartTimestamp``)
before the last change of a part it imports (:data:`DAEMONS`, as the import contract
allows them); ``python -m shared_io.code_stamp stale`` prints those units, one a line,
for the install to restart, and ``opsbot check-config`` names them. Systemd's clock is
the one both times are read on: no daemon needs to say anything itself.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from shared_io.errors import StoreError, UnitStateError
from shared_io.files import write_atomic
from shared_io.unit_show import UnitProperties, parse_timestamp, show

__all__ = [
    "DAEMONS",
    "PACKAGES",
    "PACKAGED_STAMP",
    "DaemonCode",
    "Stamp",
    "daemons_code",
    "package_digest",
    "read_stamp",
    "record",
    "stamp_path",
]

#: opsbot's installed packages (pyproject.toml's [tool.setuptools.packages.find]).
PACKAGES = (
    "shared_schema",
    "shared_io",
    "plans",
    "executor_svc",
    "diagnose_svc",
    "opsbot_cli",
    "notify_svc",
    "approver_svc",
    "web_svc",
)
#: The part that stands for the venv's other distributions (pydantic, starlette, ...).
DEPENDENCIES = "dependencies"
_BASE = ("shared_schema", "shared_io", DEPENDENCIES)
#: Each long-running daemon and the parts it runs: its own package and what the import
#: contract lets it import (docs/development.md, "Who may import whom"). The oneshot
#: units (apply, verify, notify, ...) start afresh each time and take new code then.
DAEMONS: Mapping[str, tuple[str, ...]] = {
    "opsbot-executor.service": ("executor_svc", "plans", *_BASE),
    "opsbot-diagnose.service": ("diagnose_svc", *_BASE),
    "opsbot-approver.service": ("approver_svc", "plans", *_BASE),
    "opsbot-web.service": ("web_svc", *_BASE),
}
STAMP_NAME = "opsbot-code.json"
#: The stamp of a packaged venv (one under /usr, whose files are dpkg's, never ours).
PACKAGED_STAMP = Path("/var/lib/opsbot-code") / STAMP_NAME
SHOW_TIMEOUT = 15.0
_RUNNING = ("active", "reloading", "activating", "deactivating")


def stamp_path(prefix: str = sys.prefix) -> Path:
    """Where the install records the code: in the venv that holds it (install.sh's), or
    :data:`PACKAGED_STAMP` for a package's venv under /usr."""
    if Path(prefix).is_relative_to("/usr"):
        return PACKAGED_STAMP
    return Path(prefix) / STAMP_NAME


def package_digest(name: str) -> str:
    """sha256 over each file of an installed package (its path and bytes), caches left out."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return "absent"
    digest = hashlib.sha256()
    for location in spec.submodule_search_locations:
        root = Path(location)
        files = sorted(
            path
            for path in root.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        )
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _dependencies_digest() -> str:
    """sha256 over the name and version of every other distribution in the venv."""
    found = sorted(
        f"{dist.metadata['Name']}=={dist.version}".lower()
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower() != "opsbot"
    )
    return hashlib.sha256("\n".join(found).encode()).hexdigest()


def digests() -> dict[str, str]:
    """Each part's sha256 as installed now."""
    parts = {name: package_digest(name) for name in PACKAGES}
    parts[DEPENDENCIES] = _dependencies_digest()
    return parts


def _version() -> str:
    try:
        return importlib.metadata.version("opsbot")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Part:
    sha256: str
    changed_at: datetime


@dataclass(frozen=True)
class Stamp:
    """The installed code as the install recorded it."""

    version: str
    recorded_at: datetime
    parts: Mapping[str, Part]

    @property
    def sha256(self) -> str:
        """One digest for the whole: the parts' digests, in order."""
        joined = "\n".join(f"{name} {part.sha256}" for name, part in sorted(self.parts.items()))
        return hashlib.sha256(joined.encode()).hexdigest()

    def changed_at(self, parts: Sequence[str]) -> tuple[datetime, list[str]]:
        """When the last of ``parts`` changed, and which changed then."""
        times = {name: self.parts[name].changed_at for name in parts if name in self.parts}
        if not times:
            return self.recorded_at, []
        last = max(times.values())
        return last, [name for name in parts if times.get(name) == last]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "recorded_at": self.recorded_at.isoformat(),
                "parts": {
                    name: {"sha256": part.sha256, "changed_at": part.changed_at.isoformat()}
                    for name, part in sorted(self.parts.items())
                },
            },
            indent=2,
        )


def read_stamp(path: Path | None = None) -> Stamp | None:
    """The recorded stamp, None when there is none; StoreError for one that cannot be read."""
    path = stamp_path() if path is None else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Stamp(
            version=str(data["version"]),
            recorded_at=datetime.fromisoformat(data["recorded_at"]),
            parts={
                name: Part(str(part["sha256"]), datetime.fromisoformat(part["changed_at"]))
                for name, part in data["parts"].items()
            },
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(
            f"cannot read the code stamp {path}: {exc}",
            hint="run packaging/install.sh again (or dpkg-reconfigure opsbot), which writes it",
        ) from exc


def record(
    path: Path | None = None,
    *,
    now: datetime | None = None,
    found: Mapping[str, str] | None = None,
) -> tuple[Stamp, list[str]]:
    """Write the stamp of the code installed now (``found``: each part's sha256, hashed
    here unless given); the parts that changed since the last one (all, the first time)."""
    path = stamp_path() if path is None else path
    now = datetime.now(UTC) if now is None else now
    found = digests() if found is None else found
    try:
        before = read_stamp(path)
    except StoreError:
        before = None
    old = dict(before.parts) if before is not None else {}
    parts: dict[str, Part] = {}
    changed: list[str] = []
    for name, sha256 in found.items():
        if name in old and old[name].sha256 == sha256:
            parts[name] = old[name]
        else:
            parts[name] = Part(sha256, now)
            changed.append(name)
    stamp = Stamp(version=_version(), recorded_at=now, parts=parts)
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc}") from exc
    write_atomic(path, (stamp.to_json() + "\n").encode(), mode=0o644)
    return stamp, changed


@dataclass(frozen=True)
class DaemonCode:
    """One daemon's code against the stamp."""

    unit: str
    #: "current", "older", "not running" or "unknown".
    status: str
    started_at: datetime | None = None
    #: The parts that changed after it started (for "older").
    changed: tuple[str, ...] = ()
    detail: str = ""

    @property
    def action(self) -> str:
        return f"sudo systemctl restart {self.unit}" if self.status == "older" else ""

    def as_json(self) -> dict[str, object]:
        return {
            "unit": self.unit,
            "status": self.status,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "changed": list(self.changed),
            "detail": self.detail,
            "do": self.action,
        }


Show = Callable[[Sequence[str], Sequence[str]], list[UnitProperties]]


def _show(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
    return show(units, properties, timeout=SHOW_TIMEOUT)


def _at(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def daemons_code(stamp: Stamp, read: Show = _show) -> list[DaemonCode]:
    """Each daemon of :data:`DAEMONS` against ``stamp``, in that order."""
    units = list(DAEMONS)
    try:
        shown = read(units, ("ActiveState", "ExecMainStartTimestamp"))
    except UnitStateError as exc:
        return [DaemonCode(unit, "unknown", detail=exc.message) for unit in units]
    found = []
    for unit, props in zip(units, shown, strict=True):
        if props.get("ActiveState", "") not in _RUNNING:
            found.append(DaemonCode(unit, "not running"))
            continue
        started = parse_timestamp(props.get("ExecMainStartTimestamp", ""))
        if started is None:
            found.append(DaemonCode(unit, "unknown", detail="systemd says no start time"))
            continue
        changed_at, changed = stamp.changed_at(DAEMONS[unit])
        if started >= changed_at:
            found.append(DaemonCode(unit, "current", started))
            continue
        found.append(
            DaemonCode(
                unit,
                "older",
                started,
                tuple(changed),
                f"runs older code: started {_at(started)}, {', '.join(changed)} "
                f"changed {_at(changed_at)}",
            )
        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``record``: write the stamp, say which parts changed; ``stale``: the daemons that
    run older code, one unit a line."""
    parser = argparse.ArgumentParser(prog="python -m shared_io.code_stamp")
    parser.add_argument("verb", choices=("record", "stale"))
    parser.add_argument(
        "--stamp",
        type=Path,
        default=None,
        help=f"default: VENV/{STAMP_NAME}, or {PACKAGED_STAMP} for a package's venv under /usr",
    )
    args = parser.parse_args(argv)
    try:
        if args.verb == "record":
            stamp, changed = record(args.stamp)
            said = f"changed: {', '.join(changed)}" if changed else "unchanged"
            print(f"opsbot {stamp.version}, code sha256 {stamp.sha256[:12]}, {said}")
            return 0
        current = read_stamp(args.stamp)
        if current is None:
            print(f"no code stamp at {args.stamp or stamp_path()}", file=sys.stderr)
            return 1
        for daemon in daemons_code(current):
            if daemon.status == "older":
                print(daemon.unit)
            elif daemon.status == "unknown":
                print(f"{daemon.unit}: {daemon.detail}", file=sys.stderr)
        return 0
    except StoreError as exc:
        print(f"{exc.message} ({exc.hint})" if exc.hint else exc.message, file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
