"""``opsbot-web`` as systemd runs it: the socket systemd passes (systemd-socket-activate
stands in for the socket unit), or ``--listen`` for a developer; a clear exit without
either; SIGTERM ends it cleanly. And the room's boundary: the page imports none of the
code that holds authority."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from shared_io import exit_codes
from testbed.scripted_approver import ScriptedApprover
from testbed.skips import skip_unless
from tests.unit.repo.test_contracts import imported_modules, python_files
from tests.unit.web.conftest import APPROVE

ROOT = Path(__file__).resolve().parents[3]
#: What holds authority, or other units' code: the page reaches root only by the socket.
FORBIDDEN = {"executor_svc", "diagnose_svc", "opsbot_cli", "approver_svc", "notify_svc", "testbed"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def environment(tmp_path: Path, approver: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "OPSBOT_CONFIG": str(tmp_path / "no-such.toml"),
        "OPSBOT_APPROVER_SOCKET": str(approver),
        "OPSBOT_NO_JOURNAL": "1",
        "PYTHONPATH": str(ROOT),
    }


def page_status(port: int, bound: float = 10.0) -> int:
    """The status of the approve link's page, once the server answers (within ``bound``)."""
    deadline = time.monotonic() + bound
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/p/{APPROVE}", timeout=5).status_code
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=15)
    return process.returncode, err


def test_it_serves_on_listen_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``opsbot-web --listen 127.0.0.1:PORT`` serves the page; SIGTERM ends it with 0."""
    approver = ScriptedApprover(tmp_path / "approver.sock")
    approver.issue(APPROVE, "approve")
    port = free_port()
    with approver.running():
        process = subprocess.Popen(
            [sys.executable, "-m", "web_svc.main", "--listen", f"127.0.0.1:{port}"],
            env=environment(tmp_path, approver.path),
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert page_status(port) == 200
        finally:
            status, err = stop(process)
    # uvicorn shuts down gracefully, then dies of the signal it caught; systemd counts
    # both that and 0 as a clean stop.
    assert status in (0, -signal.SIGTERM), err
    assert "web.started" in err


def test_it_serves_the_socket_systemd_passes(tmp_path: Path) -> None:
    """Under socket activation (LISTEN_FDS, fd 3) it serves that socket, binding none."""
    activate = shutil.which("systemd-socket-activate")
    skip_unless(activate is not None, "systemd-socket-activate is not installed")
    assert activate is not None
    approver = ScriptedApprover(tmp_path / "approver.sock")
    approver.issue(APPROVE, "approve")
    port = free_port()
    env = environment(tmp_path, approver.path)
    with approver.running():
        process = subprocess.Popen(
            [activate, "-l", f"127.0.0.1:{port}", "-E", "OPSBOT_CONFIG", "-E",
             "OPSBOT_APPROVER_SOCKET", "-E", "OPSBOT_NO_JOURNAL", "-E", "PYTHONPATH",
             sys.executable, "-m", "web_svc.main"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            assert page_status(port) == 200
        finally:
            status, err = stop(process)
    assert approver.requests, err


def test_without_a_socket_it_says_what_to_do(tmp_path: Path) -> None:
    """Neither systemd's socket nor --listen: exit 2 (usage) with the hint."""
    result = subprocess.run(
        [sys.executable, "-m", "web_svc.main"],
        env=environment(tmp_path, tmp_path / "approver.sock"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == exit_codes.USAGE
    assert "no socket from systemd" in result.stderr and "--listen" in result.stderr


def forbidden_imports(source: str, module: str) -> list[str]:
    return [
        f"{line}: {name}"
        for line, name in imported_modules(source, module)
        if name.split(".")[0] in FORBIDDEN
    ]


def test_the_page_imports_nothing_that_holds_authority() -> None:
    """web_svc imports only the shared rooms and its libraries: not the executor, the
    approver, the console or the testbed (checked from the source, as test_contracts;
    the checker is first shown a violating snippet)."""
    assert forbidden_imports("from approver_svc import daemon", "web_svc.app")
    found = [
        f"{path.name}:{finding}"
        for path in python_files("web_svc")
        for finding in forbidden_imports(
            path.read_text(), ".".join(path.relative_to(ROOT).with_suffix("").parts)
        )
    ]
    assert found == []


def test_a_reload_takes_an_edit_keeps_a_broken_one_and_restarts_for_web_keys(
    tmp_path: Path,
) -> None:
    """``systemctl reload opsbot-web`` (SIGHUP), as README's reload line sends it: an edit
    outside ``[web]`` is taken at once (the approver is told the new file's digest with
    the next relay, systemd in the page's status, which check-config reads); a file that
    does not load leaves the one read before in force, and the status says so; an edit
    of ``[web]`` (built into the server) stops the page cleanly, for its socket to start
    it again with the new file."""
    import hashlib

    from shared_schema.config_state import page_status as said_status

    config = tmp_path / "opsbot.toml"
    first = "[notify]\nattempts = 3\n"
    second = "[notify]\nattempts = 2\n"
    config.write_text(first)
    approver = ScriptedApprover(tmp_path / "approver.sock")
    approver.issue(APPROVE, "approve")
    port = free_port()
    status_socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    status_socket.bind(str(tmp_path / "notify.sock"))
    status_socket.settimeout(10)
    env = environment(tmp_path, approver.path)
    env |= {"OPSBOT_CONFIG": str(config), "NOTIFY_SOCKET": str(tmp_path / "notify.sock")}

    def digests() -> list[str | None]:
        return [r.config_digest for r in approver.requests if hasattr(r, "config_digest")]

    def status() -> str:
        lines = status_socket.recv(4096).decode().splitlines()
        return next(line.removeprefix("STATUS=") for line in lines if line.startswith("STATUS="))

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    with approver.running(), status_socket:
        process = subprocess.Popen(
            [sys.executable, "-m", "web_svc.main", "--listen", f"127.0.0.1:{port}"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert status() == said_status(sha(first))
            assert page_status(port) == 200
            config.write_text(second)
            process.send_signal(signal.SIGHUP)
            assert status() == said_status(sha(second))
            assert page_status(port) == 200
            config.write_text("[notify]\nattempts = 'many'\n")
            process.send_signal(signal.SIGHUP)
            assert status() == said_status(sha(second), reload_failed=True)
            assert page_status(port) == 200
            assert digests() == [sha(first), sha(second), sha(second)]
            config.write_text(second + "[web]\nrequests_per_second = 5\n")
            process.send_signal(signal.SIGHUP)
            process.wait(timeout=15)
        finally:
            if process.poll() is None:
                stop(process)
            _, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert "config.reload_failed" in err and "attempts" in err
    assert "config.restart" in err and "Traceback" not in err
