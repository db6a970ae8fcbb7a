"""Approving and rejecting: a POST from the page with the approver's code is relayed as
one ``decide``; a POST from anywhere else, or without the page's CSRF value, is refused
before the approver hears of it."""

from __future__ import annotations

from shared_schema.approver_socket import Decide
from tests.unit.web.conftest import APPROVE, REJECT, Start, Web, csrf_of


def _opened(web: Web, token: str = APPROVE, source: str = "127.0.0.1") -> tuple[object, str]:
    client = web.client(source)
    page = client.get(f"/p/{token}")
    assert page.status_code == 200
    return client, csrf_of(page.text)


def test_approve_happy_path(start_web: Start) -> None:
    """The page's form with the right code approves: one decide with the token, the code,
    the reason and the client's address; the result says until when and what applies it;
    the link then no longer works."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
        cookie = page.headers["set-cookie"].lower()
        assert "samesite=strict" in cookie and "httponly" in cookie
        assert "path=" not in cookie and "secure" not in cookie  # plain http here
        response = client.post(
            f"/p/{APPROVE}",
            data={
                "csrf": csrf_of(page.text),
                "confirm": "K7QM",
                "code": "123456",
                "reason": "as agreed",
            },
            headers={"origin": web.url},
        )
        assert response.status_code == 200, response.text
        assert 'Plan <span class="mono">20261201-152001-0a1b2c3d</span> approved' in response.text
        assert "2026-12-01 15:50:01 UTC" in response.text
        assert "opsbot-apply.service, at once" in response.text
        assert client.get(f"/p/{APPROVE}").status_code == 410
    assert web.approver.decides == [
        Decide(token=APPROVE, code="123456", confirm="K7QM", reason="as agreed", source="127.0.0.1")
    ]


def test_reject_happy_path(start_web: Start) -> None:
    """The reject link's form rejects, and says so."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{REJECT}")
        response = client.post(
            f"/p/{REJECT}", data={"csrf": csrf_of(page.text), "confirm": "K7QM", "code": "123456"}
        )
    assert response.status_code == 200
    assert "rejected" in response.text and "approved" not in response.text
    assert [d.token for d in web.approver.decides] == [REJECT]


def test_a_wrong_code_shows_the_form_again_saying_so(start_web: Start) -> None:
    """A wrong code: the form again (400) with the message; a malformed one is not even
    sent to the approver; after the approver's limit, the page says so."""
    web = start_web()
    with web.client() as client:
        csrf = csrf_of(client.get(f"/p/{APPROVE}").text)
        bad = client.post(f"/p/{APPROVE}", data={"csrf": csrf, "confirm": "K7QM", "code": "12345x"})
        assert bad.status_code == 400 and "The code is the 6 digits" in bad.text
        assert web.approver.decides == []
        for _ in range(3):
            wrong = client.post(
                f"/p/{APPROVE}", data={"csrf": csrf, "confirm": "K7QM", "code": "654321"}
            )
            assert wrong.status_code == 400
            assert "That code is wrong or was used already" in wrong.text
            assert 'name="code"' in wrong.text
        locked = client.post(
            f"/p/{APPROVE}", data={"csrf": csrf, "confirm": "K7QM", "code": "123456"}
        )
    assert locked.status_code == 429 and "Too many attempts" in locked.text
    assert len(web.approver.decides) == 4
    assert not web.approver.tokens[APPROVE].used


