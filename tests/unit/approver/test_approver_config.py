"""Root's ``opsbot check-config`` asks the approver which config it has in force, and
which one the page ran at its last relay: the approver reads an edited file before its
next request, and the page (which reads the file only at start) is named when it runs an
older one. Nobody but root may ask, and asking changes nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from plans import PlanStore
from shared_io.live_config import LiveConfig
from shared_schema.approver_socket import ConfigQuery, ConfigShown, Refused, View
from tests.unit.approver.bench import OTHER, Bench, bench, listening, serving

CONFIG = '[executor.allow]\nrestart_unit = ["web.service"]\n'
TOKEN = "A" * 22

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="root asks; the tests run as root")


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "opsbot.toml"
    path.write_text(text)
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    return path


def test_root_is_told_the_config_in_force_and_the_pages_last_one(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """Root asks: the approver answers with the digest of the file as it stands (an edit
    is read before the answer), and, once the page relayed a view with the digest of the
    file it started with, that digest too."""
    from approver_svc.daemon import Server

    path = _config(tmp_path, CONFIG)
    with bench(tmp_path, store, approvals_dir) as b:
        live = LiveConfig(path, sleep=lambda s: None)
        root_path = tmp_path / "root.sock"
        server = Server(
            listening(root_path),
            b.service,
            idle_timeout=0,
            notify_user=OTHER,
            web_user=OTHER,
            notify=False,
            live=live,
        )
        with serving(server):
            first = _shown(b, root_path)
            assert first.digest == hashlib.sha256(CONFIG.encode()).hexdigest()
            assert first.web_digest is None
            edited = CONFIG.replace('"web.service"', '"web.service", "db.service"')
            path.write_text(edited)
            os.utime(path, (1, 1))  # long still: read at once
            b.ask(b.web_socket, View(token=TOKEN, config_digest=first.digest))
            second = _shown(b, root_path)
            assert second.digest == hashlib.sha256(edited.encode()).hexdigest()
            assert second.started_digest == first.digest
            assert second.web_digest == first.digest and second.web_seen_at is not None
            # and what it decides by is the edited file, with no restart
            assert b.service.config.executor.allow["restart_unit"] == ["web.service", "db.service"]


def test_a_relay_may_not_ask_for_the_config(b: Bench) -> None:
    """The page's and notify's uids get the one op each is for; ``config`` is root's."""
    for socket_path in (b.web_socket, b.notify_socket):
        reply = b.ask(socket_path, ConfigQuery())
        assert isinstance(reply, Refused) and reply.kind == "request", reply
        assert "may not config" in reply.reason


def _shown(b: Bench, path: Path) -> ConfigShown:
    reply = b.ask(path, ConfigQuery())
    assert isinstance(reply, ConfigShown), reply
    return reply
