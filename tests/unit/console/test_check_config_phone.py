"""`opsbot check-config` tells root what would keep an approver from being told or from
approving on the page, before the first plan waits."""

from __future__ import annotations

import tomllib
from pathlib import Path

from opsbot_cli.check_config import check_approval_path
from shared_schema import OpsbotConfig

CONFIG = """
[notify]
link_base = "https://ops.example.com/opsbot"
[notify.channels.hook]
kind = "webhook"
url = "https://hooks.example.com/x"
[notify.channels.mail]
kind = "email"
host = "127.0.0.1"
sender = "opsbot@example.com"
to = ["alice@example.com"]
[approvers.alice]
notify = ["hook", "mail"]
"""


def _warnings(tmp_path: Path, text: str = CONFIG, as_root: bool = True) -> list[str]:
    (tmp_path / "totp").mkdir(exist_ok=True)
    (tmp_path / "notify").mkdir(exist_ok=True)
    config = OpsbotConfig.model_validate(tomllib.loads(text))
    return check_approval_path(
        config,
        tmp_path / "opsbot.toml",
        totp=tmp_path / "totp",
        secrets=tmp_path / "notify",
        as_root=as_root,
    )


def test_a_missing_totp_secret_and_a_missing_webhook_key_are_named(tmp_path: Path) -> None:
    """Approver alice has no TOTP secret and the webhook channel has no secret: both are
    named; the mail relay, which needs no login, is not."""
    said = _warnings(tmp_path)
    assert any("approver alice has no TOTP secret" in w for w in said), said
    assert any("channel hook (webhook) has no secret" in w for w in said), said
    # A mail relay without a user needs no secret.
    assert not any("channel mail" in w for w in said), said


def test_with_the_secrets_in_place_only_the_ip_filters_are_left(tmp_path: Path) -> None:
    """With alice's TOTP secret and the webhook's secret in place, the one warning left is
    to write the IP filters with `opsbot firewall --write`."""
    (tmp_path / "totp").mkdir()
    (tmp_path / "totp" / "alice").write_text("SECRET\n")
    (tmp_path / "notify").mkdir()
    (tmp_path / "notify" / "hook").write_text("key\n")
    said = _warnings(tmp_path)
    assert len(said) == 1 and "opsbot firewall --write" in said[0], said


def test_approvers_without_link_base_are_told_their_messages_have_no_links(
    tmp_path: Path,
) -> None:
    """Without link_base, the check warns that approvers' messages carry no links; run as
    someone other than root, it says nothing about TOTP secrets it cannot look at."""
    text = CONFIG.replace('link_base = "https://ops.example.com/opsbot"\n', "")
    said = _warnings(tmp_path, text, as_root=False)
    assert any("link_base is not" in w for w in said), said
    assert not any("TOTP" in w for w in said)  # only root can look
