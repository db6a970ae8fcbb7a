"""Filesystems a unit needs that are not there to write to: a filesystem mounted
read-only under it (systemd's .mount unit says ``ro``: the diagnose user's own sandbox
cannot tell), and a mount it requires that failed. Each is a note for a human naming the
mount point; nothing is restarted or started, since neither would write or mount."""

from __future__ import annotations

import pytest

from diagnose_svc.tools import disk_usage as tool
from diagnose_svc.tools._systemctl import UnitProperties
from diagnose_svc.tools.disk_usage import Usage
from diagnose_svc.verdict import NoteVerdict
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import RecordedHost, health
from tests.unit.diagnose.test_runbook import (
    APP_ALONE,
    DB_RAN,
    _worker_says,
    cause_of,
    diagnose,
    renamed,
    settings,
)


def test_mount_units_are_named_as_systemd_escapes_paths() -> None:
    """The names `systemd-escape --path --suffix=mount` gives (taken from systemd 252)."""
    assert tool.mount_unit("/") == "-.mount"
    assert tool.mount_unit("/var/lib/x-y") == "var-lib-x\\x2dy.mount"
    assert tool.mount_unit("/srv/a b/.c") == "srv-a\\x20b-.c.mount"
    assert tool.mount_unit("/var/lib/foo@bar/") == "var-lib-foo\\x40bar.mount"


def test_a_directory_is_on_the_deepest_active_mount_above_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/ is rw, /var/lib/app (a tmpfs) is ro, /var/lib/app/cache is an inactive mount
    (an fstab line not mounted now): the cache directory is on /var/lib/app, read-only;
    /var/log/app is on /, writable."""
    shown = {
        "-.mount": ("active", "rw,relatime"),
        "var-lib-app.mount": ("active", "ro,nosuid,nodev,size=8192k"),
        "var-lib-app-cache.mount": ("inactive", "rw"),
    }

    def show(units: list[str], properties: tuple[str, ...]) -> list[UnitProperties]:
        out = []
        for unit in units:
            state, options = shown.get(unit, ("inactive", ""))
            out.append(UnitProperties(unit, {"Id": unit, "ActiveState": state, "Options": options}))
        return out

    monkeypatch.setattr(tool, "show", show)
    assert tool.mounts(["/var/lib/app/cache", "/var/log/app"]) == {
        "/var/lib/app/cache": ("/var/lib/app", True),
        "/var/log/app": ("/", False),
    }


def _ro(read_only: bool) -> Usage:
    return Usage(
        path="/var/lib/worker",
        role="StateDirectory",
        exists=True,
        size_bytes=8 << 20,
        free_bytes=8 << 20,
        used_percent=1.0,
        free_inodes=1000,
        mount="/var/lib/worker",
        read_only=read_only,
    )


ERROFS = "OSError: [Errno 30] Read-only file system: '/var/lib/worker/spool/req-1'"


def test_a_worker_whose_filesystem_is_mounted_read_only_gets_a_note_naming_the_mount() -> None:
    """A worker says "Read-only file system" since it started, and systemd shows its
    state directory's mount ro: a note (read_only) naming the mount; no restart."""
    host = _worker_says(ERROFS)
    host.disks["worker.service"] = [_ro(True)]
    verdict, _ = diagnose(host, "worker.service")
    assert isinstance(verdict, NoteVerdict), verdict
    assert cause_of(verdict) == ("read_only", "worker.service")
    assert "is mounted read-only (/var/lib/worker, as systemd sees it)" in verdict.text


def test_the_same_words_on_a_writable_filesystem_are_not_believed() -> None:
    """The same words in its output (anyone can write them), its filesystem rw: no
    read-only note."""
    host = _worker_says(ERROFS)
    host.disks["worker.service"] = [_ro(False)]
    verdict, _ = diagnose(host, "worker.service")
    assert cause_of(verdict)[0] != "read_only", verdict


MOUNT = "srv-data.mount"


def test_a_mount_the_app_requires_that_failed_is_a_note_naming_the_mount_point() -> None:
    """app.service needs srv-data.mount (RequiresMountsFor=/srv/data), which failed:
    mount's own words say its device is gone. A note about the mount, naming /srv/data
    and the app that needs it; no start of either."""
    mount = renamed(DB_RAN, "db.service", MOUNT)
    mount_journal = [
        *[(t, p, s, m.replace("db.service", MOUNT)) for t, p, s, m in recorded.DB_JOURNAL],
        (
            "2026-11-29T21:44:38.593100Z",
            "err",
            "mount",
            "mount: /srv/data: special device /dev/disk/by-label/data does not exist.",
        ),
        (
            "2026-11-29T21:44:38.593101Z",
            "err",
            "mount",
            "       dmesg(1) may have more information after failed mount system call.",
        ),
    ]
    app = (
        APP_ALONE.replace("Requires=sysinit.target", f"Requires=sysinit.target {MOUNT}")
        .replace("ActiveState=active", "ActiveState=inactive")
        .replace("SubState=running", "SubState=dead")
        .replace("MainPID=95", "MainPID=0")
    )
    host = RecordedHost().add(app).add(mount, mount_journal)
    host.health["app"] = health("app", "app.service", "connection_refused")
    config = settings(app=("http://127.0.0.1:8000/healthz", "app.service"))
    verdict, _ = diagnose(host, "app.service", config)
    assert isinstance(verdict, NoteVerdict), verdict
    assert cause_of(verdict) == ("mount_failed", MOUNT)
    assert "/srv/data is not mounted" in verdict.text
    assert "special device /dev/disk/by-label/data does not exist" in verdict.text
