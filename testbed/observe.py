"""Read the scenario stack's state as an operator would: unit properties, HTTP status codes
and journal entries, all from inside the container.  Nothing here changes anything."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from testbed.container import BootedSystemd

#: The unit properties the scenarios look at.
UNIT_STATE = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "MainPID")

CURL_REFUSED = 7
CURL_TIMED_OUT = 28


@dataclass(frozen=True)
class HttpProbe:
    """One GET with curl: the HTTP status (0 when there was no answer) and curl's exit code."""

    url: str
    status: int
    curl_exit: int

    @property
    def refused(self) -> bool:
        return self.curl_exit == CURL_REFUSED

    @property
    def timed_out(self) -> bool:
        return self.curl_exit == CURL_TIMED_OUT

    def __str__(self) -> str:
        if self.status:
            return f"GET {self.url} -> {self.status}"
        why = {CURL_REFUSED: "connection refused", CURL_TIMED_OUT: "timed out"}.get(
            self.curl_exit, f"curl exit {self.curl_exit}"
        )
        return f"GET {self.url} -> no answer ({why})"


def http_probe(ct: BootedSystemd, url: str, timeout: float = 2.0) -> HttpProbe:
    """GET ``url`` from inside the container, giving up after ``timeout`` seconds."""
    argv = [
        "curl",
        "--silent",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code}",
        "--max-time",
        f"{timeout:g}",
        url,
    ]
    proc = ct.run(argv, check=False, timeout=timeout + 10)
    code = proc.stdout.strip()
    return HttpProbe(url, int(code) if code.isdigit() else 0, proc.returncode)


def unit_properties(
    ct: BootedSystemd,
    unit: str,
    names: tuple[str, ...] = UNIT_STATE,
) -> dict[str, str]:
    """``systemctl show --property=...`` of ``unit``, parsed into a dict."""
    out = ct.run(["systemctl", "show", f"--property={','.join(names)}", "--", unit]).stdout
    props: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key] = value
    return props


def unit_state(ct: BootedSystemd, unit: str) -> str:
    """``ActiveState/SubState (Result=...)``, the one line an operator reads first."""
    p = unit_properties(ct, unit)
    return f"{p['ActiveState']}/{p['SubState']} (Result={p['Result']}, LoadState={p['LoadState']})"


def journal_cursor(ct: BootedSystemd) -> str:
    """The cursor of the newest journal entry: later reads can start after it."""
    out = ct.run(["journalctl", "--no-pager", "--lines=1", "--output=json"]).stdout.strip()
    return str(json.loads(out.splitlines()[-1])["__CURSOR"])


def journal_entries(
    ct: BootedSystemd,
    *args: str,
    after: str | None = None,
) -> list[dict[str, str]]:
    """Journal entries, oldest first, each a dict of its fields as text; ``args`` are further
    journalctl options and ``after`` a cursor to start after.

    Filter on fields in Python (:func:`find_journal_entry`), not with journalctl matches:
    journalctl 252's ``--after-cursor`` combined with a match (``SYSLOG_IDENTIFIER=nginx``,
    ``-t nginx``, ``UNIT=...``) skips the first matching entry after the cursor whenever the
    cursor's own entry does not match (``--cursor`` and ``--since`` do not)."""
    argv = ["journalctl", "--no-pager", "--output=json", *args]
    if after is not None:
        argv.append(f"--after-cursor={after}")
    entries = []
    for line in ct.run(argv).stdout.splitlines():
        raw: dict[str, Any] = json.loads(line)
        entries.append({key: _field_text(value) for key, value in raw.items()})
    return entries


def _field_text(value: Any) -> str:
    if isinstance(value, list):  # journalctl gives non-UTF-8 or binary fields as byte lists
        if all(isinstance(v, int) for v in value):
            return bytes(value).decode(errors="replace")
        return "\n".join(_field_text(v) for v in value)
    return "" if value is None else str(value)


def is_about(entry: dict[str, str], unit: str) -> bool:
    """True for an entry ``unit`` wrote (_SYSTEMD_UNIT) or systemd wrote about it (UNIT),
    which is what ``journalctl -u`` shows."""
    return unit in (entry.get("_SYSTEMD_UNIT"), entry.get("UNIT"))


def find_journal_entry(
    ct: BootedSystemd, needle: str, *, unit: str | None = None, after: str | None = None
) -> dict[str, str] | None:
    """The first entry (after the cursor ``after``, about ``unit`` if given) whose MESSAGE
    contains ``needle``, or None."""
    for entry in journal_entries(ct, after=after):
        if (unit is None or is_about(entry, unit)) and needle in entry.get("MESSAGE", ""):
            return entry
    return None
