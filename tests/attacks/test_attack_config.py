"""An operator who can write the config would widen what opsbot may touch, in the booted
systemd.

The attack (issue 12, item 11): /etc/opsbot/opsbot.toml handed to an operator (owned by
olivia, mode 0666); olivia adds demo-other to the allowlist; root then runs `opsbot
polkit-rule --write`, which would widen the polkit rule. Every entry point refuses that
config in one line naming the file and the fix: the console as root and as an operator,
the executor when it starts, the diagnosis; the polkit rule stays as it was, and nothing
new may be submitted for demo-other. Undone after.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from opsbot_cli.say import unfold
from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, restart_plan, send_raw
from tests.attacks.inside import CONFIG, cli

RULE = "/etc/polkit-1/rules.d/60-opsbot.rules"
WIDER = TEST_CONFIG.replace(
    'restart_unit = ["demo-web.service", "demo-db.service"]',
    'restart_unit = ["demo-web.service", "demo-db.service", "demo-other.service"]',
)
FIX = f"(fix: chown root:root {CONFIG} && chmod 0644 {CONFIG})"


@pytest.fixture
def handed_over(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The config, widened, owned by the operator olivia and writable by everyone."""
    ct = opsbot
    assert WIDER != TEST_CONFIG
    ct.write_file(CONFIG, WIDER, mode=0o666)
    ct.run(["chown", "olivia:olivia", CONFIG])
    ct.run(["chmod", "0666", CONFIG])  # write_file's mode is subject to the umask
    ct.systemctl("stop", "opsbot-executor.service")  # it reads the config when it starts
    try:
        yield ct
    finally:
        ct.write_file(CONFIG, TEST_CONFIG)
        ct.run(["chown", "root:root", CONFIG])
        ct.run(["chmod", "0644", CONFIG])
        ct.systemctl("stop", "opsbot-executor.service")
        # The refused starts may have failed the socket too: both back as they were.
        ct.systemctl(
            "reset-failed", "opsbot-executor.service", "opsbot-executor.socket", check=False
        )
        ct.systemctl("start", "opsbot-executor.socket")
        assert (
            ct.run(["systemctl", "is-active", "opsbot-executor.socket"]).stdout.strip() == "active"
        )


def _refused(result_stderr: str, returncode: int, what: str) -> None:
    assert returncode != 0, f"{what} accepted an operator's config"
    lines = [line for line in unfold(result_stderr) if line.strip()]  # each error whole
    assert lines, f"{what} said nothing"
    assert "Traceback" not in result_stderr, result_stderr
    # Root sees an operator's file; the operator sees her own, but writable by others.
    reasons = (f"{CONFIG} is owned by uid", f"{CONFIG} is writable by group or others")
    assert any(r in line and FIX in line for line in lines for r in reasons), lines


def test_a_config_an_operator_owns_is_refused_everywhere(handed_over: BootedSystemd) -> None:
    """polkit-rule --write (root), check-config (root and the operator), the diagnosis
    and the executor all refuse the config olivia owns; the polkit rule does not grow and
    a plan for demo-other is not accepted."""
    ct = handed_over
    rule_before = ct.run(["cat", RULE]).stdout
    assert "demo-other" not in rule_before
    for argv, user in (
        (["polkit-rule", "--write"], None),
        (["check-config"], None),
        (["check-config"], "olivia"),
    ):
        result = cli(ct, *argv, check=False, user=user)
        _refused(result.stderr, result.returncode, f"opsbot {' '.join(argv)} as {user or 'root'}")
    assert ct.run(["cat", RULE]).stdout == rule_before
    diagnosis = ct.run(
        [
            "runuser",
            "-u",
            "opsbot-diagnose",
            "--",
            "/opt/opsbot/venv/bin/opsbot-diagnose",
            "run",
            "demo-web.service",
        ],
        check=False,
    )
    _refused(diagnosis.stderr, diagnosis.returncode, "opsbot-diagnose run")
    message = json.dumps({"v": 1, "op": "submit", "plan": restart_plan("demo-other.service")})
    _, out, _ = send_raw(ct, message + "\n", "opsbot-diagnose")
    assert '"ACCEPT"' not in out, out
    log = ct.journal("-u", "opsbot-executor.service", "-o", "cat", "-n", "50")
    assert f"{CONFIG} is owned by uid" in log, log
