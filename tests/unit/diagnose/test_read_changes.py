"""read_changes: what changed for a unit since the host was last seen healthy, read from
dpkg's own log and package lists, file times and ``systemctl show``, on a host laid out
in tmp_path (dpkg's files and the unit's own put where the test says)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from diagnose_svc.tools import ToolContext, read_changes as tool
from diagnose_svc.tools._baseline_store import Snapshot
from diagnose_svc.tools._systemctl import UnitProperties
from shared_schema import DiagnoseSettings

HEALTHY = datetime(2026, 12, 6, 10, 42, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return HEALTHY + timedelta(minutes=minutes)


def stamp(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()), follow_symlinks=False)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """dpkg logs the host's local time; this host's is UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


#: What ``systemctl show`` says of app.service (a test may change it).
PROPS: dict[str, str] = {}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """app.service runs /opt/app/current/bin/app (current -> releases/41) with
    EnvironmentFile=/etc/app/app.env; its unit file and a drop-in; dpkg's log and lists."""
    root = tmp_path
    (root / "etc/app").mkdir(parents=True)
    env = root / "etc/app/app.env"
    env.write_text("PORT=8080\n")
    for release in ("41", "42"):
        (root / f"opt/app/releases/{release}/bin").mkdir(parents=True)
        (root / f"opt/app/releases/{release}/bin/app").write_text("#!/bin/sh\n")
    (root / "opt/app/current").symlink_to("releases/41")
    unit = root / "lib/systemd/app.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\n")
    dropin = root / "etc/systemd/app.service.d/50-mem.conf"
    dropin.parent.mkdir(parents=True)
    dropin.write_text("[Service]\nMemoryMax=1G\n")
    for path in (
        env,
        unit,
        dropin,
        root / "opt/app/current",
        *root.glob("opt/app/releases/*/bin/app"),
    ):
        stamp(path, HEALTHY - timedelta(days=3))
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "app-config.list").write_text(f"/.\n/etc\n{root}/etc/app\n{env}\n")
    (info / "libfoo1:amd64.list").write_text("/usr/lib/libfoo.so.1\n")
    log = root / "var/log/dpkg.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    monkeypatch.setattr(tool, "DPKG_INFO", info)
    monkeypatch.setattr(tool, "DPKG_LOGS", (str(log) + ".1", str(log)))
    PROPS.clear()
    PROPS.update(
        {
            "Id": "app.service",
            "FragmentPath": str(unit),
            "DropInPaths": str(dropin),
            "NeedDaemonReload": "no",
            "ExecStartPre": "",
            "ExecStart": (
                f"{{ path={root}/opt/app/current/bin/app ; argv[]={root}/opt/app/current/bin/app "
                "; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; "
                "status=0/0 }"
            ),
            "EnvironmentFiles": f"{env} (ignore_errors=no)",
            "Environment": "",
            "MainPID": "0",
            "ActiveEnterTimestamp": "Sun 2026-12-06 09:00:00 UTC",
            "WorkingDirectory": "",
        }
    )
    monkeypatch.setattr(
        tool, "show", lambda units, properties: [UnitProperties("app.service", PROPS)]
    )
    snapshot = Snapshot(taken_at=HEALTHY, units={}, listeners=[], edges=[], health={})
    monkeypatch.setattr(tool, "load_baseline", lambda: [snapshot])
    return root


def changes() -> tool.Changes:
    return tool.read_changes(tool.ChangesArgs(unit="app.service"), ToolContext(DiagnoseSettings()))


def dpkg_log(root: Path, *lines: str) -> None:
    (root / "var/log/dpkg.log").write_text("".join(line + "\n" for line in lines))


