"""A new operator follows README.md's "Installing on a host with systemd" literally, on a
freshly booted systemd of its own (the session's container already has opsbot), and then
diagnoses a service that failed; an approver approves through the sudoers line of
docs/operating.md's "Who approves, who reads the audit" and can do nothing else with it;
an operator in systemd-journal reads the audit.

The docs' blocks are run as parsed (testbed/readme.py), each line by bash in the
checkout, as root or as the user the docs name, with two exceptions, both stated here:
``packaging/install.sh`` gets ``--offline`` appended (the container has no network; the
venv already holds the dependencies), and the two edits (``editor /etc/opsbot/opsbot.toml``
and ``visudo -f /etc/sudoers.d/opsbot-approvers``) are done by writing README.md's
``install-config`` and docs/operating.md's ``approvers-sudoers`` blocks to those files
(``visudo -c`` then checks the latter). The host's own parts come first, as on a real
host: app.service (a unit that runs until it is killed), the logins alice and bob (with a
password for sudo).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd, can_boot
from testbed.host import REPO, STEPS_RAN, wait_state
from testbed.readme import (
    CONFIG,
    OPERATING,
    block,
    commands,
    enabled_units,
    install_argv,
    units_to_enable,
)
from testbed.skips import skip_unless

SUDOERS = "/etc/sudoers.d/opsbot-approvers"
APP_UNIT = """\
[Unit]
Description=the host's app (tests/integration/test_readme_install.py)

[Service]
ExecStart=/bin/sleep infinity
"""
BOB_PASSWORD = "bob-approves-123"


def _shell(ct: BootedSystemd, argv: list[str], user: str | None = None) -> None:
    """One line of the docs as a shell in the checkout runs it; a non-zero exit fails the
    test."""
    line = shlex.join(argv)
    proc = ct.run(["bash", "-c", f"cd {REPO} && {line}"], user=user, check=False, timeout=300)
    assert proc.returncode == 0, (
        f"docs line `{line}` (as {user or 'root'}) exited {proc.returncode}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
    )


def follow_install(ct: BootedSystemd, argvs: list[list[str]]) -> None:
    """The install block's lines, as root, with this module's two stated exceptions
    (testbed.readme.install_argv)."""
    for argv in argvs:
        run = install_argv(argv)
        if run is None:
            ct.write_file(CONFIG, block("install-config") + "\n")
        else:
            _shell(ct, run)


@pytest.fixture(scope="module")
def fresh() -> Iterator[BootedSystemd]:
    """A systemd of this module's own, with what the host had before opsbot: app.service
    running, the logins alice and bob."""
    ok, reason = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {reason}")
    with BootedSystemd() as ct:
        ct.write_file("/etc/systemd/system/app.service", APP_UNIT)
        ct.systemctl("daemon-reload")
        ct.systemctl("start", "app.service")
        for login in ("alice", "bob"):
            ct.run(["useradd", "--create-home", "--shell", "/bin/bash", login])
        ct.run(["chpasswd"], input=f"bob:{BOB_PASSWORD}\n")
        yield ct


@pytest.fixture(scope="module")
def installed(fresh: BootedSystemd) -> BootedSystemd:
    """The host after README.md's install block (its last line, `opsbot check-config` as
    root, exited 0 like every other)."""
    follow_install(fresh, commands(block("install-commands")))
    return fresh


def _fail_app(ct: BootedSystemd) -> None:
    ct.systemctl("kill", "--kill-who=main", "-s", "KILL", "app.service")
    ct.wait_for(
        lambda: ct.run(["systemctl", "is-failed", "app.service"], check=False).returncode == 0,
        timeout=15,
        what="app.service failed",
    )


def _diagnose(ct: BootedSystemd) -> dict[str, Any]:
    """alice's `opsbot diagnose app --json` on the failed app.service: its verdict."""
    proc = ct.run(
        ["opsbot", "diagnose", "app", "--symptom", "the app is down", "--json"],
        user="alice",
        check=False,
        timeout=120,
    )
    try:
        result: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no verdict (exit {proc.returncode}): {proc.stdout} {proc.stderr}")
    return dict(result["verdict"])