def test_a_post_without_the_pages_csrf_value_decides_nothing(start_web: Start) -> None:
    """No cookie, no field, a field that is not the cookie, another site's Origin or
    Referer, Origin: null: each is a 403, and the approver is never asked to decide."""
    web = start_web()
    with web.client() as client:
        csrf = csrf_of(client.get(f"/p/{APPROVE}").text)
        attempts = [
            ({"confirm": "K7QM", "code": "123456"}, {}),
            ({"confirm": "K7QM", "code": "123456", "csrf": "x" * 43}, {}),
            (
                {"confirm": "K7QM", "code": "123456", "csrf": csrf},
                {"origin": "https://evil.example"},
            ),
            ({"confirm": "K7QM", "code": "123456", "csrf": csrf}, {"origin": "null"}),
            (
                {"confirm": "K7QM", "code": "123456", "csrf": csrf},
                {"referer": "https://evil.example/p/x"},
            ),
        ]
        for data, headers in attempts:
            response = client.post(f"/p/{APPROVE}", data=data, headers=headers)
            assert response.status_code == 403, (data, headers)
    with web.client() as fresh:  # the field, but no cookie
        response = fresh.post(
            f"/p/{APPROVE}", data={"confirm": "K7QM", "code": "123456", "csrf": csrf}
        )
        assert response.status_code == 403
    assert web.approver.decides == []
    # The same request from the page itself passes: the guard refused what it should.
    with web.client() as client:
        csrf = csrf_of(client.get(f"/p/{APPROVE}").text)
        ok = client.post(
            f"/p/{APPROVE}",
            data={"confirm": "K7QM", "code": "123456", "csrf": csrf},
            headers={"origin": web.url, "referer": f"{web.url}/p/{APPROVE}"},
        )
        assert ok.status_code == 200


def test_the_cookie_is_secure_behind_the_https_proxy_only(start_web: Start) -> None:
    """On the proxy's Unix socket, X-Forwarded-Proto https makes the cookie Secure and
    X-Forwarded-For names the source the approver audits; on TCP, where any local user
    can connect, both headers are ignored."""
    headers = {"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.9"}
    for web, secure, source in (
        (start_web(), False, "127.0.0.1"),
        (start_web(listen="unix", proxy_group="www-data"), True, "203.0.113.9"),
    ):
        with web.client() as client:
            page = client.get(f"/p/{APPROVE}", headers=headers)
            assert ("secure" in page.headers["set-cookie"].lower()) is secure
            client.cookies.set("opsbot_csrf", page.cookies["opsbot_csrf"])
            client.post(
                f"/p/{APPROVE}",
                data={"confirm": "K7QM", "code": "123456", "csrf": csrf_of(page.text)},
                headers={
                    **headers,
                    "origin": f"http{'s' if secure else ''}://{page.url.netloc.decode()}",
                },
            )
        assert [d.source for d in web.approver.decides] == [source]


def test_an_oversized_body_is_a_413_without_a_decide(start_web: Start) -> None:
    """A chunked body (no Content-Length to refuse it by) is counted as it comes and
    refused once it passes max_body_bytes: 413, and no decide. The whole body is sent at
    once and then the answer read, so the server has read every byte sent when it closes
    (a client still sending when it does gets a reset, not the 413)."""
    web = start_web(max_body_bytes=1024)
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}")
        csrf, cookie = csrf_of(page.text), page.cookies["opsbot_csrf"]
    body = f"csrf={csrf}&confirm=K7QM&code=123456&reason=".encode() + b"y" * 1100
    chunked = b"".join(
        b"%x\r\n" % len(piece) + piece + b"\r\n" for piece in (body[:500], body[500:])
    )
    with web.connect() as sock:
        sock.sendall(
            f"POST /p/{APPROVE} HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n"
            f"Origin: {web.url}\r\nCookie: opsbot_csrf={cookie}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
            + chunked
            + b"0\r\n\r\n"
        )
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")
    assert web.approver.decides == []


def test_a_declared_oversized_body_is_refused_before_it_arrives(start_web: Start) -> None:
    """Headers announcing a body over the cap get their 413 at once: the server does not
    wait for (or read) a byte of it."""
    web = start_web(max_body_bytes=1024, body_timeout_seconds=60)
    with web.connect() as sock:
        sock.sendall(
            f"POST /p/{APPROVE} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n".encode()
        )
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")
    assert web.approver.requests == []
