"""``opsbot check-config`` asks the running executor over its socket which config it has
in force, and says what to run when it is not the file as saved: an edit that does not
load (the one read before stays in force), or a key the executor reads only at start."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from executor_svc.daemon import START_ONLY
from opsbot_cli.running_config import Running, running_configs
from shared_io.live_config import LiveConfig
from shared_io.paths import Paths

from .conftest import RunningExecutor

CONFIG = '[executor]\nallow = { restart_unit = ["web.service"] }\n'


def _save(path: Path, text: str) -> str:
    path.write_text(text)
    os.utime(path, (1, 1))  # saved long ago: read at once
    return hashlib.sha256(text.encode()).hexdigest()


def _executor(found: list[Running]) -> Running:
    [executor] = [r for r in found if r.unit == "opsbot-executor.service"]
    return executor


def test_check_config_names_an_executor_that_keeps_an_older_file(
    tmp_path: Path, executor: RunningExecutor
) -> None:
    """The operator saves a typo: the executor keeps the file read before, and
    check-config says so with the error; fixed, it is current; a changed operators'
    group needs a restart, and check-config says which command."""
    config = tmp_path / "opsbot.toml"
    digest = _save(config, CONFIG)
    tmp_path.chmod(0o755)
    live = LiveConfig(config, sleep=lambda s: None)
    executor.service.config_state = lambda: live.state(START_ONLY)
    paths = Paths.from_env({"OPSBOT_SOCKET": str(executor.socket)})

    def ask(digest: str) -> Running:
        return _executor(running_configs(paths, digest, running=lambda unit: "executor" in unit))

    assert ask(digest).status == "current"
    broken = _save(config, CONFIG.replace("allow =", "alow ="))
    seen = ask(broken)
    assert seen.status == "older" and "alow" in seen.detail and digest[:12] in seen.detail
    assert _save(config, CONFIG) and ask(digest).status == "current"
    regrouped = _save(config, CONFIG + 'operators_group = "ops"\n')
    seen = ask(regrouped)
    assert seen.status == "older" and "executor.operators_group" in seen.detail
    assert seen.action == "`sudo systemctl restart opsbot-executor.service`"


def test_a_daemon_that_does_not_run_is_not_started_to_be_asked(tmp_path: Path) -> None:
    """Asking a socket-activated daemon would start it: one that does not run is said to
    read the file when it starts, and its socket is never touched."""
    paths = Paths.from_env({"OPSBOT_SOCKET": str(tmp_path / "absent.sock")})
    found = running_configs(paths, "0" * 64, running=lambda unit: False)
    assert {r.status for r in found} == {"not running"}
    assert "opsbot-executor.service" in {r.unit for r in found}


def test_the_diagnosis_service_says_its_config_and_a_quota_edit_needs_a_restart(
    tmp_path: Path,
) -> None:
    """The diagnosis service answers check-config's ``config`` without diagnosing (no
    run slot taken), and names its quotas, which it reads only at start."""
    import socket
    import threading

    from diagnose_svc.daemon import START_ONLY as DIAGNOSE_START_ONLY
    from diagnose_svc.server import DiagnoseServer

    config = tmp_path / "opsbot.toml"
    _save(config, CONFIG)
    tmp_path.chmod(0o755)
    live = LiveConfig(config, sleep=lambda s: None)
    path = tmp_path / "diagnose.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def diagnose(*args: object) -> object:
        raise AssertionError("asking for the config diagnoses nothing")

    server = DiagnoseServer(
        listener,
        diagnose,  # type: ignore[arg-type]
        idle_timeout=0,
        notify=False,
        config_state=lambda: live.state(DIAGNOSE_START_ONLY),
    )
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        paths = Paths.from_env({"OPSBOT_DIAGNOSE_SOCKET": str(path)})
        quota = _save(config, CONFIG + "[diagnose]\nruns_per_uid = 1\n")
        found = running_configs(paths, quota, running=lambda unit: "diagnose" in unit)
        [seen] = [r for r in found if r.unit == "opsbot-diagnose.service"]
        assert seen.status == "older" and "diagnose.runs_per_uid" in seen.detail
        assert server.quota.running == 0
    finally:
        server.stopping.set()
        thread.join(timeout=10)
        listener.close()
