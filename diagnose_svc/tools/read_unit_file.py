"""read_unit_file: a unit's effective definition (``systemctl cat``: its file and every
drop-in), and the files it names, as facts: does each exist, may the unit's user read
it, did it change since the unit's process started.

A failed start whose own output blames a setting, a file or a permission is confirmed
here or not: the setting is in a drop-in or it is not, the file is there or it is not,
its mode lets the unit's user read it or not. Secrets in the text are redacted before the
policy sees it (like every observation).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from collections.abc import Mapping
from datetime import UTC, datetime

from diagnose_svc._model import Model
from diagnose_svc.limits import COMMAND_TIMEOUT_SECONDS, TOOL_OUTPUT_BUDGET
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_exec, parse_timestamp, show
from shared_io.run import run

#: Characters of the unit's text kept at most (its comments left out).
TEXT_LIMIT = 700
#: Files named by the unit that are checked at most.
PATH_LIMIT = 10
PROPERTIES = (
    "Id",
    "User",
    "Group",
    "DynamicUser",
    "ExecStartPre",
    "ExecStart",
    "ExecReload",
    "EnvironmentFiles",
    "Environment",
    "FragmentPath",
    "DropInPaths",
    "ExecMainStartTimestamp",
)
_EXECS = ("ExecStartPre", "ExecStart", "ExecReload")


class UnitFileArgs(UnitToolArgs):
    gives = "unit_file"


class PathFact(Model):
    """One file the unit names: what it is to the unit, and what is true of it now."""

    path: str
    role: str  # "ExecStart program", "ExecStart argument", "EnvironmentFile", ...
    exists: bool | None  # None: it could not be looked at (a directory in the way)
    kind: str = ""  # "file", "directory", "other"
    mode: str = ""  # e.g. "0640"
    owner: str = ""
    group: str = ""
    readable_by_unit: bool | None = None
    modified: datetime | None = None
    modified_since_start: bool | None = None
    optional: bool = False  # EnvironmentFile=-/path: its absence is no error


class UnitFile(ToolOutput):
    """The unit's files (fragment and drop-ins), its text without comments, the user it
    runs as, its environment, and the files it names with their facts."""

    unit: str
    files: list[str]
    user: str
    started_at: datetime | None
    environment: list[str]
    text: str
    paths: list[PathFact]

    def summary(self) -> str:
        notes = []
        for p in self.paths:
            if p.exists is False and not p.optional:
                notes.append(f"{p.path} ({p.role}) is missing")
            elif p.readable_by_unit is False:
                notes.append(f"{p.path} ({p.mode} {p.owner}:{p.group}) unreadable by {self.user}")
            elif p.modified_since_start:
                notes.append(f"{p.path} changed after the process started")
        drop_ins = len(self.files) - 1
        head = (
            f"{self.unit}: {len(self.files)} file(s) ({drop_ins} drop-in(s)), runs as {self.user}"
        )
        return head + ("; " + "; ".join(notes) if notes else "; every file it names is there")


def _text(unit: str) -> tuple[list[str], str]:
    result = run(
        ["systemctl", "cat", "--no-pager", "--", unit], timeout=COMMAND_TIMEOUT_SECONDS
    ).check()
    files = [line[2:].strip() for line in result.stdout.splitlines() if line.startswith("# /")]
    kept = [
        line
        for line in result.stdout.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", ";"))
    ]
    text = "\n".join(kept)
    if len(text) > TEXT_LIMIT:
        text = text[: TEXT_LIMIT - 1] + "…"
    return files, text


def _user_ids(user: str) -> tuple[int, set[int]] | None:
    """The uid and every gid of ``user``, or None if there is no such user (yet)."""
    name = user or "root"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = {entry.pw_gid}
    try:
        groups.update(os.getgrouplist(name, entry.pw_gid))
    except OSError:
        pass
    return entry.pw_uid, groups


def _dynamic_ids(name: str) -> tuple[int, set[int]]:
    """A dynamic user's ids while it exists (nss-systemd names it); otherwise ids no
    file belongs to, so that only a file's "others" bits decide what it may read."""
    return _user_ids(name) or (-1, set())


def _name(table: str, number: int) -> str:
    try:
        if table == "user":
            return pwd.getpwuid(number).pw_name
        return grp.getgrgid(number).gr_name
    except KeyError:
        return str(number)


