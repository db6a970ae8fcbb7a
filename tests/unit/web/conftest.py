"""A real opsbot-web on 127.0.0.1 (uvicorn in a thread, an ephemeral port), in front of a
scripted approver on a real Unix socket (testbed.scripted_approver)."""

from __future__ import annotations

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
from web_svc.main import Server, build_server

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

    def client(self, source: str = "127.0.0.1", **kwargs: Any) -> httpx.Client:
        transport = httpx.HTTPTransport(local_address=source)
        return httpx.Client(base_url=self.url, transport=transport, timeout=10, **kwargs)

    def connect(self, source: str = "127.0.0.1") -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), 5, (source, 0))
        return sock


Start = Callable[..., Web]


@pytest.fixture
def start_web(tmp_path: Path) -> Iterator[Start]:
    """``start_web(**web_settings)``: the page and its scripted approver, running until
    the test ends; the approver holds an approve and a reject token."""
    stops: list[Callable[[], None]] = []

    def start(**settings: Any) -> Web:
        web_settings = WebSettings(**settings)
        approver = ScriptedApprover(tmp_path / "approver.sock")
        approver.issue(APPROVE, "approve")
        approver.issue(REJECT, "reject")
        running = approver.running()
        running.__enter__()
        clock = FrozenClock()
        app = create_app(web_settings, approver.path, clock=clock)
        server = build_server(web_settings, app)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(10)
            listener.close()
            running.__exit__(None, None, None)

        stops.append(stop)
        ready = threading.Event()
        for _ in range(500):
            if server.started:
                ready.set()
                break
            ready.wait(0.01)
        assert ready.is_set(), "the server did not start within 5 s"
        return Web(f"http://127.0.0.1:{port}", port, approver, web_settings, clock, server)

    yield start
    for stop in reversed(stops):
        stop()


def csrf_of(page: str) -> str:
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]
