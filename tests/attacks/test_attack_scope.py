"""An operator who may not read the journal tries to read it through the diagnosis, in the
booted systemd (issue 12, item 4).

payroll.service (not allowlisted, no health target, no dependency of one) logs a secret
and fails. olivia, in opsbot-operators but not in systemd-journal, cannot read its journal
herself; `opsbot diagnose payroll` would have the diagnose user (who can) read it and
quote it back. It is refused in one line naming the key that widens the scope, and
nothing of the journal comes back; so is ssh.service, whatever the config says.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd
from tests.attacks.inside import cli

SECRET = "payroll-db-password=hunter2-7f3a"
PAYROLL = f"""\
[Unit]
Description=attack: a service whose journal holds a secret

[Service]
ExecStart=/bin/sh -c 'echo "connecting with {SECRET}"; sleep 2; exit 3'
"""


@pytest.fixture
def payroll(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    ct = opsbot
    ct.write_file("/etc/systemd/system/payroll.service", PAYROLL)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", "payroll.service", check=False)
    ct.wait_for(
        lambda: ct.run(["systemctl", "is-failed", "payroll.service"], check=False).returncode == 0,
        timeout=20,
        what="payroll.service failed",
    )
    assert SECRET in ct.journal("-u", "payroll.service", "-o", "cat")
    try:
        yield ct
    finally:
        ct.run(["rm", "-f", "/etc/systemd/system/payroll.service"])
        ct.systemctl("daemon-reload")
        ct.systemctl("reset-failed", "payroll.service", check=False)


def test_a_unit_outside_the_scope_is_not_diagnosed_for_an_operator(
    payroll: BootedSystemd,
) -> None:
    """olivia cannot read payroll's journal herself, and `opsbot diagnose payroll` is
    refused (exit non-zero, a hint naming [diagnose] scope) without a word of it; the
    same for ssh.service, which no config can put in scope. A unit systemd does not know
    is said not found, in systemctl's words, with no advice to widen the scope."""
    ct = payroll
    own = ct.run(
        ["journalctl", "-u", "payroll.service", "-o", "cat", "--no-pager"],
        user="olivia",
        check=False,
    )
    assert SECRET not in own.stdout, "olivia can read the journal herself: no attack"
    for unit, says in (
        ("payroll", "payroll.service is not in the diagnosis scope"),
        ("ssh", "ssh.service is never diagnosed through opsbot"),
        ("nosuch", "opsbot: error: Unit nosuch.service could not be found.\n"),
    ):
        result = cli(
            ct, "diagnose", unit, "--symptom", "why is it down", user="olivia", check=False
        )
        both = result.stdout + result.stderr
        assert result.returncode != 0, both
        assert SECRET not in both
        assert "Traceback" not in both
        assert says in both, both
        if unit == "payroll":
            assert "[diagnose] scope" in both, both
        if unit == "nosuch":
            assert result.returncode == 5 and "[diagnose] scope" not in both, both
