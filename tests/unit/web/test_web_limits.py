"""What protects the page from a flood: header and body deadlines for slow clients (and
for one that stops reading), connections per source and in all (one over a limit takes
the place of the one the page has waited on longest, so idle ones keep no newcomer out),
and per-source and global rate limits, each shown holding one source back while another
(127.0.0.2) still gets through."""

from __future__ import annotations

import socket
import time

import pytest

from shared_schema.config import WebSettings
from tests.unit.web.conftest import APPROVE, Start, Web
from web_svc.limits import RateLimiter, TokenBucket, source_key
from web_svc.main import KEEP_ALIVE_SECONDS
from web_svc.protocol import ConnectionCounts

#: Timing and load: run alone, after the parallel pass (scripts/test).
pytestmark = pytest.mark.serial

#: How long a test waits for the server to close a connection it must close: far more
#: than the deadline, so that only a server that never closes it fails.
BOUND = 10.0


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed ``sock`` (reading and discarding), or None."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return None
    return time.monotonic() - start


def get_works(web: Web, source: str) -> bool:
    with web.client(source) as client:
        return client.get(f"/p/{APPROVE}").status_code == 200


def request_on(sock: socket.socket) -> bytes:
    """One keep-alive GET on an open connection; the status line."""
    sock.sendall(f"GET /p/{APPROVE} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    sock.settimeout(5)
    data = b""
    while b"</html>" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def trickled_until_closed(sock: socket.socket, data: bytes) -> bool:
    """Send ``data`` a byte every 50 ms until the server closes ``sock`` (True), or for
    at most BOUND seconds (False)."""
    started = time.monotonic()
    sock.settimeout(0.05)
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(1) == b"":
                return True
        except TimeoutError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            return True
        if time.monotonic() - started > BOUND:
            return False
    return False


def test_a_silent_client_is_closed_after_the_header_deadline(start_web: Start) -> None:
    """A connection that sends nothing is closed once header_timeout_seconds pass."""
    web = start_web(header_timeout_seconds=0.3)
    opened = time.monotonic()
    with web.connect() as sock:
        elapsed = closed_within(sock, BOUND)
    assert elapsed is not None, f"still open after {BOUND} s"
    assert time.monotonic() - opened >= 0.3


def test_a_client_trickling_its_headers_is_closed_after_the_deadline(start_web: Start) -> None:
    """A client that sends its headers a byte at a time (slowloris) is closed by the
    header deadline, however often it sends."""
    web = start_web(header_timeout_seconds=0.5)
    request = f"GET /p/{APPROVE} HTTP/1.1\r\nHost: x\r\nX-Slow: ".encode() + b"a" * 1000
    with web.connect() as sock:
        assert trickled_until_closed(sock, request), "still open after trickling"


def test_a_client_stalling_in_its_body_is_closed_after_the_body_deadline(
    start_web: Start,
) -> None:
    """Headers in time, then a body that stops coming: closed once body_timeout_seconds
    pass (the header deadline, far off, does not do it), and nothing decided."""
    web = start_web(header_timeout_seconds=60, body_timeout_seconds=0.3)
    head = f"POST /p/{APPROVE} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
    head += "Content-Type: application/x-www-form-urlencoded\r\n\r\n"
    with web.connect() as sock:
        sock.sendall(head.encode() + b"code=1")
        assert closed_within(sock, BOUND) is not None
    assert web.approver.decides == []


def test_the_deadline_starts_again_after_each_response(start_web: Start) -> None:
    """After a response, a keep-alive connection that trickles its next request (each
    byte puts off uvicorn's own keep-alive timeout) is closed by the header deadline; so
    is one that stays silent, before uvicorn's keep-alive would close it."""
    web = start_web(header_timeout_seconds=0.3)
    with web.connect() as sock:
        assert request_on(sock) == b"HTTP/1.1 200 OK"
        assert trickled_until_closed(sock, b"GET /p/" + b"a" * 2000), "still open"
    with web.connect() as sock:
        assert request_on(sock) == b"HTTP/1.1 200 OK"
        assert closed_within(sock, KEEP_ALIVE_SECONDS - 1) is not None


def test_a_sources_connection_over_its_limit_takes_the_place_of_its_longest_waiting(
    start_web: Start,
) -> None:
    """connections_per_source from 127.0.0.1 are served; the next one from it is served
    too, in the place of the one of 127.0.0.1 the page has waited on longest (closed),
    while the other still is; 127.0.0.2 is served all along. A source that holds its
    connections by keeping them idle keeps no newcomer out (the proxy's address, too)."""
    web = start_web(connections_per_source=2, header_timeout_seconds=60)
    held = [web.connect(), web.connect()]
    for sock in held:
        assert request_on(sock) == b"HTTP/1.1 200 OK"
    with web.connect() as newcomer:
        assert request_on(newcomer) == b"HTTP/1.1 200 OK"
        assert closed_within(held[0], BOUND) is not None
        assert request_on(held[1]) == b"HTTP/1.1 200 OK"
        assert get_works(web, "127.0.0.2")
    for sock in held:
        sock.close()


def test_the_proxys_socket_is_held_only_by_max_connections(start_web: Start) -> None:
    """On the Unix socket every connection is the reverse proxy's (only its group may
    connect), so it is not held to connections_per_source, only to max_connections: a
    fourth of three takes the place of the one waited on longest."""
    web = start_web(
        listen="unix", proxy_group="www-data", connections_per_source=1, max_connections=3
    )
    held = [web.connect() for _ in range(3)]
    for sock in held:
        assert request_on(sock) == b"HTTP/1.1 200 OK"
    with web.connect() as fourth:
        assert request_on(fourth) == b"HTTP/1.1 200 OK"
        assert closed_within(held[0], BOUND) is not None
        for sock in held[1:]:
            assert request_on(sock) == b"HTTP/1.1 200 OK"
    for sock in held:
        sock.close()


def test_a_local_user_rotating_x_forwarded_for_on_tcp_is_still_one_source(
    start_web: Start,
) -> None:
    """The attack on a page that believed 127.0.0.1's X-Forwarded-For: a local user
    connects to the TCP port and names a new source with each request. On TCP no such
    header is believed: the fourth request of three a minute is 429 all the same."""
    web = start_web(requests_per_minute_per_source=3)
    with web.client("127.0.0.1") as local:
        statuses = [
            local.get(f"/p/{APPROVE}", headers={"x-forwarded-for": f"198.51.100.{n}"}).status_code
            for n in range(4)
        ]
    assert statuses == [200, 200, 200, 429]


def test_no_more_than_max_connections_in_all(start_web: Start) -> None:
    """max_connections across sources: one over it, whatever its source, takes the place
    of the connection waited on longest (whatever its source; a silent one before one
    that was answered later), and the others are still served."""
    web = start_web(max_connections=3, header_timeout_seconds=60)
    silent = web.connect("127.0.0.1")
    answered = [web.connect(source) for source in ("127.0.0.2", "127.0.0.3")]
    for sock in answered:
        assert request_on(sock) == b"HTTP/1.1 200 OK"
    with web.connect("127.0.0.4") as fourth:
        assert request_on(fourth) == b"HTTP/1.1 200 OK"
        assert closed_within(silent, BOUND) is not None
        for sock in answered:
            assert request_on(sock) == b"HTTP/1.1 200 OK"
    for sock in [silent, *answered]:
        sock.close()


class Connection:
    """A connection as ConnectionCounts sees it, that records being shut."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.was_shut = False

    def shut(self) -> None:
        self.was_shut = True


def test_only_connections_the_page_waits_on_make_room_and_the_longest_waiting_first() -> None:
    """A newcomer over a limit shuts the connection waited on longest, of its source at
    connections_per_source, of all at max_connections; one whose request is being
    answered is never shut for it: when every connection in the way is busy, the
    newcomer is refused and nothing is shut."""
    counts = ConnectionCounts(WebSettings(connections_per_source=2, max_connections=3))
    a1, a2, b1 = Connection("a1"), Connection("a2"), Connection("b1")
    for conn, source in ((a1, "127.0.0.1"), (a2, "127.0.0.1"), (b1, "127.0.0.2")):
        assert counts.admit(conn, source)
        counts.waiting(conn)
    counts.waiting(a1)  # a1 waits again (a new request after a response): now the newest
    a3 = Connection("a3")
    assert counts.admit(a3, "127.0.0.1")
    assert [c.name for c in (a1, a2, b1) if c.was_shut] == ["a2"]
    counts.waiting(a3)
    c1 = Connection("c1")
    assert counts.admit(c1, "127.0.0.3")
    assert [c.name for c in (a1, b1, a3) if c.was_shut] == ["b1"]
    for conn in (a1, a3, c1):
        counts.busy(conn)
    assert not counts.admit(Connection("d1"), "127.0.0.4")
    assert not counts.admit(Connection("a4"), "127.0.0.1")
    assert not any(c.was_shut for c in (a1, a3, c1))
    counts.release(c1)
    assert counts.admit(Connection("d1"), "127.0.0.4")
    assert counts.open == 3


def test_a_client_that_stops_reading_its_responses_is_closed_after_the_deadline(
    start_web: Start,
) -> None:
    """A client that pipelines requests and never reads the answers fills the buffers
    until uvicorn stops writing; then the page waits on it (it may be shut for another)
    and closes it after header_timeout_seconds, as it would a silent one."""
    web = start_web(header_timeout_seconds=0.5, requests_per_minute_per_source=100000)
    requests = b"GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
    with web.connect() as hoarder:
        hoarder.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hoarder.settimeout(0.05)
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < BOUND:
            try:
                hoarder.sendall(requests)
            except TimeoutError:
                pass  # the server stopped reading: it is busy writing what we never read
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        assert closed, f"still open after {BOUND} s of unread responses"


def test_one_source_over_its_rate_gets_429_while_another_passes(start_web: Start) -> None:
    """requests_per_minute_per_source from one source pass, the next is 429 with
    Retry-After (cheap: no approver asked); 127.0.0.2 still passes; a minute later the
    first passes again. The clock is the test's."""
    web = start_web(requests_per_minute_per_source=3)
    with web.client("127.0.0.1") as flooding, web.client("127.0.0.2") as other:
        assert [flooding.get(f"/p/{APPROVE}").status_code for _ in range(3)] == [200] * 3
        refused = flooding.get(f"/p/{APPROVE}")
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "20"
        assert "Too many requests" in refused.text
        assert other.get(f"/p/{APPROVE}").status_code == 200
        assert len(web.approver.requests) == 4
        web.clock.now += 60
        assert flooding.get(f"/p/{APPROVE}").status_code == 200


def test_the_global_rate_limit_holds_everyone(start_web: Start) -> None:
    """requests_per_second in all: past it, every source gets 429 until the clock moves."""
    web = start_web(requests_per_second=4)
    statuses = []
    for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
        with web.client(source) as client:
            statuses.append(client.get("/").status_code)
    assert statuses == [404, 404, 404, 404, 429]
    web.clock.now += 1
    with web.client("127.0.0.5") as client:
        assert client.get("/").status_code == 404


def test_a_source_refused_by_its_own_limit_spends_nothing_of_the_global_one() -> None:
    """A flooding source's refused requests leave the global bucket to everyone else."""
    now = [0.0]
    limiter = RateLimiter(per_minute_per_source=2, per_second=4, clock=lambda: now[0])
    assert [limiter.retry_after("a") for _ in range(50)][:3] == [0.0, 0.0, 30.0]
    assert [limiter.retry_after(s) for s in ("b", "c")] == [0.0, 0.0]
    assert limiter.retry_after("d") > 0


def test_a_bucket_refills_at_its_rate() -> None:
    """Two at once, then one per half second."""
    bucket = TokenBucket(rate=2.0, capacity=2.0, now=0.0)
    assert [bucket.take(0.0), bucket.take(0.0)] == [0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0.0


def test_sources_are_addresses_and_ipv6_counts_by_its_64() -> None:
    """One IPv6 host (a /64) is one source; IPv4-mapped IPv6 is the IPv4 address."""
    assert source_key("192.0.2.1") == "192.0.2.1"
    assert source_key("2001:db8:1:2::5") == source_key("2001:db8:1:2:ffff::1")
    assert source_key("2001:db8:1:2::5") == "2001:db8:1:2::/64"
    assert source_key("::ffff:192.0.2.1") == "192.0.2.1"
