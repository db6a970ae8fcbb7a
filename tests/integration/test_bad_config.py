"""A typo in /etc/opsbot/opsbot.toml on a real systemd: both sockets stay up, the console
says in one line which file and line is wrong, and once the file is fixed both work
again without ``systemctl reset-failed``."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from opsbot_cli.say import unfold
from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, opsbot

CONFIG = "/etc/opsbot/opsbot.toml"
#: TEST_CONFIG ends in [diagnose]: the typo lands there, on this line.
TYPO = TEST_CONFIG + "max_steps = = 6\n"
LINE = f"line {len(TYPO.splitlines())},"
SERVICES = ("opsbot-executor.service", "opsbot-diagnose.service")
SOCKETS = ("opsbot-executor.socket", "opsbot-diagnose.socket")


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The error lines, each whole (a long one is folded to 100 columns)."""
    return [line for line in unfold(done.stderr) if line.startswith("opsbot: error: ")]


@pytest.fixture
def typo(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The typo written, the daemons stopped (their next start reads it); afterwards
    TEST_CONFIG restored and the daemons stopped again."""
    opsbot.systemctl("stop", *SERVICES)
    opsbot.write_file(CONFIG, TYPO)
    try:
        yield opsbot
    finally:
        opsbot.write_file(CONFIG, TEST_CONFIG)
        opsbot.systemctl("stop", *SERVICES)


def works_again(ct: BootedSystemd, *args: str, user: str | None = None) -> str:
    """Run ``opsbot ARGS`` after the fix: a daemon still running on the broken config
    answers that the file was fixed and exits; a call after that is served afresh."""
    deadline = time.monotonic() + 30
    done = opsbot(ct, *args, user=user, check=False)
    # Until it has stopped accepting (within its accept poll), it says so again.
    while "fixed since" in done.stderr and time.monotonic() < deadline:
        time.sleep(0.5)
        done = opsbot(ct, *args, user=user, check=False)
    assert "invalid configuration" not in done.stderr, done.stderr
    assert "diagnosis failed" not in done.stderr, done.stderr
    return done.stdout


def test_a_typo_is_named_by_both_sockets_and_fixing_it_is_enough(typo: BootedSystemd) -> None:
    """With ``max_steps = = 6`` in the file, ``opsbot plans`` (root) and ``opsbot
    diagnose demo-web`` (olivia, an operator) each fail with one error line naming the
    file and the line; the sockets and services are up, not failed, and the executor's
    status names the error. After the file is fixed, both commands work, with no
    ``reset-failed``."""
    plans = opsbot(typo, "plans", check=False)
    diagnose = opsbot(typo, "diagnose", "demo-web", user="olivia", check=False)
    for done in (plans, diagnose):
        assert done.returncode != 0
        [line] = error_lines(done)
        assert f"{CONFIG}: not valid TOML" in line and LINE in line, line
        assert "Traceback" not in done.stderr
    for unit in (*SOCKETS, *SERVICES):
        assert typo.systemctl("is-failed", unit, check=False).stdout.strip() != "failed"
    status = typo.systemctl("show", "-P", "StatusText", "opsbot-executor.service").stdout
    assert CONFIG in status
    typo.write_file(CONFIG, TEST_CONFIG)
    works_again(typo, "plans")
    assert "diagnosing demo-web.service" in works_again(typo, "diagnose", "demo-web", user="olivia")
    for unit in SOCKETS:
        assert typo.systemctl("show", "-P", "Result", unit).stdout.strip() == "success"