def test_readme_enables_every_unit_opsbot_ships_with_an_install_section() -> None:
    """The README's `systemctl enable --now` names every socket, timer and path of units/
    (the diagnose socket was once missing, and `opsbot diagnose` then found no socket)."""
    named = enabled_units(commands(block("install-commands")))
    assert sorted(named) == units_to_enable()


def test_following_the_readme_an_operator_diagnoses_a_failed_service(
    installed: BootedSystemd,
) -> None:
    """After the install block (every line exited 0, `opsbot check-config` as root too),
    alice runs the README's operator lines, then `opsbot diagnose app` on the killed
    app.service reaches a verdict through the diagnose socket: a plan or a note."""
    ct = installed
    for argv in commands(block("operator-commands")):
        _shell(ct, argv, user="alice")
    assert ct.run(["opsbot", "check-config"]).returncode == 0
    _fail_app(ct)
    verdict = _diagnose(ct)
    assert verdict["kind"] in ("plan", "note"), verdict


def _sudo(
    ct: BootedSystemd, *argv: str, env: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """bob's `sudo [VAR=value] opsbot ARGV`, typing his password (no terminal: -S)."""
    return ct.run(
        ["sudo", "-S", "-p", "", *env, "opsbot", *argv],
        user="bob",
        input=BOB_PASSWORD + "\n",
        check=False,
        timeout=120,
    )


def test_an_approver_approves_through_the_documented_sudoers_line_and_nothing_else(
    installed: BootedSystemd,
) -> None:
    """docs/operating.md's approvers blocks: bob's `sudo opsbot approve ID --sha256 ...`
    approves alice's plan (as him) and the apply runs it; `sudo opsbot apply`, `watch`,
    `show` and an `OPSBOT_*` variable through sudo are refused; alice, now in
    systemd-journal, reads the plan's audit."""
    skip_unless(
        shutil.which("sudo") is not None, "sudo is not installed (scripts/setup installs it)"
    )
    ct = installed
    for argv in commands(block("approvers-commands", doc=OPERATING)):
        if argv == ["visudo", "-f", SUDOERS]:
            ct.write_file(SUDOERS, block("approvers-sudoers", doc=OPERATING) + "\n", mode=0o440)
            ct.run(["visudo", "-c", "-q", "-f", SUDOERS])
        else:
            _shell(ct, argv)
    if ct.run(["systemctl", "is-failed", "app.service"], check=False).returncode != 0:
        _fail_app(ct)
    verdict = _diagnose(ct)
    assert verdict["kind"] == "plan", verdict
    plan_id = verdict["plan_id"]
    shown = json.loads(ct.run(["opsbot", "show", plan_id, "--json"], user="alice").stdout)
    sha256 = shown["summary"]["sha256"]

    for refused in (
        ("apply",),
        ("watch", "app.service"),
        ("show", plan_id),
        ("approve-all",),
    ):
        proc = _sudo(ct, *refused)
        assert proc.returncode != 0 and "not allowed" in proc.stderr, (refused, proc)
    proc = _sudo(
        ct, "approve", plan_id, "--sha256", sha256[:16], env=("OPSBOT_CONFIG=/tmp/opsbot.toml",)
    )
    assert proc.returncode != 0, proc
    assert "not allowed to set" in proc.stderr, proc.stderr

    proc = _sudo(ct, "approve", plan_id, "--sha256", sha256[:16])
    assert proc.returncode == 0, proc
    wait_state(ct, plan_id, set(STEPS_RAN), timeout=90)

    audit = ct.run(["opsbot", "audit", plan_id], user="alice", check=False)
    assert audit.returncode == 0, audit
    assert "plan.accepted" in audit.stdout, audit.stdout
    assert "approver=bob" in audit.stdout, audit.stdout