def _readable(st: os.stat_result, ids: tuple[int, set[int]] | None, program: bool) -> bool | None:
    if ids is None:
        return None
    uid, gids = ids
    if uid == 0:
        return True if not program else bool(st.st_mode & 0o111)
    want_read = 0o4 if not stat.S_ISDIR(st.st_mode) else 0o5
    want = 0o1 if program else want_read
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 0o7
    elif st.st_gid in gids:
        bits = (st.st_mode >> 3) & 0o7
    else:
        bits = st.st_mode & 0o7
    return bits & want == want


def _fact(
    path: str,
    role: str,
    ids: tuple[int, set[int]] | None,
    started: datetime | None,
    optional: bool = False,
) -> PathFact:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return PathFact(path=path, role=role, exists=False, optional=optional)
    except OSError:
        return PathFact(path=path, role=role, exists=None, optional=optional)
    modified = datetime.fromtimestamp(st.st_mtime, UTC)
    kind = (
        "file" if stat.S_ISREG(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "other"
    )
    return PathFact(
        path=path,
        role=role,
        exists=True,
        kind=kind,
        mode=f"{stat.S_IMODE(st.st_mode):04o}",
        owner=_name("user", st.st_uid),
        group=_name("group", st.st_gid),
        readable_by_unit=_readable(st, ids, role.endswith("program")),
        modified=modified,
        modified_since_start=(modified > started) if started is not None else None,
        optional=optional,
    )


_ENV_FILE = re.compile(r"(\S+) \(ignore_errors=(yes|no)\)")


def named_paths(props: Mapping[str, str]) -> list[tuple[str, str, bool]]:
    """(path, role, optional) for every absolute path the unit's commands and environment
    files name, in order, without repeats."""
    out: dict[str, tuple[str, bool]] = {}
    for key in _EXECS:
        for command in parse_exec(props.get(key, "")):
            out.setdefault(command.path, (f"{key} program", False))
            for word in command.argv[1:]:
                if word.startswith("/") and len(word) > 1:
                    out.setdefault(word.rstrip(";"), (f"{key} argument", False))
    for match in _ENV_FILE.finditer(props.get("EnvironmentFiles", "")):
        out.setdefault(match.group(1), ("EnvironmentFile", match.group(2) == "yes"))
    return [(path, role, optional) for path, (role, optional) in out.items()][:PATH_LIMIT]


def _fit(out: UnitFile) -> UnitFile:
    while len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET and len(out.text) > 80:
        out = out.model_copy(update={"text": out.text[: len(out.text) * 2 // 3] + "…"})
    while len(out.model_dump_json()) > TOOL_OUTPUT_BUDGET and out.environment:
        out = out.model_copy(update={"environment": out.environment[:-1]})
    return out


@read_tool(UnitFileArgs)
def read_unit_file(args: UnitFileArgs, context: ToolContext) -> UnitFile:
    """Read one unit's effective definition: its files (the unit file and each drop-in),
    its text without comments (systemctl cat), the user it runs as, its environment, and
    every file its commands and EnvironmentFile= name, each with: whether it exists, its
    mode and owner, whether the unit's user may read (or run) it, and whether it changed
    after the unit's main process started. Secrets are redacted.
    """
    [props] = show([args.unit], PROPERTIES)
    files, text = _text(args.unit)
    dynamic = props.get("DynamicUser") == "yes"
    user = props.get("User", "")
    started = parse_timestamp(props.get("ExecMainStartTimestamp", ""))
    ids = _user_ids(user)
    if dynamic:
        # A user systemd allocates while the unit runs (never root): its name is User=
        # or the unit's; while it is down no file is its own, so others' bits decide.
        user = user or args.unit.removesuffix(".service")
        ids = _dynamic_ids(user)
        user = f"{user} (DynamicUser=yes)"
    paths = [
        _fact(path, role, ids, started, optional) for path, role, optional in named_paths(props)
    ]
    environment = props.get("Environment", "").split()[:16]
    return _fit(
        UnitFile(
            unit=props.get("Id", args.unit),
            files=files,
            user=user or "root",
            started_at=started,
            environment=environment,
            text=text,
            paths=paths,
        )
    )
