"""http_get_health against a real HTTP server on 127.0.0.1 started by the test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from diagnose_svc.errors import ToolError
from diagnose_svc.tools import READ_TOOLS, HealthResult, ToolContext
from shared_schema import DiagnoseSettings, HealthTarget

TOOL = READ_TOOLS["http_get_health"]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/slow":
            time.sleep(1.0)
        status, body, headers = {
            "/ok": (200, b"ok " * 500, {}),
            "/fail": (500, b"database unavailable", {}),
            "/slow": (200, b"late", {}),
            "/moved": (302, b"", {"Location": "http://169.254.169.254/latest/meta-data/"}),
            "/garbled": (503, b"not gzip at all", {"Content-Encoding": "gzip"}),
        }.get(self.path, (404, b"no", {}))
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def probe(url: str, timeout: float = 2.0, unit: str | None = "web.service") -> HealthResult:
    target = HealthTarget.model_validate({"url": url, "unit": unit, "timeout_seconds": timeout})
    context = ToolContext(settings=DiagnoseSettings(health={"web": target}))
    result = TOOL(TOOL.parse_args({"target": "web"}), context)
    assert isinstance(result, HealthResult)
    return result


def test_ok(server: str) -> None:
    """A 200 is outcome ok, with the status, a latency and a bounded body excerpt."""
    result = probe(server + "/ok")
    assert (result.outcome, result.status, result.expected_status) == ("ok", 200, 200)
    assert result.latency_ms is not None and result.latency_ms >= 0
    assert result.body_excerpt.startswith("ok ok") and len(result.body_excerpt) == 300
    assert result.unit == "web.service" and result.target == "web"
    assert result.summary().startswith("health target web (served by web.service) answered 200")


def test_server_error(server: str) -> None:
    """A 500 is outcome unexpected_status, with the body's start."""
    result = probe(server + "/fail")
    assert (result.outcome, result.status) == ("unexpected_status", 500)
    assert result.body_excerpt == "database unavailable"
    assert not result.gateway_error


def test_timeout(server: str) -> None:
    """A server slower than the target's timeout gives outcome timeout."""
    started = time.monotonic()
    result = probe(server + "/slow", timeout=0.2)
    assert result.outcome == "timeout" and result.status is None
    assert result.error is not None and "no answer within 0.2 s" in result.error
    assert time.monotonic() - started < 1.0


def test_connection_refused() -> None:
    """Nothing listening gives outcome connection_refused."""
    result = probe(f"http://127.0.0.1:{closed_port()}/")
    assert result.outcome == "connection_refused"
    assert result.summary().startswith("health target web (served by web.service): connection_")


def test_redirect_is_not_followed(server: str) -> None:
    """A redirect is reported with its Location, never followed."""
    result = probe(server + "/moved")
    assert (result.outcome, result.status) == ("unexpected_status", 302)
    assert result.location == "http://169.254.169.254/latest/meta-data/"


def test_unknown_target_lists_the_known_ones(server: str) -> None:
    """The model names a target, never a URL: an unknown name is refused with the list."""
    target = HealthTarget.model_validate({"url": server + "/ok", "unit": "nginx.service"})
    context = ToolContext(settings=DiagnoseSettings(health={"web": target, "api": target}))
    with pytest.raises(ToolError) as caught:
        TOOL(TOOL.parse_args({"target": "db"}), context)
    assert caught.value.message == (
        "unknown health target 'db'; known targets: api (nginx.service), web (nginx.service)"
    )


def test_a_url_is_not_a_target() -> None:
    """Passing a URL (or anything but a target name) fails argument validation."""
    for args in ({"target": "http://10.0.0.1/"}, {"url": "http://10.0.0.1/"}):
        with pytest.raises(ToolError, match="bad arguments for http_get_health"):
            TOOL.parse_args(args)


def test_a_body_its_encoding_does_not_fit_is_still_an_answer(server: str) -> None:
    """A 503 whose body says gzip and is not: the answer's status counts (it failed as
    expected of a 503), the body says it could not be decoded, and nothing is raised (the
    same probe decides whether root's standing rule may restart a running unit)."""
    result = probe(server + "/garbled")
    assert (result.outcome, result.status) == ("unexpected_status", 503)
    assert result.body_excerpt.startswith("(a body that cannot be decoded")