def test_a_package_that_owns_a_file_the_unit_reads_is_named_with_its_versions_and_time(
    host: Path,
) -> None:
    """After the host was healthy, dpkg upgraded app-config (which owns /etc/app/app.env,
    the unit's EnvironmentFile=) and libfoo1 (which owns nothing the unit names): the
    first is the unit's change, with both versions and the time; the other is listed
    as the host's, not the unit's. What dpkg did before the healthy moment is history."""
    dpkg_log(
        host,
        "2026-12-06 09:10:00 upgrade app-config:all 1.0 1.1",
        "2026-12-06 10:51:03 status half-configured app-config:all 1.2",
        "2026-12-06 10:51:02 upgrade app-config:all 1.1 1.2",
        "2026-12-06 10:55:00 upgrade libfoo1:amd64 2.0 2.1",
    )
    found = changes()
    assert found.since == HEALTHY and found.since_what == "the host was last seen healthy"
    [mine] = found.related
    assert (mine.kind, mine.name, mine.detail, mine.at) == (
        "package",
        "app-config",
        "1.1 -> 1.2 upgraded",
        datetime(2026, 12, 6, 10, 51, 2, tzinfo=UTC),
    )
    others = [c for c in found.changes if not c.related]
    assert [(c.name, c.detail) for c in others] == [("libfoo1", "2.0 -> 2.1 upgraded")]
    assert "app-config 1.1 -> 1.2 upgraded (2026-12-06 10:51 UTC)" in found.summary()


def test_installs_and_removals_say_so(host: Path) -> None:
    """A package installed afresh, one installed over an older version, one removed and
    one purged since: each says what became of it."""
    dpkg_log(
        host,
        "2026-12-06 11:00:00 install new-thing:amd64 <none> 3.0",
        "2026-12-06 11:01:00 install libfoo1:amd64 2.0 2.2",
        "2026-12-06 11:02:00 remove old-thing:amd64 1.0 <none>",
        "2026-12-06 11:03:00 purge gone-thing:amd64 4.0 <none>",
    )
    said = {c.name: c.detail for c in changes().changes if c.kind == "package"}
    assert said == {
        "new-thing": "3.0 installed",
        "libfoo1": "2.0 -> 2.2 installed",
        "old-thing": "1.0 removed",
        "gone-thing": "4.0 purged",
    }


def test_files_the_unit_reads_and_its_unit_files_modified_since_are_named(host: Path) -> None:
    """The environment file was edited at 10:51 and a drop-in written at 11:20 (systemd
    still runs the old one): both named with their times, newest first, and the stale
    unit said; the program, untouched, is not."""
    stamp(host / "etc/app/app.env", at(9))
    stamp(host / "etc/systemd/app.service.d/50-mem.conf", at(38))
    PROPS["NeedDaemonReload"] = "yes"
    found = changes()
    assert [(c.kind, c.name, c.detail) for c in found.changes] == [
        ("drop-in", str(host / "etc/systemd/app.service.d/50-mem.conf"), "modified"),
        ("file", str(host / "etc/app/app.env"), "modified"),
    ]
    assert found.need_daemon_reload
    assert "systemd still runs the old one" in found.summary()


def test_a_release_symlink_switched_since_is_named_with_where_it_points_now(host: Path) -> None:
    """current pointed to releases/41 when all was healthy; at 11:05 a deploy switched it
    to releases/42: the link is named, with its new target and the time."""
    link = host / "opt/app/current"
    link.unlink()
    link.symlink_to("releases/42")
    stamp(link, at(23))
    [switched] = [c for c in changes().changes if c.kind == "symlink"]
    assert (switched.name, switched.detail, switched.at) == (
        str(link),
        "now points to releases/42",
        at(23),
    )


def test_without_a_baseline_the_unit_s_last_start_is_the_moment(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No snapshot of a healthy host yet (a host just installed): changes are counted
    from the unit's last start, and the words say so."""
    monkeypatch.setattr(tool, "load_baseline", lambda: [])
    stamp(host / "etc/app/app.env", datetime(2026, 12, 6, 9, 30, tzinfo=UTC))
    found = changes()
    assert (found.since, found.since_what) == (
        datetime(2026, 12, 6, 9, 0, tzinfo=UTC),
        "it last started",
    )
    assert [c.name for c in found.changes] == [str(host / "etc/app/app.env")]


def test_nothing_changed_is_said_plainly(host: Path) -> None:
    """Nothing the unit runs or reads changed, and dpkg did nothing since."""
    found = changes()
    assert found.changes == [] and not found.need_daemon_reload
    assert (
        found.summary()
        == "app.service: nothing it runs or reads changed since the host was last seen healthy"
    )
