"""The page under requests its first tests did not send: methods other than GET, HEAD
and POST; a Host (or X-Forwarded-Host) forged to match another site's Origin; a CSRF
cookie fixed by someone else; an http page posting to the https one. None of them
reaches a decide."""

from __future__ import annotations

from tests.unit.web.conftest import APPROVE, Start, csrf_of


def test_methods_other_than_get_head_and_post_ask_the_approver_nothing(
    start_web: Start,
) -> None:
    """OPTIONS, PUT, DELETE, PATCH, TRACE and a made-up verb on a link: 405 with Allow,
    and the approver is never asked anything (not even a view); the link still works."""
    web = start_web()
    with web.client() as client:
        for method in ("OPTIONS", "PUT", "DELETE", "PATCH", "TRACE", "APPROVE"):
            response = client.request(
                method, f"/p/{APPROVE}", data={"confirm": "K7QM", "code": "123456"}
            )
            assert response.status_code == 405, (method, response.status_code)
            assert response.headers["allow"] == "GET, POST"
            assert response.headers["x-frame-options"] == "DENY"
        assert web.approver.requests == []
        assert client.get(f"/p/{APPROVE}").status_code == 200
    assert not web.approver.tokens[APPROVE].used


def test_a_forged_host_or_forwarded_host_does_not_pass_another_sites_origin(
    start_web: Start,
) -> None:
    """A browser always sends the Host of the URL it posts to, so another site's form
    cannot make Origin and Host agree; a client that forges both (or DNS rebinding, which
    makes the attacker's page its own origin) is not a browser holding the approver's
    cookie: without the page's cookie of *that* host it gets 403. X-Forwarded-Host is
    never consulted, even from the proxy."""
    web = start_web(listen="unix", proxy_group="www-data")
    with web.client() as client:
        csrf = csrf_of(client.get(f"/p/{APPROVE}").text)
        forwarded = client.post(
            f"/p/{APPROVE}",
            data={"confirm": "K7QM", "code": "123456", "csrf": csrf},
            headers={"origin": "https://evil.example", "x-forwarded-host": "evil.example"},
        )
        assert forwarded.status_code == 403
    with web.client() as rebound:  # Host and Origin both the attacker's, no cookie
        response = rebound.post(
            f"/p/{APPROVE}",
            data={"confirm": "K7QM", "code": "123456", "csrf": "x" * 43},
            headers={"host": "evil.example", "origin": "http://evil.example"},
        )
        assert response.status_code == 403
    assert web.approver.decides == []


def test_a_fixed_csrf_cookie_is_still_refused_from_another_site(start_web: Start) -> None:
    """Someone plants ``opsbot_csrf`` (a sibling subdomain's cookie, or a value sent
    over plain http) and posts that value from their site: the Origin, or the Referer
    when the Origin is held back, still says where the form came from, and that is 403."""
    web = start_web()
    fixed = "F" * 43
    with web.client(cookies={"opsbot_csrf": fixed}) as victim:
        page = victim.get(f"/p/{APPROVE}")
        assert csrf_of(page.text) == fixed  # the page keeps a well-formed cookie
        for headers in (
            {"origin": "https://evil.example"},
            {"referer": "https://evil.example/form"},
            {"origin": "null"},
        ):
            response = victim.post(
                f"/p/{APPROVE}",
                data={"confirm": "K7QM", "code": "123456", "csrf": fixed},
                headers=headers,
            )
            assert response.status_code == 403, headers
    assert web.approver.decides == []


def test_an_http_page_cannot_post_to_the_https_page(start_web: Start) -> None:
    """Behind the https proxy (on its socket), a POST whose Origin is the same host over plain
    http (a page injected into an http response by someone on the path) is refused; the
    https Origin passes."""
    web = start_web(listen="unix", proxy_group="www-data")
    proto = {"x-forwarded-proto": "https", "host": "ops.example.com"}
    with web.client() as client:
        page = client.get(f"/p/{APPROVE}", headers=proto)
        client.cookies.set("opsbot_csrf", page.cookies["opsbot_csrf"])
        data = {"confirm": "K7QM", "code": "123456", "csrf": csrf_of(page.text)}
        downgraded = client.post(
            f"/p/{APPROVE}", data=data, headers={**proto, "origin": "http://ops.example.com"}
        )
        assert downgraded.status_code == 403
        assert web.approver.decides == []
        ok = client.post(
            f"/p/{APPROVE}", data=data, headers={**proto, "origin": "https://ops.example.com"}
        )
        assert ok.status_code == 200, ok.text
    assert len(web.approver.decides) == 1


def test_an_origin_without_a_host_matches_nothing(start_web: Start) -> None:
    """An HTTP/1.0 request has no Host; an Origin that names no host must not match that
    empty Host."""
    web = start_web()
    with web.client() as client:
        csrf = csrf_of(client.get(f"/p/{APPROVE}").text)
        cookie = client.cookies["opsbot_csrf"]
    body = f"code=123456&csrf={csrf}".encode()
    request = (
        f"POST /p/{APPROVE} HTTP/1.0\r\nOrigin: opaque\r\nCookie: opsbot_csrf={cookie}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with web.connect() as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 403"), reply[:200]
    assert web.approver.decides == []


def test_a_flood_of_views_cannot_starve_a_decide(start_web: Start) -> None:
    """Someone who has a link (a chat's preview bot, a forwarded message) sends GETs of
    it from many addresses while the approver is slow to answer views: every thread for
    views is taken and more views queue. The approver's POST with her code still reaches
    the approver at once, because decides do not wait behind views."""
    import threading

    from tests.unit.web.conftest import Web

    web: Web = start_web(requests_per_minute_per_source=100000, requests_per_second=100000)
    with web.client() as approver_browser:
        csrf = csrf_of(approver_browser.get(f"/p/{APPROVE}").text)
        scripted = web.approver
        release = threading.Event()
        answer = scripted.answer
        views_waiting: list[int] = []

        def slow_views(request: object) -> object:
            if type(request).__name__ == "View":
                views_waiting.append(1)
                release.wait(20)
            return answer(request)  # type: ignore[arg-type]

        scripted.answer = slow_views  # type: ignore[method-assign, assignment]

        def preview() -> None:
            with web.client("127.0.0.3") as bot:
                bot.get(f"/p/{APPROVE}")

        flood = [threading.Thread(target=preview, daemon=True) for _ in range(7)]
        try:
            for thread in flood:
                thread.start()
            for _ in range(500):
                if len(views_waiting) >= 4:
                    break
                release.wait(0.01)
            assert len(views_waiting) >= 4, "the views did not take the page's threads"
            response = approver_browser.post(
                f"/p/{APPROVE}",
                data={"confirm": "K7QM", "code": "123456", "csrf": csrf},
                headers={"origin": web.url},
                timeout=5,
            )
            assert response.status_code == 200, response.text
            assert not release.is_set()
        finally:
            release.set()
            for thread in flood:
                thread.join(10)
    assert len(web.approver.decides) == 1
