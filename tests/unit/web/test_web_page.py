"""What an approver sees: the plan as the approver describes it, escaped, with the one
decision the link makes; a GET that changes nothing; clear pages for dead links."""

from __future__ import annotations

from shared_schema.approver_socket import View
from testbed.scripted_approver import SHA256, plan_view
from tests.unit.web.conftest import APPROVE, REJECT, Start, argv_lines


def test_the_page_shows_the_argv_the_full_sha256_and_escapes_the_goal(start_web: Start) -> None:
    """Each step's argv, exactly and escaped, the full sha256, the host, the evidence, who
    is asked and the expiries; a goal holding <script> is shown as text, not run."""
    web = start_web()
    goal = '<script>alert("x")</script> & restart'
    web.approver.issue(APPROVE, "approve", plan_view(goal=goal))
    with web.client() as client:
        response = client.get(f"/p/{APPROVE}")
    assert response.status_code == 200
    page = response.text
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; restart" in page
    assert "systemctl restart -- app.service" in argv_lines(page)
    assert "[systemctl] [restart] [--] [app.service]" in page
    assert SHA256 in page
    assert "web1" in page and "alice" in page
    assert "app.service is failed" in page and "failed (failed)" in page
    assert "status=1/FAILURE" in page
    assert "2026-12-01 15:50:01 UTC" in page  # the link's and the approval's expiry
    assert "Approve plan 20261201-152001-0a1b2c3d</button>" in page
    assert 'autocomplete="one-time-code"' in page and 'inputmode="numeric"' in page


def test_a_reject_link_says_reject_and_its_button_rejects(start_web: Start) -> None:
    """The reject link's page says it rejects, and has no approve button."""
    web = start_web()
    with web.client() as client:
        page = client.get(f"/p/{REJECT}").text
    assert "This link rejects the plan" in page
    assert "Reject plan 20261201-152001-0a1b2c3d</button>" in page
    assert "Approve plan" not in page


def test_a_get_only_views(start_web: Start) -> None:
    """A GET (a chat's link preview) only asks the approver to view: twice, and the link
    still works afterwards."""
    web = start_web()
    with web.client() as client:
        assert client.get(f"/p/{APPROVE}").status_code == 200
        assert client.head(f"/p/{APPROVE}").status_code == 200
        assert client.get(f"/p/{APPROVE}").status_code == 200
    assert web.approver.requests == [View(token=APPROVE)] * 3
    assert not web.approver.tokens[APPROVE].used


def test_a_malformed_token_is_a_404_without_asking_the_approver(start_web: Start) -> None:
    """A token that is not 22 URL-safe characters is refused before anything else."""
    web = start_web()
    with web.client() as client:
        for path in ("/p/short", f"/p/{APPROVE}x", "/p/" + "%" * 22, "/", "/p/"):
            assert client.get(path).status_code == 404, path
        assert (
            client.post("/p/short", data={"confirm": "K7QM", "code": "123456"}).status_code == 404
        )
    assert web.approver.requests == []


def test_an_unknown_or_used_link_gets_a_clear_page(start_web: Start) -> None:
    """The approver's refusal of a token is a 410 page saying the link no longer works."""
    web = start_web()
    web.approver.tokens[APPROVE].used = True
    with web.client() as client:
        for token in (APPROVE, "Z" * 22):
            response = client.get(f"/p/{token}")
            assert response.status_code == 410
            assert "This link no longer works" in response.text


def test_an_unreachable_approver_is_a_503(start_web: Start) -> None:
    """Without the approver, the page says so (503), and decides nothing."""
    web = start_web()
    web.approver.path.unlink()
    with web.client() as client:
        response = client.get(f"/p/{APPROVE}")
    assert response.status_code == 503
    assert "The approver cannot be reached" in response.text


def test_every_response_carries_the_security_headers(start_web: Start) -> None:
    """The page, a 404 and a 429 all say: no other origin's scripts, styles or frames, no
    referrer to other sites, no sniffing, no cache, no index."""
    web = start_web(requests_per_minute_per_source=2)
    with web.client() as client:
        responses = [client.get(f"/p/{APPROVE}"), client.get("/nothing"), client.get("/")]
    assert [r.status_code for r in responses] == [200, 404, 429]
    for response in responses:
        headers = response.headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "form-action 'self'" in csp and "style-src 'sha256-" in csp
        assert headers["referrer-policy"] == "same-origin"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
        assert headers["x-robots-tag"] == "noindex, nofollow"
        assert "server" not in headers
    assert '<meta name="robots" content="noindex, nofollow">' in responses[0].text
