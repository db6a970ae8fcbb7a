"""Where a unit's configuration says it listens and what it reaches: the ports and socket
paths its environment, its command line and its config files name.

A *mention* is one such endpoint with where it was read (``Environment=DB_URL``,
``/etc/nginx/sites-enabled/shop:14``) and what the words around it say it is: ``own``
(a listen or bind setting: it serves there), ``reach`` (a URL, a proxy's upstream, a
host:port under any other name: it connects there) or ``either`` (a bare port whose
setting does not say). Only the endpoint and the name of the setting are kept, never a
value around them: a URL's password, a key's secret never leave this module.

Pure functions over text (tests feed them what a host holds); reading the files, and
which files, is ``_config_files``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

Role = Literal["own", "reach", "either"]

#: Hosts that mean this host.
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "*", "", "ip6-localhost"}
#: Setting names that say "I serve here".
_OWN_WORDS = ("listen", "bind")
#: Setting names under which a bare number is a port (anything else is not read).
_PORT_WORDS = (
    "port",
    "listen",
    "bind",
    "upstream",
    "backend",
    "server",
    "addr",
    "url",
    "uri",
    "dsn",
    "endpoint",
    "target",
    "host",
    "socket",
)
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]*\]|[A-Za-z0-9_.\-*]*):(?P<port>\d{1,5})$")
_URL = re.compile(r"[a-z][a-z0-9+.\-]*://[^\s\"',;]+", re.I)
_SOCKET_PATH = re.compile(r"(?:unix:)?(/[\w.\-/@]+\.sock(?:et)?)\b")


@dataclass(frozen=True)
class Mention:
    """One endpoint a unit's configuration names: a TCP port on this host, or a Unix
    socket path."""

    port: int | None
    path: str | None
    role: Role
    source: str

    @property
    def endpoint(self) -> str:
        return self.path if self.path else f":{self.port}"


def _port(text: str) -> int | None:
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def _local(host: str) -> bool:
    host = host.strip("[]").lower()
    return host in LOCAL_HOSTS or host.startswith("127.")


def endpoint_of(value: str, role: Role, source: str) -> Mention | None:
    """A mention from one value: ``unix:/run/x.sock``, a URL with a local host,
    ``host:port``, ``:port`` or a bare port; None for anything else (or another host)."""
    value = value.strip().strip("\"'").rstrip(";,")
    path = _SOCKET_PATH.fullmatch(value)
    if path:
        return Mention(None, path.group(1), role, source)
    if "://" in value:
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            return None
        host = parts.hostname or ""
        if parts.scheme.lower() in ("unix", "http+unix") and parts.path:
            return Mention(None, parts.path, role, source)
        if port is None:
            port = _DEFAULT_PORTS.get(parts.scheme.lower())
        if port is None or not _local(host):
            return None
        return Mention(port, None, "reach" if role == "either" else role, source)
    hostport = _HOST_PORT.match(value)
    if hostport:
        port = _port(hostport.group("port"))
        if port is None or not _local(hostport.group("host")):
            return None
        return Mention(port, None, role, source)
    port = _port(value)
    return Mention(port, None, role, source) if port is not None else None


def _role_of(name: str) -> Role | None:
    """What a setting's name says of the numbers under it; None: not a port setting."""
    lowered = name.lower().replace("-", "_").lstrip("_")
    if any(word in lowered for word in _OWN_WORDS):
        return "own"
    if lowered in ("port", "p", "http_port", "server_port"):
        return "either"
    if any(word in lowered for word in _PORT_WORDS):
        return "reach"
    return None


def from_setting(name: str, value: str, source: str) -> Iterator[Mention]:
    """Mentions in one setting ``name=value`` (an environment variable, a flag, a key of
    a config file). URLs and socket paths count under any name; a bare port only under
    a name that says port, listen, upstream and the like."""
    role = _role_of(name)
    found = False
    for url in _URL.findall(value):
        mention = endpoint_of(url, "own" if role == "own" else "reach", source)
        if mention is not None:
            found = True
            yield mention
    if found:
        return
    for path in _SOCKET_PATH.findall(value):
        found = True
        yield Mention(None, path, role or "either", source)
    if found:
        return
    for word in re.split(r"[\s,]+", value):
        hostport = _HOST_PORT.match(word.strip("\"'"))
        if role is None and not (hostport and hostport.group("host")):
            continue  # under a name that says nothing of ports, only host:port counts
        mention = endpoint_of(word, role or "reach", source)
        if mention is not None:
            yield mention


def from_environment(assignments: list[str], source: str = "Environment") -> Iterator[Mention]:
    """``KEY=value`` entries (Environment=, an EnvironmentFile=): the source names the
    key, never its value."""
    for entry in assignments:
        key, sep, value = entry.partition("=")
        if sep and key.strip():
            yield from from_setting(key.strip(), value, f"{source}={key.strip()}")


def from_argv(argv: list[str], source: str) -> Iterator[Mention]:
    """A command line: ``--port 8080``, ``--listen=:80``, ``-p 9000``, ``KEY=value``,
    a URL or ``host:port`` anywhere, and a bare port after a program that takes one
    positionally (only when nothing else in it names a port)."""
    found: list[Mention] = []
    index = 1
    while index < len(argv):
        word = argv[index]
        if word.startswith("-"):
            flag, sep, value = word.lstrip("-").partition("=")
            if not sep and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
                if _role_of(flag) is not None:
                    value = argv[index + 1]
                    index += 1
            if value:
                found += from_setting(flag, value, source)
        elif "=" in word and not word.startswith("/"):
            key, _, value = word.partition("=")
            found += from_setting(key, value, source)
        else:
            found += from_setting("", word, source)
        index += 1
    if not found:
        bare = [_port(w) for w in argv[1:] if w.isdigit()]
        ports = [p for p in bare if p is not None and p >= 1024]
        if len(ports) == 1:
            found.append(Mention(ports[0], None, "either", source))
    yield from found


def from_structured(data: Any, source: str, name: str = "") -> Iterator[Mention]:
    """A parsed JSON/YAML-like document: every key's value, under that key's name."""
    if isinstance(data, dict):
        for key, value in list(data.items())[:500]:
            yield from from_structured(value, source, str(key))
    elif isinstance(data, list):
        for item in data[:200]:
            yield from from_structured(item, source, name)
    elif isinstance(data, bool) or data is None:
        return
    elif isinstance(data, int):
        if _role_of(name) is not None:
            yield from from_setting(name, str(data), source)
    else:
        yield from from_setting(name, str(data), source)


_KEY_VALUE = re.compile(r"^\s*(?P<key>[A-Za-z_][\w.\-]*)\s*(?:=|:|\s)\s*(?P<value>.+?)\s*$")


def from_generic(text: str, path: str) -> Iterator[Mention]:
    """A config file of no known program: JSON when it parses, otherwise ``key = value``,
    ``key: value`` or ``key value`` lines (INI, TOML, YAML, env files)."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield from from_structured(json.loads(text), path)
            return
        except ValueError:
            pass
    for number, line in enumerate(text.splitlines()[:5000], 1):
        if line.lstrip().startswith(("#", ";", "//")):
            continue
        match = _KEY_VALUE.match(line.removeprefix("export "))
        if match:
            yield from from_setting(match.group("key"), match.group("value"), f"{path}:{number}")
