"""An install's life after its first day, as an operator lives it with packaging/install.sh
on a systemd of its own: the code changes under running daemons and `opsbot check-config`
names them; install.sh run again with newer code (a copy of the checkout with one module
changed) while an apply runs waits for that apply, restarts every daemon and names it,
and keeps the plans, the config and its secrets; `install.sh --uninstall` leaves the
config and the state and nothing running or listening, twice over; `--uninstall --purge`
leaves nothing of opsbot.

One container goes through the whole story, the tests in this order (each one's
docstring says where it starts).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from shared_io.unit_show import parse_timestamp
from testbed.container import BootedSystemd, can_boot
from testbed.host import (
    APPLY_GO,
    DAEMONS,
    OPSBOT,
    PYTHON,
    REPO,
    SLOW_APPLY,
    SLOW_APPLY_TEXT,
    STEPS_RAN,
    TEST_CONFIG,
    approve,
    install_demo_units,
    install_opsbot,
    opsbot,
    pause_applies,
    plan_state,
    restart_plan,
    resume_applies,
    submit,
    wait_state,
)
from testbed.readme import OPERATING, block, commands
from testbed.skips import skip_unless

VENV = "/opt/opsbot/venv"
STAMP = f"{VENV}/opsbot-code.json"
#: The next version: the checkout with one line added to a module every daemon imports.
NEXT = "/var/tmp/opsbot-next"
TOTP_SECRET = "/etc/opsbot/totp/alice"


@pytest.fixture(scope="module")
def host() -> Iterator[BootedSystemd]:
    """A systemd of its own with opsbot installed (install.sh --offline --enable, the
    tests' config), an approver's TOTP secret, and the four daemons running."""
    ok, reason = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {reason}")
    with BootedSystemd() as ct:
        install_demo_units(ct)
        install_opsbot(ct, TEST_CONFIG)
        ct.write_file(TOTP_SECRET, "JBSWY3DPEHPK3PXP\n", mode=0o600)
        ct.systemctl("start", *DAEMONS)
        yield ct


def _pids(ct: BootedSystemd) -> dict[str, str]:
    return {
        unit: ct.run(["systemctl", "show", "-P", "MainPID", unit]).stdout.strip()
        for unit in DAEMONS
    }


def _install(ct: BootedSystemd, src: str, *args: str) -> subprocess.CompletedProcess[str]:
    return ct.run(["bash", f"{src}/packaging/install.sh", *args], check=False, timeout=300)


def _follow(ct: BootedSystemd, name: str) -> str:
    """docs/operating.md's block ``name``, each line as root in the checkout; its output."""
    said = ""
    for argv in commands(block(name, doc=OPERATING)):
        line = shlex.join(argv)
        proc = ct.run(["bash", "-c", f"cd {REPO} && {line}"], check=False, timeout=300)
        assert proc.returncode == 0, (
            f"`{line}` exited {proc.returncode}: {proc.stdout}{proc.stderr}"
        )
        said += proc.stdout
    return said


def _kept(ct: BootedSystemd) -> str:
    """sha256 of every file under /etc/opsbot (the config and root's secrets)."""
    return ct.run(
        ["bash", "-c", "find /etc/opsbot -type f -print0 | sort -z | xargs -0 sha256sum"]
    ).stdout


def _check_config(ct: BootedSystemd) -> dict[str, Any]:
    proc = opsbot(ct, "check-config", "--json", check=False)
    info: dict[str, Any] = json.loads(proc.stdout)
    return info


def _older(info: dict[str, Any]) -> dict[str, list[str]]:
    return {d["unit"]: d["changed"] for d in info["code"]["daemons"] if d["status"] == "older"}


def _running_units(ct: BootedSystemd) -> list[str]:
    listed = ct.run(
        ["systemctl", "list-units", "--all", "--plain", "--no-legend", "--full", "opsbot*"]
    ).stdout
    return [line.split()[0] for line in listed.splitlines() if line.split()[2] != "inactive"]


def _listening(ct: BootedSystemd) -> list[str]:
    """Listening sockets of opsbot's: its Unix sockets and the page's port."""
    listed = ct.run(["ss", "--listening", "--unix", "--tcp", "--numeric"]).stdout
    return [line for line in listed.splitlines() if "/run/opsbot" in line or ":8750 " in line]


def test_check_config_names_each_daemon_that_runs_code_older_than_the_installed(
    host: BootedSystemd,
) -> None:
    """Fresh from the install every daemon runs the installed code. Then the approval
    page's package changes under it (as a package manager replaces files) and the change
    is recorded: check-config names opsbot-web, and only it, with the restart to run."""
    ct = host
    assert _older(_check_config(ct)) == {}
    module = ct.run(
        [PYTHON, "-I", "-c", "import web_svc, pathlib; print(pathlib.Path(web_svc.__file__))"]
    ).stdout.strip()
    assert module.startswith(VENV), module
    ct.run(["bash", "-c", f"echo '# a later version' >> {module}"])
    ct.run([PYTHON, "-I", "-m", "shared_io.code_stamp", "record"])

    info = _check_config(ct)
    assert _older(info) == {"opsbot-web.service": ["web_svc"]}, info["code"]
    text = opsbot(ct, "check-config", check=False).stdout
    assert "opsbot-web: runs older code: started" in text, text
    assert "do: `sudo systemctl restart opsbot-web.service`" in text, text


def test_an_upgrade_waits_for_the_apply_that_runs_then_restarts_and_names_every_daemon(
    host: BootedSystemd,
) -> None:
    """Where the last test left it: one plan waits for approval, another is approved and
    its apply runs (held by a drop-in) when install.sh is run again from the next
    version. With --apply-wait 1 it refuses and changes nothing; with its default wait
    it says it waits, the apply finishes under the old code (its plan's steps ran), and
    only then is the code replaced; it restarts the four daemons and names them, the
    waiting plan waits on, the config and secrets are the same, and check-config names no
    daemon. Run once more with the same code, it restarts nothing."""
    ct = host
    ct.run(["bash", "-c", f"rm -rf {NEXT} && mkdir -p {NEXT}"])
    ct.run(
        [
            "bash",
            "-c",
            f"tar -C {REPO} --exclude=.git --exclude=build --exclude=./mutants "
            "--exclude='*.egg-info' --exclude=__pycache__ --exclude=.mypy_cache "
            f"--exclude=.ruff_cache -cf - . | tar -C {NEXT} -xf - && "
            f"echo '# the next version' >> {NEXT}/shared_io/__init__.py",
        ],
        timeout=120,
    )
    pause_applies(ct)
    waiting = submit(ct, restart_plan("demo-db.service"))["plan_id"]
    applying = submit(ct, restart_plan("demo-web.service"))["plan_id"]
    approve(ct, applying)
    waiting_state = plan_state(ct, waiting)
    kept = _kept(ct)
    before = _pids(ct)
    stamp_before = ct.run(["cat", STAMP]).stdout
    ct.write_file(SLOW_APPLY, SLOW_APPLY_TEXT)
    ct.systemctl("daemon-reload")
    resume_applies(ct)
    ct.systemctl("start", "--no-block", "opsbot-apply.service")
    try:
        refused = _install(ct, NEXT, "--offline", "--apply-wait", "1")
        assert refused.returncode == 1, refused
        assert "still runs after 1s, so nothing was changed" in refused.stderr, refused.stderr
        assert ct.run(["cat", STAMP]).stdout == stamp_before
        assert _pids(ct) == before
        for trigger in ("opsbot-apply.path", "opsbot-apply.timer"):
            assert ct.systemctl("is-active", trigger, check=False).stdout.strip() == "active"

        # The apply goes on 2 s after the install starts waiting for it.
        ct.run(["systemd-run", "--unit=test-apply-go", "--on-active=2", "touch", APPLY_GO])
        done = _install(ct, NEXT, "--offline")
    finally:
        ct.run(["rm", "-f", SLOW_APPLY, APPLY_GO])
        ct.systemctl("daemon-reload")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "opsbot-apply.service runs a plan: waiting up to 600s" in done.stdout, done.stdout
    assert "restarting what ran the old code: " + " ".join(DAEMONS) in done.stdout, done.stdout

    result, exited = (
        ct.run(
            ["systemctl", "show", "--timestamp=us+utc", "-P", name, "opsbot-apply.service"]
        ).stdout.strip()
        for name in ("Result", "ExecMainExitTimestamp")
    )
    assert result == "success", result
    apply_ended = parse_timestamp(exited)
    stamp = json.loads(ct.run(["cat", STAMP]).stdout)
    replaced = datetime.fromisoformat(stamp["parts"]["shared_io"]["changed_at"])
    assert apply_ended is not None and apply_ended < replaced, (exited, replaced)
    wait_state(ct, applying, set(STEPS_RAN))
    assert plan_state(ct, waiting) == waiting_state
    after = _pids(ct)
    assert all(after[unit] not in ("0", before[unit]) for unit in DAEMONS), (before, after)
    assert _kept(ct) == kept
    assert _older(_check_config(ct)) == {}

    again = _install(ct, NEXT, "--no-pip")
    assert again.returncode == 0, again.stderr
    assert "no opsbot daemon runs older code" in again.stdout, again.stdout
    assert _pids(ct) == after


def test_uninstall_keeps_config_and_state_and_leaves_nothing_running(
    host: BootedSystemd,
) -> None:
    """Where the last test left it: docs/operating.md's `install.sh --uninstall` stops and
    removes every opsbot unit, drop-in, the polkit rule, man page, completion and code;
    nothing of opsbot runs or listens; the config, the secrets and the plans stay. Run
    again, it does the same."""
    ct = host
    kept = _kept(ct)
    plans = ct.run(["bash", "-c", "find /var/lib/opsbot -type f | sort"]).stdout
    assert plans.strip(), "no stored plan to keep"
    for _ in range(2):
        said = _follow(ct, "uninstall-commands")
        assert "opsbot is uninstalled: nothing of it runs" in said, said
    assert _running_units(ct) == []
    assert _listening(ct) == []
    left = ct.run(
        [
            "bash",
            "-c",
            "ls -d /etc/systemd/system/opsbot* /etc/polkit-1/rules.d/*opsbot* "
            "/usr/local/share/man/man8/opsbot.8 /usr/share/bash-completion/completions/opsbot "
            f"/usr/local/bin/opsbot {STAMP} /etc/sysusers.d/opsbot.conf 2>/dev/null || true",
        ]
    ).stdout
    assert left == "", left
    assert ct.run([OPSBOT, "--help"], check=False).returncode != 0
    assert _kept(ct) == kept
    assert ct.run(["bash", "-c", "find /var/lib/opsbot -type f | sort"]).stdout == plans


def test_purge_leaves_nothing_of_opsbot(host: BootedSystemd) -> None:
    """Where the last test left it: docs/operating.md's `install.sh --uninstall --purge`
    also removes the config, the state and opsbot's users and groups; nothing of opsbot
    is running, listening, or left in /etc and /var/lib."""
    ct = host
    said = _follow(ct, "purge-commands")
    assert "opsbot is purged" in said, said
    assert _running_units(ct) == []
    assert _listening(ct) == []
    left = ct.run(
        [
            "bash",
            "-c",
            "ls -d /etc/opsbot* /var/lib/opsbot* /etc/systemd/system/*opsbot* 2>/dev/null || true",
        ]
    ).stdout
    assert left == "", left
    for name in ("opsbot-executor", "opsbot-diagnose", "opsbot-web", "opsbot-notify"):
        assert ct.run(["getent", "passwd", name], check=False).returncode == 2, name
    for name in ("opsbot-operators", "opsbot-relay"):
        assert ct.run(["getent", "group", name], check=False).returncode == 2, name
