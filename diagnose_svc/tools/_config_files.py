"""The configuration one unit runs with, as far as the diagnose user may read it: its
``Environment=``, its command line (``ExecStart=``, and its main process's
``/proc/PID/cmdline`` when readable), its ``EnvironmentFile=`` files, and the config
files its command names (a reverse proxy's own: nginx, HAProxy, Caddy, with their
includes; any other: read as JSON or ``key = value`` lines).

A file the diagnose user cannot read (a root-only mode, a home directory or a private
/tmp hidden from its sandbox) is reported as unreadable, never worked around.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from diagnose_svc.tools import _proxy_configs as proxies
from diagnose_svc.tools._mentions import Mention, from_argv, from_environment, from_generic

#: Bytes read of one config file at most.
FILE_LIMIT = 256 * 1024
#: Flags whose value is a config file (``-c FILE``, ``--config=FILE``).
_CONFIG_FLAGS = ("-c", "-f", "--config", "--conf", "--config-file", "--configfile", "--settings")
_CONFIG_SUFFIXES = (".conf", ".cfg", ".json", ".yaml", ".yml", ".toml", ".ini", ".env")
#: A proxy's config when its command names none (Debian's paths).
_DEFAULT_CONFIG = {
    "nginx": "/etc/nginx/nginx.conf",
    "haproxy": "/etc/haproxy/haproxy.cfg",
    "caddy": "/etc/caddy/Caddyfile",
}


@dataclass
class UnitConfig:
    """What one unit's configuration names: its mentions, and the files it could not read."""

    unit: str
    mentions: list[Mention] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    #: Every file read for it, in order (a proxy's includes too).
    files: list[str] = field(default_factory=list)
    #: What a change to would change its mentions: each file tried (read or not) and the
    #: directory of each, and of each include pattern (a file added to sites-enabled/).
    watched: list[str] = field(default_factory=list)


class _Files:
    """Reads within the bound; remembers what was read, and what could not be, and why."""

    def __init__(self) -> None:
        self.unreadable: list[str] = []
        self.read_paths: list[str] = []
        self.watched: list[str] = []

    def watch(self, path: str) -> None:
        self.watched += [path, os.path.dirname(path)]

    def glob(self, pattern: str) -> list[str]:
        """A proxy's include pattern, its directory watched (its first without a
        wildcard)."""
        head = pattern
        while any(ch in head for ch in "*?["):
            head = os.path.dirname(head)
        self.watched.append(head)
        return proxies.glob_files(pattern)

    def read(self, path: str) -> str:
        self.watch(path)
        try:
            with open(path, "rb") as handle:
                text = handle.read(FILE_LIMIT).decode("utf-8", "replace")
            self.read_paths.append(path)
            return text
        except PermissionError:
            self.unreadable.append(f"{path} (permission denied)")
        except FileNotFoundError:
            self.unreadable.append(f"{path} (not there, or hidden from opsbot-diagnose)")
        except OSError as exc:
            self.unreadable.append(f"{path} ({exc.strerror or exc})")
        return ""


def config_paths(argv: list[str]) -> list[str]:
    """The config files a command line names: after a config flag, or an absolute path
    with a config file's suffix."""
    out: list[str] = []
    for index, word in enumerate(argv[1:], 1):
        flag, sep, value = word.partition("=")
        if sep and flag in _CONFIG_FLAGS:
            out.append(value)
        elif word in _CONFIG_FLAGS and index + 1 < len(argv):
            out.append(argv[index + 1])
        elif word.startswith("/") and word.endswith(_CONFIG_SUFFIXES):
            out.append(word)
    return [p for p in dict.fromkeys(out) if p.startswith("/")]


def _program(argv: list[str]) -> str:
    return os.path.basename(argv[0]) if argv else ""


def _proxy_mentions(program: str, argv: list[str], files: _Files) -> Iterator[Mention] | None:
    """A known proxy's mentions, or None when ``program`` is none of them."""
    named = config_paths(argv)
    if program.startswith("nginx"):
        path = named[0] if named else _DEFAULT_CONFIG["nginx"]
        return proxies.nginx(path, files.read, files.glob)
    if program.startswith("haproxy"):
        return proxies.haproxy(named or [_DEFAULT_CONFIG["haproxy"]], files.read, files.glob)
    if program == "caddy" and "json" not in " ".join(argv):
        path = named[0] if named else _DEFAULT_CONFIG["caddy"]
        return proxies.caddy(path, files.read, files.glob)
    return None


def unit_config(
    unit: str,
    environment: list[str],
    commands: list[list[str]],
    environment_files: list[str],
    cmdline: list[str] | None,
    optional_files: Sequence[str] = (),
) -> UnitConfig:
    """Everything ``unit`` is configured with that names an endpoint; ``optional_files``
    are the ``EnvironmentFile=-`` files not there now (watched: one may appear)."""
    files = _Files()
    for path in optional_files:
        files.watch(path)
    mentions = list(from_environment(environment))
    for path in environment_files:
        text = files.read(path)
        lines = [line.removeprefix("export ").strip() for line in text.splitlines()]
        mentions += from_environment([line for line in lines if line and line[0] != "#"], path)
    argvs = [argv for argv in commands if argv]
    if cmdline and cmdline not in argvs:
        argvs.append(cmdline)
    for index, argv in enumerate(argvs):
        source = "ExecStart=" if index < len(commands) else "its command line"
        mentions += from_argv(argv, source)
        proxy = _proxy_mentions(_program(argv), argv, files)
        if proxy is not None:
            mentions += proxy
            continue
        for path in config_paths(argv):
            mentions += from_generic(files.read(path), path)
    unique = list(dict.fromkeys(mentions))
    return UnitConfig(
        unit,
        unique,
        list(dict.fromkeys(files.unreadable)),
        list(dict.fromkeys(files.read_paths)),
        list(dict.fromkeys(files.watched)),
    )
