"""Where in opsbot.toml a validation error is, said as the operator wrote the file.

tomllib gives values, not positions, and pydantic gives key paths
(``diagnose.health.web.url``). :func:`key_lines` finds each key's line in the raw text
the simple way: it follows ``[table]`` and ``[[array.table]]`` headers (the n-th
header of an array table is its element n) and ``key =`` lines, dotted and quoted keys
included, and skips what lies inside a multi-line string or array. An error is placed
at the longest prefix of its path found there: ``diagnose.watch.1`` at the ``watch =``
line, a key inside an inline table at the line of the table's key.

:func:`located` says each error as ``LINE: KEY.PATH: MESSAGE`` (LINE None where the path
is nowhere in the text, as for an error of the whole file). The path is the one written
in the file: pydantic's tag of a union member (``notify.channels.ops.slack.url``), its
``[key]`` of a dict key and the index 0 of a lone table read as a list of one
(``[executor.apply_window]``) are left out. A key the schema does not know is an "unknown
key", with the nearest known one at that place when one is close ("did you mean
max_steps?").
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from shared_schema import field_errors

_BARE = r"[A-Za-z0-9_-]+"
_KEY = rf"""(?:{_BARE}|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_ARRAY_TABLE = re.compile(rf"\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE = re.compile(rf"\s*\[\s*({_DOTTED})\s*\]")
_ASSIGN = re.compile(rf"\s*({_DOTTED})\s*=(.*)")
_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'""")
Path = tuple[str, ...]


@dataclass(frozen=True)
class Located:
    """One validation error: its line (None: not found), key path and message."""

    line: int | None
    path: str
    message: str


def _keys(dotted: str) -> Path:
    """``a."b.c".d`` as ("a", "b.c", "d")."""
    parts = re.findall(_KEY, dotted)
    return tuple(
        p if re.fullmatch(_BARE, p) else str(tomllib.loads(f"k = {p}")["k"]) for p in parts
    )


def _depth(value: str) -> int:
    """How many brackets ``value`` (a line's text after its key) leaves open."""
    bare = _STRING.sub("", value).split("#", 1)[0]
    return bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")


def key_lines(text: str) -> dict[Path, int]:
    """The line (from 1) of each key path the text defines, tables and their prefixes
    included; the first definition wins."""
    lines: dict[Path, int] = {}
    table: Path = ()
    arrays: dict[Path, int] = {}  # an array table's path -> its current element
    quote: str | None = None  # inside a multi-line string that opened with this
    depth = 0  # brackets of a multi-line array left open
    for number, line in enumerate(text.splitlines(), 1):
        if quote is not None:
            if line.count(quote) % 2:
                quote = None
            continue
        if depth > 0:
            depth = max(depth + _depth(line), 0)
            continue
        if match := _ARRAY_TABLE.match(line):
            path = _keys(match[1])
            arrays[path] = arrays.get(path, -1) + 1
            table = (*path, str(arrays[path]))
            _define(lines, path, number)
            _define(lines, table, number)
        elif match := _TABLE.match(line):
            table = _within_arrays(_keys(match[1]), arrays)
            _define(lines, table, number)
        elif match := _ASSIGN.match(line):
            _define(lines, (*table, *_keys(match[1])), number)
            depth = max(_depth(match[2]), 0)
        for delimiter in ('"""', "'''"):
            if line.count(delimiter) % 2:
                quote = delimiter
                break
    return lines


def _within_arrays(path: Path, arrays: Mapping[Path, int]) -> Path:
    """A sub-table of an array table's element (``[a.b]`` after ``[[a]]``) is that
    element's: ``a.0.b``."""
    for array, index in sorted(arrays.items(), key=lambda item: -len(item[0])):
        if path[: len(array)] == array and len(path) > len(array):
            return (*array, str(index), *path[len(array) :])
    return path


def _define(lines: dict[Path, int], path: Path, number: int) -> None:
    for end in range(1, len(path) + 1):
        lines.setdefault(path[:end], number)


def line_of(lines: Mapping[Path, int], path: Path) -> int | None:
    """The line of ``path``, or of its longest prefix the text defines."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def as_written(document: Any, loc: Sequence[int | str]) -> Path:
    """pydantic's location of an error as the key path in the file: without the tag of
    a union member (a channel's ``kind``) or the ``[key]`` of a dict key."""
    node, path = document, []
    for item in loc:
        key = str(item)
        if key == "[key]" or (isinstance(node, dict) and isinstance(item, int)):
            continue  # a dict key's marker; a lone table read as a list of one
        if isinstance(node, dict):
            if key not in node and node.get("kind") == key:
                continue
            node = node.get(key)
        elif isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
            node = node[item]
        else:
            node = None
        path.append(key)
    return tuple(path)


def known_keys(schema: Mapping[str, Any], loc: Sequence[int | str]) -> list[str]:
    """The keys the JSON schema allows at ``loc`` (pydantic's location, tags included)."""
    definitions = schema.get("$defs", {})

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node:
            node = definitions[str(node["$ref"]).rsplit("/", 1)[-1]]
        options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
        return resolve(options[0]) if len(options) == 1 else node

    node = resolve(schema)
    for item in loc:
        key = str(item)
        mapping = node.get("discriminator", {}).get("mapping", {})
        if key in node.get("properties", {}):
            node = node["properties"][key]
        elif key in mapping:
            node = {"$ref": mapping[key]}
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif node.get("patternProperties"):
            node = next(iter(node["patternProperties"].values()))
        elif isinstance(node.get("items"), dict):
            node = node["items"]
        else:
            return []
        node = resolve(node)
    return sorted(node.get("properties", {}))


def located(
    exc: ValidationError, text: str, document: Any, model: type[BaseModel]
) -> list[Located]:
    """Each error of ``exc`` (validating ``document``, read from ``text`` against
    ``model``), in the order of the file's lines, those found nowhere last."""
    lines = key_lines(text)
    schema: dict[str, Any] | None = None
    found: list[Located] = []
    errors = exc.errors(include_url=False, include_context=False)
    for error, said in zip(errors, field_errors(exc), strict=True):
        path = as_written(document, error["loc"])
        message = said.message
        if error["type"] == "extra_forbidden" and path:
            if schema is None:
                schema = model.model_json_schema()
            close = difflib.get_close_matches(path[-1], known_keys(schema, error["loc"][:-1]))
            message = f"unknown key (did you mean {close[0]}?)" if close else "unknown key"
        found.append(Located(line_of(lines, path), ".".join(path), message))
    return sorted(found, key=lambda e: (e.line is None, e.line or 0))
