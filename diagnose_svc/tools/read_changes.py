"""read_changes: what changed for one unit since the host was last seen healthy, the first
thing an operator asks: packages installed, upgraded or removed since (dpkg's own log),
and which of them own a file the unit runs or reads; its unit file and drop-ins written
since, and whether systemd still runs the old ones (``NeedDaemonReload=``); the files it
runs and reads (its programs, ``EnvironmentFile=`` files, the config files its command
names, a proxy's includes) modified since; and a symlink on their way switched since (a
release directory pointed elsewhere).

"Since" is the newest baseline snapshot (the host last seen healthy, read_baseline), or,
without one, the last time the unit became active. Everything read is the world's to
read: dpkg's log and package lists, file times, ``systemctl show``; a file the diagnose
user cannot see is left out, never worked around.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from diagnose_svc._model import Model
from diagnose_svc.limits import TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._baseline_store import load as load_baseline
from diagnose_svc.tools._config_files import unit_config
from diagnose_svc.tools._host_units import cmdline, words
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_exec, parse_timestamp, show
from diagnose_svc.tools.read_unit_file import _ENV_FILE

__all__ = ["Change", "Changes", "ChangesArgs", "dpkg_changes", "read_changes"]

PROPERTIES = (
    "Id",
    "FragmentPath",
    "DropInPaths",
    "NeedDaemonReload",
    "ExecStartPre",
    "ExecStart",
    "EnvironmentFiles",
    "Environment",
    "MainPID",
    "ActiveEnterTimestamp",
    "WorkingDirectory",
)
#: dpkg's log, newest last, and the one logrotate moved aside.
DPKG_LOGS = ("/var/log/dpkg.log.1", "/var/log/dpkg.log")
#: Where dpkg lists each package's files (``NAME.list`` or ``NAME:ARCH.list``).
DPKG_INFO = Path("/var/lib/dpkg/info")
#: Bytes of each log read at most (its end: the newest entries).
LOG_TAIL_BYTES = 2 * 1024 * 1024
#: Bytes of a package's file list read at most.
LIST_BYTES = 4 * 1024 * 1024
#: Files of the unit looked at, and changes reported, at most.
MAX_FILES = 48
MAX_CHANGES = 16
#: Package changes kept that own none of the unit's files (the host's context).
MAX_OTHER_PACKAGES = 4
_DPKG_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<action>install|upgrade|remove|purge) "
    r"(?P<package>\S+) (?P<old>\S+) (?P<new>\S+)\s*$"
)


class ChangesArgs(UnitToolArgs):
    gives = "changes"


class Change(Model):
    """One change since the host was healthy: when, what kind (``package``, ``unit file``,
    ``drop-in``, ``file``, ``symlink``), what (a package or a path), what became of it,
    and whether it touches what the unit runs or reads (``related``)."""

    at: datetime
    kind: str
    name: str
    detail: str
    related: bool = True

    def words(self) -> str:
        return f"{self.name} {self.detail} ({self.at:%Y-%m-%d %H:%M} UTC)"


class Changes(ToolOutput):
    """What changed for ``unit`` since ``since`` (``since_what`` says which moment that
    is), newest first; and whether systemd runs a unit file older than the one on disk."""

    unit: str
    since: datetime | None
    since_what: str
    changes: list[Change]
    need_daemon_reload: bool
    omitted: int = 0

    @property
    def related(self) -> list[Change]:
        return [c for c in self.changes if c.related]

    def summary(self) -> str:
        if self.since is None:
            head = f"{self.unit}: no moment it was healthy is known"
        elif not self.changes:
            head = f"{self.unit}: nothing it runs or reads changed since {self.since_what}"
        else:
            head = f"since {self.since_what} ({self.since:%Y-%m-%d %H:%M} UTC): " + "; ".join(
                c.words() for c in self.changes[:6]
            )
        if self.need_daemon_reload:
            head += "; its unit file changed on disk and systemd still runs the old one"
        return head


def dpkg_changes(text: str, since: datetime) -> list[tuple[datetime, str, str]]:
    """(when, package, what became of it) of each install, upgrade or removal dpkg logged
    after ``since``, the last per package; dpkg writes the host's local time."""
    last: dict[str, tuple[datetime, str]] = {}
    for line in text.splitlines():
        match = _DPKG_LINE.match(line)
        if match is None:
            continue
        at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S").astimezone(UTC)
        if at <= since:
            continue
        package = match["package"].split(":", 1)[0]
        old, new, action = match["old"], match["new"], match["action"]
        if action == "install" and old == "<none>":
            what = f"{new} installed"
        elif action in ("install", "upgrade"):
            what = f"{old} -> {new} {'upgraded' if action == 'upgrade' else 'installed'}"
        else:
            what = f"{old} removed" if action == "remove" else f"{old} purged"
        last[package] = (at, what)
    return sorted(((at, p, what) for p, (at, what) in last.items()), reverse=True)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            return handle.read(LOG_TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _owned(package: str, files: set[str]) -> bool:
    """Whether dpkg lists one of ``files`` as ``package``'s."""
    for candidate in sorted(DPKG_INFO.glob(f"{package}.list")) + sorted(
        DPKG_INFO.glob(f"{package}:*.list")
    ):
        try:
            with open(candidate, "rb") as handle:
                listed = handle.read(LIST_BYTES).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        if files & set(listed):
            return True
    return False


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _modified(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _on_the_way(path: str) -> Iterator[str]:
    """Each directory and the file on ``path``'s way, from the root down."""
    parts = Path(path).parts
    for end in range(2, len(parts) + 1):
        yield str(Path(*parts[:end]))


def _file_changes(
    files: Iterable[tuple[str, str]], since: datetime
) -> tuple[list[Change], set[str]]:
    """The files (path, kind) modified after ``since``, and the symlinks on their way
    switched after it; and every real path of them (for dpkg's lists)."""
    changes: dict[str, Change] = {}
    real: set[str] = set()
    for path, kind in files:
        st = _lstat(path)
        if st is None:
            continue
        real.update({path, os.path.realpath(path)})
        for step in _on_the_way(path):
            link = _lstat(step)
            if link is None or not stat.S_ISLNK(link.st_mode):
                continue
            at = _modified(link.st_mtime)
            if at > since and step not in changes:
                changes[step] = Change(
                    at=at, kind="symlink", name=step, detail=f"now points to {os.readlink(step)}"
                )
        target = os.stat(path) if stat.S_ISLNK(st.st_mode) and os.path.exists(path) else st
        at = _modified(target.st_mtime)
        if at > since and stat.S_ISREG(target.st_mode) and path not in changes:
            changes[path] = Change(at=at, kind=kind, name=path, detail="modified")
    return list(changes.values()), real


def _unit_files(props: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, kind) of everything the unit runs or reads that a change could break."""
    out: dict[str, str] = {}
    fragment = props.get("FragmentPath", "")
    if fragment:
        out[fragment] = "unit file"
    for path in props.get("DropInPaths", "").split():
        out.setdefault(path, "drop-in")
    commands = [c for key in ("ExecStartPre", "ExecStart") for c in parse_exec(props.get(key, ""))]
    for command in commands:
        out.setdefault(command.path, "file")
    env_files = [m.group(1) for m in _ENV_FILE.finditer(props.get("EnvironmentFiles", ""))]
    for path in env_files:
        out.setdefault(path, "file")
    config = unit_config(
        props.get("Id", ""),
        words(props.get("Environment", "")),
        [list(c.argv) for c in commands],
        [p for p in env_files if os.path.exists(p)],
        cmdline(int(props.get("MainPID", "0") or 0)),
    )
    for path in config.files:
        out.setdefault(path, "file")
    return list(out.items())[:MAX_FILES]


def _since(props: Mapping[str, str]) -> tuple[datetime | None, str]:
    """The last moment the host was seen healthy (the newest baseline snapshot), else the
    last time the unit became active."""
    kept = load_baseline()
    if kept:
        return kept[0].taken_at, "the host was last seen healthy"
    started = parse_timestamp(props.get("ActiveEnterTimestamp", ""))
    if started is not None:
        return started, "it last started"
    return None, ""


def _fit(out: Changes) -> Changes:
    while len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET and out.changes:
        out = out.model_copy(update={"changes": out.changes[:-1], "omitted": out.omitted + 1})
    return out


@read_tool(ChangesArgs)
def read_changes(args: ChangesArgs, context: ToolContext) -> Changes:
    """What changed for one unit since the host was last seen healthy (or, with no such
    moment known, since the unit last started): packages installed, upgraded or removed
    (dpkg's log), marked related where the package owns a file the unit runs or reads;
    its unit file and drop-ins written since, and whether systemd still runs the old
    ones (NeedDaemonReload); its programs, environment files and config files (a
    proxy's includes too) modified since; a symlink on their way switched since. Newest
    first, each with its time.
    """
    [props] = show([args.unit], PROPERTIES)
    unit = props.get("Id", args.unit)
    since, since_what = _since(props)
    reload = props.get("NeedDaemonReload") == "yes"
    if since is None:
        return Changes(unit=unit, since=None, since_what="", changes=[], need_daemon_reload=reload)
    files, real = _file_changes(_unit_files(props), since)
    packages: list[Change] = []
    others = 0
    log = "".join(_tail(path) for path in DPKG_LOGS)
    for at, package, what in dpkg_changes(log, since):
        related = _owned(package, real)
        if not related:
            others += 1
            if others > MAX_OTHER_PACKAGES:
                continue
        packages.append(Change(at=at, kind="package", name=package, detail=what, related=related))
    changes = sorted([*files, *packages], key=lambda c: (not c.related, -c.at.timestamp()))
    return _fit(
        Changes(
            unit=unit,
            since=since,
            since_what=since_what,
            changes=changes[:MAX_CHANGES],
            need_daemon_reload=reload,
            omitted=max(0, len(changes) - MAX_CHANGES),
        )
    )
