"""The read-only half stays read-only, and every service keeps its hardening score.

In the booted systemd, as the diagnosis service: commands run inside the mount namespace
of the running opsbot-diagnose.service with its uid and gid (nsenter, as in
test_diagnose_story.py), i.e. with the file system view its unit gives it. systemd (through
polkit) refuses it every change to a unit, whatever the path to PID 1; the executor's
code, its state and the approvals are out of reach; it cannot plant an approval, a unit
drop-in or a socket of its own.

`systemd-analyze security` scores each opsbot service no worse than recorded in
units/security-scores.json (and within the limit written there).
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import PYTHON
from testbed.inproc import REPO
from tests.attacks.inside import APPROVALS, STATE, invocation, propose, reject_quietly

SITE = "/opt/opsbot/venv/lib/python3.11/site-packages"
SCORES = json.loads((REPO / "units" / "security-scores.json").read_text())


def as_diagnose(ct: BootedSystemd, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in opsbot-diagnose.service's mount namespace, as its uid and gid."""
    ct.systemctl("start", "opsbot-diagnose.service")
    pid = ct.systemctl("show", "-P", "MainPID", "opsbot-diagnose.service").stdout.strip()
    assert pid not in ("", "0")
    uid = ct.run(["id", "-u", "opsbot-diagnose"]).stdout.strip()
    gid = ct.run(["id", "-g", "opsbot-diagnose"]).stdout.strip()
    return ct.run(["nsenter", "-t", pid, "-m", "-S", uid, "-G", gid, *argv], check=False)


def refused(result: subprocess.CompletedProcess[str], *why: str) -> None:
    assert result.returncode != 0, f"{result.args} succeeded: {result.stdout}"
    assert any(w in result.stderr for w in why), result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["systemctl", "restart", "demo-web.service"],
        ["systemctl", "--no-ask-password", "stop", "demo-web.service"],
        ["systemctl", "--no-ask-password", "start", "demo-other.service"],
        ["systemctl", "--no-ask-password", "kill", "demo-web.service"],
        ["systemctl", "--no-ask-password", "reset-failed", "demo-web.service"],
        ["systemctl", "--no-ask-password", "daemon-reload"],
        ["systemd-run", "--no-ask-password", "--unit=attack-escape", "/bin/true"],
        [
            "busctl",
            "call",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "RestartUnit",
            "ss",
            "demo-web.service",
            "replace",
        ],
    ],
    ids=[
        "restart",
        "stop",
        "start",
        "kill",
        "reset-failed",
        "daemon-reload",
        "systemd-run",
        "busctl-RestartUnit",
    ],
)
def test_systemd_refuses_the_diagnose_service_any_change(
    opsbot: BootedSystemd, argv: list[str]
) -> None:
    """Restart, stop, start, kill, reset-failed, daemon-reload, a transient unit, or the
    D-Bus method itself: polkit says no to the diagnose user, and demo-web keeps its
    invocation."""
    before = invocation(opsbot, "demo-web.service")
    refused(
        as_diagnose(opsbot, *argv),
        "Interactive authentication required",
        "Access denied",
        "Permission denied",
    )
    assert invocation(opsbot, "demo-web.service") == before


def test_the_executors_code_cannot_be_imported_or_read(opsbot: BootedSystemd) -> None:
    """Inside the diagnose sandbox the executor's package, the console's and their entry
    points are inaccessible: no module of them imports (the bare package name is an empty
    namespace), their source cannot be read or listed, the `opsbot`, `opsbot-executor`
    and `opsbot-apply` programs cannot run; the diagnosis code and the shared host I/O
    still import."""
    ok = as_diagnose(
        opsbot, PYTHON, "-c", "import diagnose_svc.runtime, shared_io.run; print('ok')"
    )
    assert ok.stdout.strip() == "ok", ok.stderr
    for module in (
        "executor_svc.apply",
        "plans.tools",
        "plans.gate",
        "opsbot_cli.main",
        "opsbot_cli.approve",
    ):
        blocked = as_diagnose(opsbot, PYTHON, "-c", f"import {module}")
        refused(blocked, f"No module named '{module}'")
    # The name alone still resolves, to an empty namespace package: the inaccessible
    # directory has no readable __init__.py, so Python finds no code in it.
    empty = as_diagnose(
        opsbot,
        PYTHON,
        "-c",
        "import executor_svc as e; print(getattr(e, '__file__', None), dir(e).count('TOOLS'))",
    )
    assert empty.stdout.split() == ["None", "0"], empty
    refused(
        as_diagnose(opsbot, "cat", f"{SITE}/executor_svc/apply.py"),
        "Permission denied",
        "No such file",
    )
    refused(as_diagnose(opsbot, "ls", f"{SITE}/executor_svc"), "Permission denied")
    refused(as_diagnose(opsbot, "ls", f"{SITE}/opsbot_cli"), "Permission denied")
    for program in (
        "/opt/opsbot/venv/bin/opsbot",
        "/opt/opsbot/venv/bin/opsbot-executor",
        "/opt/opsbot/venv/bin/opsbot-apply",
    ):
        refused(as_diagnose(opsbot, program, "apply"), "Permission denied")


