"""The installed code's stamp (shared_io/code_stamp.py): what an install records, and which
daemon it judges to run older code, from what systemd says of when each started."""

from __future__ import annotations

import ast
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared_io import code_stamp
from shared_io.code_stamp import DAEMONS, PACKAGES, daemons_code, read_stamp, record
from shared_io.errors import StoreError, UnitStateError
from shared_io.unit_show import UnitProperties

REPO = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 12, 6, 18, 0, tzinfo=UTC)
FIRST = {name: f"{name}-1" for name in (*PACKAGES, "dependencies")}


def test_record_moves_the_change_time_of_only_the_parts_whose_sha256_changed(
    tmp_path: Path,
) -> None:
    """The first record marks every part changed; the same code again changes nothing and
    keeps the times; a new plans package moves plans' time alone."""
    path = tmp_path / "opsbot-code.json"
    _, changed = record(path, now=T0, found=FIRST)
    assert sorted(changed) == sorted(FIRST)
    _, changed = record(path, now=T0 + timedelta(hours=1), found=FIRST)
    assert changed == []
    later = T0 + timedelta(hours=2)
    stamp, changed = record(path, now=later, found={**FIRST, "plans": "plans-2"})
    assert changed == ["plans"]
    assert stamp == read_stamp(path)
    assert stamp.parts["plans"].changed_at == later
    assert stamp.parts["shared_io"].changed_at == T0
    assert stamp.changed_at(DAEMONS["opsbot-web.service"]) == (
        T0,
        list(DAEMONS["opsbot-web.service"]),
    )
    assert stamp.changed_at(DAEMONS["opsbot-executor.service"]) == (later, ["plans"])


def test_a_stamp_that_cannot_be_read_says_how_to_write_it_again(tmp_path: Path) -> None:
    """A cut stamp is a StoreError that names install.sh; an absent one is None."""
    path = tmp_path / "opsbot-code.json"
    assert read_stamp(path) is None
    path.write_text('{"version": "0.1.0", "parts"')
    with pytest.raises(StoreError) as caught:
        read_stamp(path)
    assert "install.sh" in str(caught.value.hint)


def _systemd(states: dict[str, tuple[str, str]]) -> code_stamp.Show:
    """What `systemctl show` says of each daemon: (ActiveState, ExecMainStartTimestamp)."""

    def read(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
        assert list(properties) == ["ActiveState", "ExecMainStartTimestamp"]
        return [
            UnitProperties(
                unit,
                {"ActiveState": states[unit][0], "ExecMainStartTimestamp": states[unit][1]},
            )
            for unit in units
        ]

    return read


def test_a_daemon_that_started_before_its_code_changed_runs_older_code(tmp_path: Path) -> None:
    """plans changed at 20:00: the executor and the approver, started at 19:00, run older
    code, each with the part that changed and the restart to run; the page (no plans in
    it) and the diagnosis started at 19:00 run the current one; one not running is said so."""
    path = tmp_path / "opsbot-code.json"
    record(path, now=T0, found=FIRST)
    stamp, _ = record(path, now=T0 + timedelta(hours=2), found={**FIRST, "plans": "plans-2"})
    at_19 = "Sun 2026-12-06 19:00:00.000001 UTC"
    found = daemons_code(
        stamp,
        _systemd(
            {
                "opsbot-executor.service": ("active", at_19),
                "opsbot-diagnose.service": ("active", at_19),
                "opsbot-approver.service": ("reloading", at_19),
                "opsbot-web.service": ("inactive", ""),
            }
        ),
    )
    said = {daemon.unit: (daemon.status, daemon.changed, daemon.action) for daemon in found}
    assert said == {
        "opsbot-executor.service": (
            "older",
            ("plans",),
            "sudo systemctl restart opsbot-executor.service",
        ),
        "opsbot-diagnose.service": ("current", (), ""),
        "opsbot-approver.service": (
            "older",
            ("plans",),
            "sudo systemctl restart opsbot-approver.service",
        ),
        "opsbot-web.service": ("not running", (), ""),
    }
    assert found[0].detail == (
        "runs older code: started 2026-12-06 19:00:00 UTC, plans changed 2026-12-06 20:00:00 UTC"
    )


def test_daemons_are_unknown_when_systemd_cannot_say(tmp_path: Path) -> None:
    """systemctl failing is said with every daemon, never taken for "current"."""
    stamp, _ = record(tmp_path / "stamp.json", now=T0, found=FIRST)

    def fails(units: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
        raise UnitStateError("cannot read the state of opsbot-executor.service: bus down")

    found = daemons_code(stamp, fails)
    assert {daemon.status for daemon in found} == {"unknown"}
    assert all("bus down" in daemon.detail for daemon in found)


def _imports(package: str) -> set[str]:
    """The opsbot packages a package's modules import (its own left out)."""
    found = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found |= {name.split(".")[0] for name in names} & set(PACKAGES)
    return found - {package}


def test_each_daemon_lists_every_package_its_code_can_import() -> None:
    """A daemon's parts are closed under import: a change to any package its code reaches
    marks it older (shown first a table that leaves out what the executor imports)."""

    def missing(table: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
        gaps = {}
        for unit, parts in table.items():
            reached = set().union(*(_imports(p) for p in parts if p in PACKAGES))
            if not reached <= set(parts):
                gaps[unit] = reached - set(parts)
        return gaps

    short = {**DAEMONS, "opsbot-executor.service": ("executor_svc", "shared_io")}
    assert missing(short) == {"opsbot-executor.service": {"plans", "shared_schema"}}
    assert missing(dict(DAEMONS)) == {}
    assert {unit.removeprefix("opsbot-").removesuffix(".service") for unit in DAEMONS} == {
        "executor",
        "diagnose",
        "approver",
        "web",
    }


def test_a_package_digest_follows_its_files_and_not_its_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line added to a module changes the package's sha256; a __pycache__ written by
    an import does not."""
    package = tmp_path / "stamped_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_stamp.package_digest("stamped_pkg")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0bytecode")
    assert code_stamp.package_digest("stamped_pkg") == first
    (package / "__init__.py").write_text("VALUE = 1\n# a later version\n")
    assert code_stamp.package_digest("stamped_pkg") != first
    assert code_stamp.package_digest("no_such_package_here") == "absent"
    sys.modules.pop("stamped_pkg", None)


def test_a_packaged_venv_keeps_its_stamp_out_of_the_files_dpkg_owns(tmp_path: Path) -> None:
    """install.sh's venv (/opt/opsbot/venv, or one given with --venv) holds its stamp; a
    package's venv under /usr, whose files are dpkg's, has it in /var/lib/opsbot-code,
    where check-config reads it too, and the first record makes that directory."""
    assert code_stamp.stamp_path("/opt/opsbot/venv") == Path("/opt/opsbot/venv/opsbot-code.json")
    assert code_stamp.stamp_path("/srv/venv") == Path("/srv/venv/opsbot-code.json")
    assert code_stamp.stamp_path("/usr/lib/opsbot/venv") == Path(
        "/var/lib/opsbot-code/opsbot-code.json"
    )
    assert code_stamp.stamp_path("/usrlocal/venv") == Path("/usrlocal/venv/opsbot-code.json")
    stamp = tmp_path / "opsbot-code" / "opsbot-code.json"
    record(stamp, now=T0, found=FIRST)
    assert read_stamp(stamp) is not None
