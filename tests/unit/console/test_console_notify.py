"""``opsbot notify test``: the console sends nothing itself. It runs ``opsbot-notify
--test`` in opsbot-notify.service's own sandbox (a transient unit with every [Service]
setting of the unit file and its drop-ins but how it starts), and says each channel's
answer. The message itself, to real receivers: tests/unit/notify/test_notify_trial.py;
the whole road on a booted host: tests/integration/test_approval_from_anywhere.py."""

from __future__ import annotations

from pathlib import Path

from opsbot_cli.notify import UNIT, said, sandbox, trial_argv

REPO = Path(__file__).resolve().parents[3]
#: As `systemctl cat opsbot-notify.service` prints the unit and the drop-in `opsbot
#: firewall --write` adds.
CAT = (
    f"# /etc/systemd/system/{UNIT}\n"
    + (REPO / "units" / UNIT).read_text()
    + "\n# /etc/systemd/system/opsbot-notify.service.d/50-opsbot-ip.conf\n"
    + "[Service]\nIPAddressAllow=\nIPAddressAllow=192.0.2.10\n"
)


def test_the_test_runs_in_the_unit_s_own_sandbox() -> None:
    """The transient unit gets the notifier's user, its credentials and every confinement
    line of the unit file, then the drop-in's IP filter (after the file's, as systemd
    reads them); not how the unit starts (Type=, ExecStart=, its timeout). It runs the
    unit's own program with --test and --json, and passes the output through."""
    program, properties = sandbox(CAT)
    assert program == "/opt/opsbot/venv/bin/opsbot-notify"
    for line in (
        "User=opsbot-notify",
        "LoadCredential=notify:/etc/opsbot/notify",
        "IPAddressDeny=any",
        "InaccessiblePaths=-/etc/opsbot/totp",
        "SystemCallFilter=~@privileged @resources",
        "ProtectSystem=strict",
    ):
        assert line in properties, line
    assert properties[-2:] == ["IPAddressAllow=", "IPAddressAllow=192.0.2.10"]
    assert not any(p.startswith(("Type=", "ExecStart=", "TimeoutStartSec=")) for p in properties)
    service = [
        line
        for line in (REPO / "units" / UNIT).read_text().split("[Service]")[1].splitlines()
        if line and not line.startswith("#")
    ]
    assert len(properties) == len(service) - 3 + 2  # all but those three, and the drop-in's
    argv = trial_argv(CAT, "ops-hook")
    assert argv[:6] == [
        "systemd-run",
        "--quiet",
        "--wait",
        "--pipe",
        "--collect",
        "--service-type=exec",
    ]
    assert "--property=User=opsbot-notify" in argv
    assert argv[-5:] == ["--", program, "--test", "ops-hook", "--json"]
    assert trial_argv(CAT, None)[-3:] == [program, "--test", "--json"]


def test_each_answer_is_a_line_and_the_count_says_if_any_failed() -> None:
    """What opsbot-notify answered, a line a channel in the config's order, then the
    count with the right plural."""
    tried = [
        {"channel": "ops-hook", "kind": "webhook", "delivered": True, "said": "delivered"},
        {"channel": "phone", "kind": "ntfy", "delivered": False, "said": "HTTP 403 Forbidden"},
    ]
    assert said(tried) == [
        "ops-hook (webhook): delivered",
        "phone (ntfy): HTTP 403 Forbidden",
        "1 of 2 channels failed",
    ]
    assert said(tried[:1])[-1] == "1 channel delivered"