def test_state_and_approvals_cannot_be_read_or_written(opsbot: BootedSystemd) -> None:
    """The executor's state directory and the approvals directory can be neither listed,
    read nor written from the diagnose sandbox: a stored plan cannot be read or edited,
    no approval can be planted, /etc/opsbot and /etc/systemd are read-only to it, and it
    cannot put a socket of its own in place of the executor's."""
    plan_id = propose(opsbot, "demo-db.service", "sandbox target")
    # A root-owned file where its approval would be (not an approval: nothing may run).
    opsbot.write_file(f"{APPROVALS}/{plan_id}.approval", "root's eyes only\n", mode=0o644)
    # Every directory a write below is tried in exists, so that only the sandbox (EACCES,
    # EROFS) can refuse it, never a missing parent, whatever ran before this test.
    for directory in ("/etc/systemd/system/demo-web.service.d", "/etc/polkit-1/rules.d"):
        opsbot.run(["mkdir", "-p", directory])
    try:
        for path in (STATE, f"{STATE}/plans", APPROVALS):
            refused(as_diagnose(opsbot, "ls", path), "Permission denied")
        for path in (f"{STATE}/plans/{plan_id}.json", f"{APPROVALS}/{plan_id}.approval"):
            refused(as_diagnose(opsbot, "cat", path), "Permission denied")
        for path in (
            f"{STATE}/plans/{plan_id}.json",
            f"{STATE}/status/{plan_id}.json",
            f"{APPROVALS}/{plan_id}.approval",
            f"{APPROVALS}/20000101-000000-0badc0de.approval",
            "/etc/opsbot/opsbot.toml",
            "/etc/systemd/system/demo-web.service.d/99-attack.conf",
            "/etc/polkit-1/rules.d/00-attack.rules",
        ):
            refused(
                as_diagnose(opsbot, "touch", path), "Permission denied", "Read-only file system"
            )
        refused(as_diagnose(opsbot, "rm", "-f", "/run/opsbot/executor.sock"), "Permission denied")
        refused(
            as_diagnose(
                opsbot,
                PYTHON,
                "-c",
                "import socket; socket.socket(socket.AF_UNIX).bind('/run/opsbot/evil.sock')",
            ),
            "Permission denied",
            "Read-only file system",
        )
    finally:
        opsbot.run(["rm", "-f", f"{APPROVALS}/{plan_id}.approval"])
        reject_quietly(opsbot, plan_id)


# -- hardening scores ----------------------------------------------------------------------


def exposure(ct: BootedSystemd, unit: str) -> float:
    out = ct.run(["systemd-analyze", "security", "--no-pager", unit]).stdout
    match = re.search(rf"Overall exposure level for {re.escape(unit)}: (\d+\.\d+)", out)
    assert match, out[-500:]
    return float(match.group(1))


@pytest.mark.parametrize("unit", sorted(SCORES["units"]))
def test_no_unit_scores_worse_than_recorded(opsbot: BootedSystemd, unit: str) -> None:
    """`systemd-analyze security` in the booted container: the unit's overall exposure is
    at most what units/security-scores.json records for it, and at most its limit there
    (1.5 for the diagnose service, 2.0 for the executor, apply and on-failure units)."""
    recorded: dict[str, Any] = SCORES["units"][unit]
    assert recorded["recorded"] <= recorded["limit"]
    score = exposure(opsbot, unit)
    assert score <= recorded["recorded"], f"{unit} scores {score}, recorded {recorded}"
    print(f"\nFIGURES {json.dumps({'test': 'exposure', 'unit': unit, 'score': score})}")
