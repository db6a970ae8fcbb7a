"""What docs/operating.md's "Approving from your phone" and "Apply windows" tell an
operator to write is a config opsbot takes, and the reverse proxy it shows points at the
page's socket as installed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from shared_schema import OpsbotConfig
from testbed.readme import OPERATING, block

UNITS = Path(__file__).resolve().parents[3] / "units"


def test_the_phone_config_in_the_manual_is_valid() -> None:
    """Channels of each kind, an approver naming two of them, the page's proxy: valid as
    written, and every channel kind appears."""
    config = OpsbotConfig.model_validate(tomllib.loads(block("phone-config", doc=OPERATING)))
    assert {c.kind for c in config.notify.channels.values()} == {
        "webhook",
        "slack",
        "ntfy",
        "email",
    }
    assert config.approvers["alice"].notify == ["phone", "mail"]


def test_the_window_config_in_the_manual_is_valid() -> None:
    """The two apply windows shown are a valid config, lasting 2 h and 1 h as their
    comments say."""
    config = OpsbotConfig.model_validate(tomllib.loads(block("window-config", doc=OPERATING)))
    assert [w.seconds for w in config.executor.apply_window] == [7200, 3600]


def test_the_proxy_in_the_manual_points_at_the_page_socket() -> None:
    """The nginx location passes to exactly the address opsbot-web.socket listens on."""
    listen = re.search(r"^ListenStream=(\S+)$", (UNITS / "opsbot-web.socket").read_text(), re.M)
    assert listen is not None
    assert f"proxy_pass http://{listen.group(1)}/;" in block("phone-nginx", doc=OPERATING)
