"""What the diagnosis keeps of every service between diagnoses, and what makes it read a
service again: a unit file or drop-in directory that appeared, went or changed (by its
name: one service, a template's instances, a prefix's, every service), and what one
process kept for the next (only in the same boot, only whole)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagnose_svc.tools import _host_units, _units_kept
from diagnose_svc.tools._host_units import Touched, _SearchPath


def touched_by(*entries: str) -> Touched:
    touched = Touched()
    for entry in entries:
        touched.add(entry)
    return touched


def test_a_changed_file_or_drop_in_directory_touches_the_services_it_defines() -> None:
    """app.service and app.service.d touch app.service; a template's file or drop-ins
    touch its instances; a prefix drop-in (web-.service.d) every service its name begins;
    another type's file and a .wants/ directory of links touch none."""
    assert touched_by("app.service")("app.service")
    assert not touched_by("app.service")("app2.service")
    assert touched_by("app.service.d")("app.service")
    assert touched_by("worker@.service")("worker@3.service")
    assert touched_by("worker@.service.d")("worker@eu.service")
    assert not touched_by("worker@.service")("worker.service")
    assert touched_by("web-.service.d")("web-shop.service")
    assert not touched_by("web-.service.d")("webshop.service")
    other = touched_by("app.socket", "multi-user.target.wants", "app.timer.d")
    assert not other("app.service")


def test_a_drop_in_for_every_service_touches_every_service() -> None:
    """service.d/ (systemd's drop-ins for every service) touches any service."""
    assert touched_by("service.d")("anything.service")


def test_the_search_path_says_what_appeared_went_or_changed_since_it_last_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first look names every entry; then only a new file, a removed one, and a
    drop-in directory whose files changed."""
    units = tmp_path / "system"
    (units / "app.service.d").mkdir(parents=True)
    (units / "app.service").write_text("[Service]\n")
    (units / "db.service").write_text("[Service]\n")
    monkeypatch.setattr(_host_units, "UNIT_DIRS", (str(units), str(tmp_path / "absent")))
    search = _SearchPath()
    assert search.changed() == {"app.service", "app.service.d", "db.service"}
    assert search.changed() == set()
    (units / "db.service").unlink()
    (units / "cache.service").write_text("[Service]\n")
    (units / "app.service.d" / "50-env.conf").write_text("[Service]\nEnvironment=A=1\n")
    assert search.changed() == {"db.service", "cache.service", "app.service.d"}
    assert search.changed() == set()


def kept(boot: str = "Sun 2026-12-06 09:00:00 UTC") -> _units_kept.Kept:
    return _units_kept.Kept(
        boot=boot,
        stamp=("40", "123", None),
        names=["app.service"],
        definitions=[
            _units_kept.KeptDefinition(
                unit="app.service",
                environment=["PORT=8080"],
                commands=[["/usr/bin/app"]],
                environment_files=[],
                runtime_directories=[],
                files=[("/etc/systemd/system/app.service", (1, 2, 3))],
            )
        ],
    )


def test_what_one_process_kept_is_read_back_in_the_same_boot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept under $STATE_DIRECTORY (0600), it is read back for the same boot; for another
    boot, or without a state directory, nothing is."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    _units_kept.save(kept().model_dump(mode="json"))
    assert (tmp_path / "units.json").stat().st_mode & 0o777 == 0o600
    assert _units_kept.load("Sun 2026-12-06 09:00:00 UTC") == kept()
    assert _units_kept.load("Mon 2026-12-07 06:00:00 UTC") is None
    monkeypatch.delenv("STATE_DIRECTORY")
    assert _units_kept.load("Sun 2026-12-06 09:00:00 UTC") is None


def test_a_damaged_or_foreign_shaped_kept_file_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half-written JSON, or JSON of another shape, is read anew: never an error."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    boot = "Sun 2026-12-06 09:00:00 UTC"
    (tmp_path / "units.json").write_text(kept().model_dump_json()[:-20])
    assert _units_kept.load(boot) is None
    (tmp_path / "units.json").write_text('{"version": 2, "boot": "' + boot + '"}')
    assert _units_kept.load(boot) is None
