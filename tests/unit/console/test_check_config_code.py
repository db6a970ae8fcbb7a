"""`opsbot check-config` on the installed code (shared_io/code_stamp.py): a daemon that runs
older code is named with the restart to run, in lines that fit 100 columns, and a stamp
that cannot be read is a warning that says how to write it again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from opsbot_cli import check_config
from shared_io.code_stamp import DaemonCode, Part, Stamp
from shared_io.errors import StoreError

AT = datetime(2026, 12, 6, 20, 0, tzinfo=UTC)


def test_a_daemon_on_older_code_is_named_with_its_restart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The installed code's line, then only the daemons that run older code (or could not
    be judged), each with what to run; a current one is not repeated."""
    stamp = Stamp("0.1.0", AT, {"plans": Part("ab" * 32, AT)})
    older = DaemonCode(
        "opsbot-executor.service",
        "older",
        AT,
        ("plans",),
        "runs older code: started 2026-12-06 19:00:00 UTC, plans changed 2026-12-06 20:00:00 UTC",
    )
    check_config._say_code(stamp, [older, DaemonCode("opsbot-web.service", "current", AT)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("installed code: opsbot 0.1.0 (sha256 ")
    assert " ".join(line.strip() for line in lines[1:-1]) == f"opsbot-executor: {older.detail}"
    assert lines[-1] == "    do: `sudo systemctl restart opsbot-executor.service`"
    assert max(len(line) for line in lines) <= 100
    assert check_config._code_json(stamp, [older])["daemons"][0]["do"] == older.action  # type: ignore[index]


def test_a_stamp_that_cannot_be_read_is_a_warning() -> None:
    """check-config goes on: the stamp's error, with its hint, among the warnings."""

    def cut() -> Stamp | None:
        raise StoreError("cannot read the code stamp /v/opsbot-code.json: bad JSON", hint="run x")

    stamp, code, warnings = check_config.installed_code(cut)
    assert (stamp, code) == (None, [])
    assert warnings == ["cannot read the code stamp /v/opsbot-code.json: bad JSON: run x"]
