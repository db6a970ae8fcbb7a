"""What a diagnosis needs to know of every service on the host, kept between diagnoses and
read again only where what it comes from changed.

Finding a dependency no unit file declares takes every service's configuration (its
environment, command line, EnvironmentFile= and config files: ``_config_files``) and every
socket unit's Listen=. Read anew per diagnosis that is a ``systemctl show`` over every
service: seconds on a host with thousands of units, however small the question. Each
fact is kept here against what changes it:

* which services are loaded, and the socket units: systemd's own counters (``NNames``,
  ``UnitsLoadTimestampMonotonic``: one ``systemctl show`` of the manager) and the
  transient units' directory. When any moved, the services are listed again (one
  ``systemctl list-units``) and only those not known yet are shown, a thousand at a time
  (no output cap turns into an error or a lost unit on a host with 10,000 of them);
* a service's definition (Environment=, ExecStart=, EnvironmentFile=, RuntimeDirectory=):
  its unit file and drop-ins by inode, size and mtime; after a daemon-reload, also each
  unit file or drop-in directory of the search path that appeared, went or changed
  (:class:`Touched` names the services it defines);
* what its configuration names: each file read for it, each file it may name that is not
  there, and their directories (a file added to ``sites-enabled/``), by inode, size and
  mtime; and its running command line, by the first process of its cgroup.

What one process read is kept for the next one of the same boot (``_units_kept``): a
diagnosis started for a failed unit, or a verification, is a process of its own.
The matching of what one service reaches to who serves there (read_config_edges'
``resolve``) is pure and cheap once the mentions are indexed: each diagnosis does it over
the listeners it reads now. All of it is the diagnose user's view; nothing here writes.
"""

from __future__ import annotations

import glob
import os
import shlex
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from diagnose_svc.limits import COMMAND_TIMEOUT_SECONDS
from diagnose_svc.tools import _units_kept as kept
from diagnose_svc.tools._cgroups import Cgroups
from diagnose_svc.tools._config_files import UnitConfig, unit_config
from diagnose_svc.tools._systemctl import parse_exec
from diagnose_svc.tools.read_unit_file import _ENV_FILE
from shared_io.errors import CommandFailed
from shared_io.run import run
from shared_io.unit_show import show as show_units
from shared_schema import denied_reason

#: What the manager says that moves when the set of loaded units, or their definitions, may
#: have changed: a unit loaded or dropped, a job installed, a daemon-reload.
MANAGER = (
    "systemctl",
    "show",
    "--no-pager",
    "--property=NNames,UnitsLoadTimestampMonotonic,UserspaceTimestamp",
)
#: Where systemd writes a transient unit (``systemd-run``), and removes it.
TRANSIENT_DIR = "/run/systemd/transient"
LIST_SERVICES = (
    "systemctl",
    "list-units",
    "--type=service",
    "--all",
    "--output=json",
    "--no-pager",
)
LIST_SOCKETS = ("systemctl", "list-sockets", "--all", "--output=json", "--no-pager")
#: What a listing may print: about 110 bytes a unit, so a million units' worth. A bound
#: against a runaway, never one a real host reaches (it would be an error, not a cut).
LIST_OUTPUT_LIMIT = 128 * 1024 * 1024
#: Units shown per ``systemctl show``, and a page's bounds. Each call costs systemctl
#: about a second on a host with 10,000 units whatever it shows, then a millisecond or so
#: a unit: pages are large. A page prints about 600 bytes a unit at most.
SHOW_PAGE = 1000
SHOW_PAGE_SECONDS = 60.0
SHOW_PAGE_LIMIT = 16 * 1024 * 1024
DEFINITION = (
    "Id",
    "Environment",
    "ExecStart",
    "EnvironmentFiles",
    "RuntimeDirectory",
    "FragmentPath",
    "DropInPaths",
)
#: Where `systemctl enable` links a unit: a service enabled under a target that is not
#: loaded now is still one the host is configured to run. Read as directory entries, not
#: by `systemctl list-unit-files --state=enabled`, which judges every unit file on the
#: host (over a second here).
ENABLED_LINKS = (
    "/etc/systemd/system/*.wants/*.service",
    "/etc/systemd/system/*.requires/*.service",
)

#: systemd's unit search path (systemd.unit(5)): where unit files and their drop-in
#: directories are; /lib's only where it is not /usr/lib's.
UNIT_DIRS = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)

