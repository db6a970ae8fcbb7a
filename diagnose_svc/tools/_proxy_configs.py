"""Where a reverse proxy sends its requests, as its own configuration says: nginx
(``proxy_pass``, ``*_pass``, ``upstream`` blocks, ``listen``), HAProxy (``server``,
``bind``) and Caddy (``reverse_proxy``, ``php_fastcgi``, site addresses), following
their includes within bounds.

Pure over a ``read(path) -> text`` function (``_config_files`` gives the real one, tests
a dict); what the proxy reaches is a ``reach`` mention, where it serves an ``own`` one.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterator

from diagnose_svc.tools._mentions import Mention, endpoint_of

#: Files read per proxy at most (the main one and its includes), and include depth.
MAX_FILES = 24
MAX_DEPTH = 4

Reader = Callable[[str], str]
Globber = Callable[[str], list[str]]


def glob_files(pattern: str) -> list[str]:
    """The files an include pattern names, sorted, bounded."""
    return sorted(glob.glob(pattern))[:MAX_FILES]


class _Walk:
    """The files of one proxy's configuration, each read once, in include order."""

    def __init__(self, read: Reader, globber: Globber) -> None:
        self.read = read
        self.globber = globber
        self.seen: set[str] = set()

    def files(self, pattern: str, base: str) -> list[str]:
        path = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
        if any(ch in path for ch in "*?["):
            return self.globber(path)
        return [path]

    def take(self, path: str) -> bool:
        if path in self.seen or len(self.seen) >= MAX_FILES:
            return False
        self.seen.add(path)
        return True


def _strip_comment(line: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", line)


# -- nginx -----------------------------------------------------------------------------------

_NGINX_PASS = ("proxy_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass")


def _nginx_statements(text: str) -> Iterator[tuple[int, list[str], str]]:
    """(line, words, what ends it: ';', '{' or '}') for each statement."""
    words: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        for token in re.findall(r"[{};]|\"[^\"]*\"|'[^']*'|[^\s{};]+", _strip_comment(line)):
            if token in ("{", "}", ";"):
                yield start or number, words, token
                words, start = [], 0
            else:
                start = start or number
                words.append(token.strip("\"'"))


def nginx(path: str, read: Reader, globber: Globber = glob_files) -> Iterator[Mention]:
    walk = _Walk(read, globber)
    base = os.path.dirname(path)
    upstreams: dict[str, list[Mention]] = {}
    passes: list[tuple[str, str]] = []
    out: list[Mention] = []

    def visit(file: str, depth: int) -> None:
        if not walk.take(file):
            return
        text = walk.read(file)
        block: list[tuple[str, str]] = []
        for number, words, end in _nginx_statements(text):
            source = f"{file}:{number}"
            if end == "}":
                if block:
                    block.pop()
                continue
            if not words:
                continue
            name = words[0]
            if end == "{":
                block.append((name, words[1] if len(words) > 1 else ""))
                continue
            if name == "include" and len(words) > 1 and depth < MAX_DEPTH:
                for included in walk.files(words[1], base):
                    visit(included, depth + 1)
            elif name == "listen" and len(words) > 1:
                mention = endpoint_of(words[1], "own", source)
                if mention is not None:
                    out.append(mention)
            elif name == "server" and len(words) > 1 and block and block[-1][0] == "upstream":
                mention = endpoint_of(words[1], "reach", source)
                if mention is not None:
                    upstreams.setdefault(block[-1][1], []).append(mention)
            elif name in _NGINX_PASS and len(words) > 1:
                passes.append((words[1], source))

    visit(path, 0)
    for target, source in passes:
        host = re.sub(r"^[a-z]+://", "", target).split("/")[0].split(":")[0]
        if host in upstreams:
            out += upstreams[host]
            continue
        value = target if "://" in target or target.startswith("unix:") else f"http://{target}"
        mention = endpoint_of(value, "reach", source)
        if mention is not None:
            out.append(mention)
    yield from out


# -- HAProxy ---------------------------------------------------------------------------------


def haproxy(paths: list[str], read: Reader, globber: Globber = glob_files) -> Iterator[Mention]:
    """``-f`` may name files or directories (every ``*.cfg`` in it, in order)."""
    walk = _Walk(read, globber)
    for given in paths:
        files = globber(os.path.join(given, "*.cfg")) if os.path.isdir(given) else [given]
        for file in files:
            if not walk.take(file):
                continue
            for number, line in enumerate(walk.read(file).splitlines(), 1):
                words = _strip_comment(line).split()
                source = f"{file}:{number}"
                if len(words) >= 2 and words[0] == "bind":
                    for address in words[1].split(","):
                        mention = endpoint_of(address, "own", source)
                        if mention is not None:
                            yield mention
                elif len(words) >= 3 and words[0] == "server":
                    mention = endpoint_of(words[2], "reach", source)
                    if mention is not None:
                        yield mention


# -- Caddy -----------------------------------------------------------------------------------

_CADDY_REACH = ("reverse_proxy", "php_fastcgi", "to")


def caddy(path: str, read: Reader, globber: Globber = glob_files) -> Iterator[Mention]:
    walk = _Walk(read, globber)
    base = os.path.dirname(path)

    def visit(file: str, depth: int) -> Iterator[Mention]:
        if not walk.take(file):
            return
        level = 0
        for number, line in enumerate(walk.read(file).splitlines(), 1):
            words = _strip_comment(line).split()
            source = f"{file}:{number}"
            if not words:
                continue
            if level == 0 and words[-1] == "{" and words[0] != "(":
                for address in " ".join(words[:-1]).replace(",", " ").split():
                    value = address if "://" in address or ":" in address else ""
                    mention = endpoint_of(value, "own", source) if value else None
                    if mention is not None:
                        yield mention
            elif words[0] == "import" and len(words) > 1 and depth < MAX_DEPTH:
                for included in walk.files(words[1], base):
                    yield from visit(included, depth + 1)
            elif words[0] in _CADDY_REACH:
                for word in words[1:]:
                    if word in ("{", "}") or word.startswith(("@", "/")):
                        continue
                    if word.startswith(":"):
                        value = f"http://localhost{word}"
                    else:
                        value = word if "://" in word else f"http://{word}"
                    mention = endpoint_of(value, "reach", source)
                    if mention is not None:
                        yield mention
            level += line.count("{") - line.count("}")

    yield from visit(path, 0)
