"""A real opsbot-web on 127.0.0.1 (uvicorn in a thread, an ephemeral port), or with
``listen="unix"`` on a Unix socket as a reverse proxy reaches it, in front of a scripted
approver on a real Unix socket (testbed.scripted_approver)."""

from __future__ import annotations

import html
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared_schema.config import WebSettings
from testbed.scripted_approver import ScriptedApprover
from web_svc.app import create_app
from web_svc.main import Server, build_server, check_family, listening_socket

APPROVE = "A" * 21 + "a"
REJECT = "R" * 21 + "r"


class FrozenClock:
    """The rate limits' clock: it moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Web:
    url: str
    port: int
    approver: ScriptedApprover
    settings: WebSettings
    clock: FrozenClock
    server: Server
    #: The Unix socket it listens on (``listen="unix"``), or None on TCP.
    path: Path | None = None

    def client(self, source: str = "127.0.0.1", **kwargs: Any) -> httpx.Client:
        """A client from ``source`` (TCP), or the proxy's (the Unix socket)."""
        if self.path is not None:
            transport = httpx.HTTPTransport(uds=str(self.path))
        else:
            transport = httpx.HTTPTransport(local_address=source)
        return httpx.Client(base_url=self.url, transport=transport, timeout=10, **kwargs)

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        if self.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(str(self.path))
            return sock
        return socket.create_connection(("127.0.0.1", self.port), 5, (source, 0))


Start = Callable[..., Web]


@pytest.fixture
def start_web(tmp_path: Path) -> Iterator[Start]:
    """``start_web(**web_settings)``: the page and its scripted approver, running until
    the test ends; the approver holds an approve and a reject token."""
    stops: list[Callable[[], None]] = []

    def start(**settings: Any) -> Web:
        web_settings = WebSettings(**settings)
        home = tmp_path / f"web{len(stops)}"
        home.mkdir()
        approver = ScriptedApprover(home / "approver.sock")
        approver.issue(APPROVE, "approve")
        approver.issue(REJECT, "reject")
        running = approver.running()
        running.__enter__()
        clock = FrozenClock()
        app = create_app(web_settings, approver.path, clock=clock)
        server = build_server(web_settings, app)
        path = home / "web.sock" if web_settings.listen == "unix" else None
        if path is not None:
            listener = listening_socket(str(path))
            port = 0
        else:
            listener = listening_socket("127.0.0.1:0")
            port = listener.getsockname()[1]
        check_family(web_settings, listener)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(10)
            listener.close()
            if path is not None:
                path.unlink(missing_ok=True)
            running.__exit__(None, None, None)

        stops.append(stop)
        ready = threading.Event()
        for _ in range(500):
            if server.started:
                ready.set()
                break
            ready.wait(0.01)
        assert ready.is_set(), "the server did not start within 5 s"
        url = f"http://127.0.0.1:{port}" if path is None else "http://ops.example.com"
        return Web(url, port, approver, web_settings, clock, server, path)

    yield start
    for stop in reversed(stops):
        stop()


def argv_lines(page: str) -> list[str]:
    """Each step's argv as the page shows it (``<pre class="argv">``), as its text: what a
    person reads, and copies."""
    found = re.findall(r'<pre class="argv">(.*?)</pre>', page, flags=re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in found]


def csrf_of(page: str) -> str:
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]