#: A file as far as a change to it shows: inode, size, mtime (None: not there, or hidden).
FileStamp = tuple[int, int, int] | None


def file_stamp(path: str) -> FileStamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _stamps(paths: Iterable[str]) -> tuple[tuple[str, FileStamp], ...]:
    return tuple((path, file_stamp(path)) for path in paths)


def _unchanged(stamps: Iterable[tuple[str, FileStamp]]) -> bool:
    return all(file_stamp(path) == stamp for path, stamp in stamps)


@dataclass(frozen=True)
class ManagerStamp:
    """What moves when the loaded units may have changed (see the module docstring), and
    when this boot's userspace started (what was kept of another boot is not used)."""

    names: str
    loaded: str
    transient: FileStamp
    boot: str = ""


def manager_stamp() -> ManagerStamp:
    """The manager's counters now (CommandFailed when systemctl cannot say)."""
    result = run(MANAGER, timeout=COMMAND_TIMEOUT_SECONDS, output_limit=4096)
    result.check()
    values = dict(line.partition("=")[::2] for line in result.stdout.splitlines())
    return ManagerStamp(
        values.get("NNames", ""),
        values.get("UnitsLoadTimestampMonotonic", ""),
        file_stamp(TRANSIENT_DIR),
        values.get("UserspaceTimestamp", ""),
    )


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore")
    unit: str


class SocketRow(BaseModel):
    """One socket unit's listen address and the unit it activates."""

    model_config = ConfigDict(extra="ignore")
    listen: str
    unit: str
    activates: str = ""


_ROWS = TypeAdapter(list[_Row])
_SOCKET_ROWS = TypeAdapter(list[SocketRow])


R = TypeVar("R", bound=BaseModel)


def _listing(argv: Sequence[str], adapter: TypeAdapter[list[R]]) -> list[R]:
    """A ``systemctl list-*`` JSON listing, whole (CommandFailed when it cannot be)."""
    result = run(argv, timeout=COMMAND_TIMEOUT_SECONDS, output_limit=LIST_OUTPUT_LIMIT)
    result.check()
    if result.truncated:
        raise CommandFailed(f"{argv[0]} {argv[1]} printed more than {LIST_OUTPUT_LIMIT} bytes")
    try:
        return adapter.validate_json(result.stdout or "[]")
    except ValidationError as exc:
        raise CommandFailed(
            f"systemctl {argv[1]} printed JSON opsbot does not understand: {exc.errors()[:1]}"
        ) from exc


def loaded_services() -> list[str]:
    """The services systemd has loaded now (running, failed, inactive), by name."""
    return [row.unit for row in _listing(LIST_SERVICES, _ROWS)]


def socket_units() -> list[SocketRow]:
    """Every socket unit's listen addresses and the unit each activates."""
    return list(_listing(LIST_SOCKETS, _SOCKET_ROWS))


def enabled(patterns: Iterable[str] = ENABLED_LINKS) -> list[str]:
    """The services linked into a target's .wants/ or .requires/, sorted."""
    return sorted({Path(link).name for pattern in patterns for link in glob.glob(pattern)})


def wanted(names: Iterable[str]) -> list[str]:
    """The services whose configuration may name an endpoint, of ``names``: no template,
    and none opsbot never acts on."""
    out = [n for n in dict.fromkeys(names) if n.endswith(".service") and "@.service" not in n]
    return [n for n in out if denied_reason(n) is None]


def words(value: str) -> list[str]:
    """An Environment= value as its assignments."""
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def cmdline(pid: int | None) -> list[str] | None:
    """A process's command line, or None (gone, or another user's the sandbox hides)."""
    if not pid or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(8192)
    except OSError:
        return None  # ExecStart= says enough
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    return words or None


@dataclass(frozen=True)
class Definition:
    """What a unit's configuration is made from, as systemd loaded it."""

    unit: str
    environment: tuple[str, ...]
    commands: tuple[tuple[str, ...], ...]
    #: (path, optional) of each EnvironmentFile=.
    environment_files: tuple[tuple[str, bool], ...]
    runtime_directories: tuple[str, ...]
    #: Its unit file and drop-ins, as they were when it was shown.
    files: tuple[tuple[str, FileStamp], ...]

    @classmethod
    def of(cls, props: Mapping[str, str]) -> Definition:
        """From ``systemctl show`` of :data:`DEFINITION`."""
        get = props.get
        unit_files = [get("FragmentPath", ""), *get("DropInPaths", "").split()]
        return cls(
            unit=get("Id", ""),
            environment=tuple(words(get("Environment", ""))),
            commands=tuple(c.argv for c in parse_exec(get("ExecStart", ""))),
            environment_files=tuple(
                (m.group(1), m.group(2) == "yes")
                for m in _ENV_FILE.finditer(get("EnvironmentFiles", ""))
            ),
            runtime_directories=tuple(get("RuntimeDirectory", "").split()),
            files=_stamps(p for p in unit_files if p),
        )

    def config(self, pid: int | None) -> UnitConfig:
        """What it names now, its main process being ``pid``."""
        present = [p for p, optional in self.environment_files if not optional or os.path.exists(p)]
        absent = [p for p, _ in self.environment_files if p not in present]
        return unit_config(
            self.unit,
            list(self.environment),
            [list(c) for c in self.commands],
            present,
            cmdline(pid),
            absent,
        )


def definitions(units: Sequence[str]) -> Iterator[Definition]:
    """``units``' definitions, a page of ``systemctl show`` at a time."""
    for start in range(0, len(units), SHOW_PAGE):
        page = units[start : start + SHOW_PAGE]
        for props in show_units(
            page, DEFINITION, timeout=SHOW_PAGE_SECONDS, output_limit=SHOW_PAGE_LIMIT
        ):
            yield Definition.of(props)


@dataclass
class Touched:
    """The services that unit files or drop-in directories, added, removed or changed in
    a directory of the search path, define or change (see :meth:`add`)."""

    names: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)
    every: bool = False

    def add(self, entry: str) -> None:
        """An entry's own name; a template's (``app@.service``), its instances; a prefix
        drop-in (``app-.service.d``), every service the name begins; ``service.d``,
        every service; another type's file, or a ``.wants/`` of links, none."""
        name = entry.removesuffix(".d")
        if name == "service":
            self.every = True
        elif name.endswith(("-.service", "@.service")):
            self.prefixes.add(name.removesuffix(".service"))
        elif name.endswith(".service"):
            self.names.add(name)

    def __call__(self, unit: str) -> bool:
        return self.every or unit in self.names or any(unit.startswith(p) for p in self.prefixes)


@dataclass
class _SearchPath:
    """The entries of the search path's directories, and the stamp of each drop-in
    directory, as last read: what a daemon-reload may have loaded anew is what changed."""

    dirs: dict[str, tuple[FileStamp, frozenset[str]]] = field(default_factory=dict)
    dropins: dict[str, FileStamp] = field(default_factory=dict)

    def changed(self) -> set[str]:
        """The entries added, removed or (a drop-in directory) changed since the last call
        (every entry, the first time)."""
        out: set[str] = set()
        seen: set[str] = set()
        for base in UNIT_DIRS:
            real = os.path.realpath(base)
            if real in seen:
                continue
            seen.add(real)
            stamp, before = file_stamp(real), self.dirs.get(real)
            if before is not None and before[0] == stamp:
                entries = before[1]
            else:
                try:
                    entries = frozenset(os.listdir(real))
                except OSError:
                    entries = frozenset()
                out |= entries ^ (before[1] if before else frozenset())
                self.dirs[real] = (stamp, entries)
            for entry in entries:
                if entry.endswith(".d"):
                    path = f"{real}/{entry}"
                    now = file_stamp(path)
                    if self.dropins.get(path) != now:
                        out.add(entry)
                        self.dropins[path] = now
        return out


@dataclass
class _Known:
    definition: Definition
    config: UnitConfig | None = None
    pid: int | None = None
    watched: tuple[tuple[str, FileStamp], ...] = ()


@dataclass
class HostUnits:
    """The host's services and socket units, kept current (see the module docstring).
    One per process; its readings are taken under a lock (diagnoses run in threads)."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stamp: ManagerStamp | None = None
    _names: list[str] = field(default_factory=list)
    _known: dict[str, _Known] = field(default_factory=dict)
    _sockets: list[SocketRow] | None = None
    _search: _SearchPath = field(default_factory=_SearchPath)
    _restored: bool = False
    #: The units the last reading that showed any showed (what changed, or was new).
    last_shown: list[str] = field(default_factory=list)

    def _refresh(self, now: ManagerStamp) -> None:
        if self._stamp is None and not self._restored:
            self._restored = True
            self._restore(kept.load(now.boot))
        before = self._stamp
        if before == now:
            return
        if before is None or before.loaded != now.loaded:
            # A daemon-reload: what it may have loaded anew is what a file or a drop-in
            # directory added, removed or changed defines (a file edited in place: each
            # unit's own files, below).
            touched = Touched()
            for entry in self._search.changed():
                touched.add(entry)
            if before is None:
                self._known.clear()
            for unit in [u for u in self._known if touched(u)]:
                del self._known[unit]
        names = wanted(loaded_services() + enabled())
        keep = set(names)
        for unit, known in list(self._known.items()):
            if unit not in keep or not _unchanged(known.definition.files):
                del self._known[unit]
        missing = [n for n in names if n not in self._known]
        for definition in definitions(missing):
            self._known[definition.unit] = _Known(definition)
        if missing:
            self.last_shown = missing
        listed = [n for n in names if n in self._known]
        changed = bool(missing) or listed != self._names
        self._names = listed
        self._sockets = None
        self._stamp = now
        if changed:  # else the next process lists the services once, and shows none
            kept.save(self._kept())

    def _kept(self) -> dict[str, Any]:
        """What to keep, in :class:`_units_kept.Kept`'s shape (plain data: on a host of
        10,000 services, models of each would cost the daemon megabytes for a moment)."""
        assert self._stamp is not None
        stamp = self._stamp
        return {
            "version": 1,
            "boot": stamp.boot,
            "stamp": (stamp.names, stamp.loaded, stamp.transient),
            "names": self._names,
            "definitions": [
                {
                    "unit": d.unit,
                    "environment": d.environment,
                    "commands": d.commands,
                    "environment_files": d.environment_files,
                    "runtime_directories": d.runtime_directories,
                    "files": d.files,
                }
                for d in (self._known[n].definition for n in self._names)
            ],
            "dirs": {k: (st, sorted(entries)) for k, (st, entries) in self._search.dirs.items()},
            "dropins": self._search.dropins,
        }

    def _restore(self, got: kept.Kept | None) -> None:
        """Start from what an earlier process kept: its stamp makes the next reading
        read only what changed since."""
        if got is None:
            return
        for d in got.definitions:
            self._known[d.unit] = _Known(
                Definition(
                    d.unit,
                    tuple(d.environment),
                    tuple(tuple(c) for c in d.commands),
                    tuple(d.environment_files),
                    tuple(d.runtime_directories),
                    tuple(d.files),
                )
            )
        self._names = [n for n in got.names if n in self._known]
        self._search = _SearchPath(
            {k: (st, frozenset(entries)) for k, (st, entries) in got.dirs.items()},
            dict(got.dropins),
        )
        self._stamp = ManagerStamp(*got.stamp, boot=got.boot)

    def configs(self, now: ManagerStamp, cgroups: Cgroups) -> list[UnitConfig]:
        """Every service's configuration as it is now (``now``: systemd's counters read
        this moment; ``cgroups``: this moment's tree, for each running one's first
        process)."""
        with self._lock:
            self._refresh(now)
            out = []
            for unit in self._names:
                known = self._known[unit]
                pid = cgroups.first_pid(unit)
                if known.config is None or known.pid != pid or not _unchanged(known.watched):
                    known.config = known.definition.config(pid)
                    known.pid = pid
                    known.watched = _stamps(known.config.watched)
                out.append(known.config)
            return out

    def runtime_dirs(self) -> dict[str, str]:
        """``/run/NAME`` -> the service whose RuntimeDirectory= it is (after configs())."""
        with self._lock:
            out: dict[str, str] = {}
            for unit in self._names:
                for name in self._known[unit].definition.runtime_directories:
                    out.setdefault(f"/run/{name}", unit)
            return out

    def sockets(self, now: ManagerStamp) -> list[SocketRow]:
        """The socket units' listen addresses and what each activates (``now``:
        systemd's counters read this moment)."""
        with self._lock:
            self._refresh(now)
            if self._sockets is None:
                self._sockets = socket_units()
            return self._sockets


#: This process's.
HOST = HostUnits()
