"""The approval page: ``GET /p/<token>`` shows what the link is for, ``POST /p/<token>``
relays the approver's decision, with their TOTP code and the link's confirmation (the
characters beside the link in their message, which this page never sees otherwise), to
root's opsbot-approver; ``GET /p/<token>/status`` shows where the plan that link decided
is now, as the approver says (``follow``), reloading itself until the plan settles.

The token's form is checked before anything else (a 404 page, the approver not asked).
A GET only asks the approver to ``view`` (a chat's link preview fetches every URL; it
changes nothing). A POST must pass the CSRF checks first: an Origin (or Referer), when
the browser sends one, naming this host (over https when the page is served over
https); and the double-submit value, a random cookie set by the GET (SameSite=Strict,
HttpOnly, Secure over https) equal to the form's hidden field. Only then is the code
sent with the confirmation and the token in a ``decide``; whatever the approver answers
is shown as it is (web_svc.words says its times and relayed text). The page keeps no
state of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import shlex
import time
from base64 import b64encode
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
import structlog
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from shared_io.errors import SocketUnavailable
from shared_schema.approver_socket import (
    CONFIRM_LENGTH,
    CONFIRM_PATTERN,
    TOKEN_PATTERN,
    Decided,
    Followed,
    Refused,
    Viewed,
)
from shared_schema.config import WebSettings
from shared_schema.escape import printable
from web_svc.approver import ApproverClient
from web_svc.guard import Client, Guard
from web_svc.limits import Clock, RateLimiter
from web_svc.words import SETTLED, STATE_WORDS, exact, headline, relayed, time_element

log = structlog.get_logger("opsbot.web")

CSRF_COOKIE = "opsbot_csrf"
CSRF_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")
CODE_PATTERN = re.compile(r"[0-9]{6}")
CONFIRM = re.compile(CONFIRM_PATTERN)
CONFIRM_HELP = (
    f"The confirmation is the {CONFIRM_LENGTH} characters beside this link in your message."
)
TOKEN = re.compile(TOKEN_PATTERN)
MAX_REASON = 500

STYLE = files("web_svc").joinpath("static/opsbot.css").read_text(encoding="utf-8")
STYLE_HASH = b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)

#: The page a refusal of each kind shows: status, title, what it means.
REFUSALS: dict[str, tuple[int, str, str]] = {
    "token": (
        410,
        "This link no longer works",
        "It was used already, has expired, or was never issued. Each link works once.",
    ),
    "plan": (409, "The plan cannot be decided now", "It changed, ended, or is not waiting."),
    "limit": (429, "Too many attempts", "Too many wrong codes; this link or approver is locked."),
    "code": (400, "Wrong code", "The code was wrong or was used already."),
    "confirm": (400, "Wrong confirmation", "It is not the one beside this link."),
    "request": (503, "The approver refused this page", "Its journal says why."),
    "internal": (503, "The approver failed", "Its journal says why; nothing was decided."),
}
#: The status view's refusal of a link that decided nothing the approver remembers.
NOTHING_TO_FOLLOW = (
    410,
    "Nothing to follow here",
    "This link decided nothing, or the approver no longer remembers it (it forgets a link "
    "when the link would have expired). On the host, opsbot show ID says where the plan is.",
)
#: Seconds between the status view's reloads while the plan has not settled.
FOLLOW_SECONDS = 10


def _shown(value: Any) -> Any:
    """Every text a page shows, before it is HTML-escaped: control characters and
    bidirectional overrides as escapes (what a unit logged reaches the page as evidence and
    verification). Markup the page built itself passes as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("web_svc", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_shown,
    )
    env.filters["shell"] = shlex.join
    env.filters["shell_words"] = lambda argv: [shlex.quote(arg) for arg in argv]
    env.globals.update(style=STYLE, exact=exact)
    return env


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Typed:
    """What the approver typed that the form shows again after a refusal: the
    confirmation (unless it was the wrong one) and the reason; never the code."""

    confirm: str = ""
    reason: str = ""


class Pages:
    """The routes, bound to one approver client; times are said relative to ``now``."""

    def __init__(self, approver: ApproverClient, now: Callable[[], datetime] = utcnow) -> None:
        self.approver = approver
        self.now = now
        self.templates = _environment()

    def page(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        now = self.now()
        text = self.templates.get_template(template).render(
            when=partial(time_element, now=now), relayed=partial(relayed, now=now), **context
        )
        return HTMLResponse(text, status_code=status)

    def refused(
        self, status: int, title: str, text: str, reason: str = "", follow: str = ""
    ) -> HTMLResponse:
        return self.page(
            "refused.html", status, title=title, text=text, reason=reason, follow=follow
        )

    def refusal(self, refused: Refused) -> HTMLResponse:
        status, title, text = REFUSALS[refused.kind]
        return self.refused(status, title, text, refused.reason)

    def unreachable(self, exc: SocketUnavailable) -> HTMLResponse:
        log.error("web.approver_unavailable", reason=exc.reason, error=exc.message)
        return self.refused(
            503, "The approver cannot be reached", "Nothing was decided; try again shortly."
        )

    def form(
        self,
        request: Request,
        viewed: Viewed,
        status: int = 200,
        message: str = "",
        typed: Typed | None = None,
    ) -> HTMLResponse:
        """The plan and its form; after a refusal, ``message`` beside the code field and
        what the approver ``typed`` (but the code) in its fields again."""
        csrf = request.cookies.get(CSRF_COOKIE, "")
        if not CSRF_PATTERN.fullmatch(csrf):
            csrf = secrets.token_urlsafe(32)
        response = self.page(
            "plan.html",
            status,
            plan=viewed.plan,
            headline=headline(viewed.plan.steps, viewed.plan.host),
            typed=typed or Typed(),
            approver=viewed.approver,
            decision=viewed.decision,
            verb="Approve" if viewed.decision == "approve" else "Reject",
            confirm_length=CONFIRM_LENGTH,
            link_expires_at=viewed.expires_at,
            csrf=csrf,
            message=message,
        )
        # No Path: the browser's default is the link's directory (/p, or /<prefix>/p
        # behind a proxy), so the cookie goes only to the links.
        response.set_cookie(
            CSRF_COOKIE,
            csrf,
            path=None,
            httponly=True,
            samesite="strict",
            secure=client(request).https,
        )
        return response

    async def show(self, request: Request) -> Response:
        token = request.path_params["token"]
        if not TOKEN.fullmatch(token):
            return self.not_found()
        try:
            reply = await self.approver.view(token)
        except SocketUnavailable as exc:
            return self.unreachable(exc)
        if isinstance(reply, Refused):
            log.debug("web.view_refused", kind=reply.kind, source=client(request).source)
            if reply.kind == "token":  # used, perhaps: what became of its plan
                status, title, text = REFUSALS["token"]
                return self.refused(status, title, text, reply.reason, f"{token}/status")
            return self.refusal(reply)
        return self.form(request, reply)

    async def follow(self, request: Request) -> Response:
        """Where the plan this link decided is now, as the approver says; while it has
        not settled, the page reloads itself (no script: a meta refresh)."""
        token = request.path_params["token"]
        if not TOKEN.fullmatch(token):
            return self.not_found()
        try:
            reply = await self.approver.follow(token)
        except SocketUnavailable as exc:
            return self.unreachable(exc)
        if isinstance(reply, Refused):
            if reply.kind == "token":
                return self.refused(*NOTHING_TO_FOLLOW, reply.reason)
            return self.refusal(reply)
        return self.status(reply)

    def status(self, followed: Followed) -> HTMLResponse:
        settled = followed.state in SETTLED
        return self.page(
            "status.html",
            followed=followed,
            words=STATE_WORDS[followed.state],
            settled=settled,
            refresh=0 if settled else FOLLOW_SECONDS,
            past="approved" if followed.decision == "approve" else "rejected",
        )

    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        if not TOKEN.fullmatch(token):
            return self.not_found()
        who = client(request)
        why = cross_site(request)
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if why is None and not CSRF_PATTERN.fullmatch(cookie):
            why = "no CSRF cookie (open the link again)"
        try:
            form = await request.form(max_files=0, max_fields=8)
        except ClientDisconnect:
            return Response(status_code=400)
        field = form.get("csrf")
        if why is None and not (
            isinstance(field, str) and hmac.compare_digest(field.encode(), cookie.encode())
        ):
            why = "the form's CSRF value is not the cookie's"
        if why is not None:
            log.warning("web.csrf_refused", why=why, source=who.source)
            return self.refused(
                403, "Refused", "This request did not come from the approval page.", why
            )
        code = form.get("code")
        reason = form.get("reason") or ""
        confirm = form.get("confirm")
        confirm = confirm.strip().upper() if isinstance(confirm, str) else ""
        typed = Typed(confirm if CONFIRM.fullmatch(confirm) else "")
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            return await self.again(
                request, token, f"The reason is {MAX_REASON} characters at most.", typed
            )
        typed = Typed(typed.confirm, reason)
        if not isinstance(code, str) or not CODE_PATTERN.fullmatch(code.strip()):
            return await self.again(
                request, token, "The code is the 6 digits your app shows.", typed
            )
        if not CONFIRM.fullmatch(confirm):
            return await self.again(request, token, CONFIRM_HELP, typed)
        try:
            reply = await self.approver.decide(token, code.strip(), confirm, reason, who.source)
        except SocketUnavailable as exc:
            return self.unreachable(exc)
        if isinstance(reply, Refused):
            log.info("web.decide_refused", kind=reply.kind, source=who.source)
            if reply.kind == "code":
                return await self.again(
                    request,
                    token,
                    "That code is wrong or was used already. Try the next one.",
                    typed,
                )
            if reply.kind == "confirm":
                return await self.again(
                    request,
                    token,
                    "That confirmation is not the one beside this link in your message. "
                    "Type the next code with the four characters shown beside this link.",
                    Typed(reason=reason),
                )
            return self.refusal(reply)
        return self.done(reply, who, token)

    async def again(
        self, request: Request, token: str, message: str, typed: Typed | None = None
    ) -> Response:
        """The form once more, with ``message`` and what was ``typed`` (the approver is
        asked to view again, so the page shows the plan as it is now)."""
        try:
            reply = await self.approver.view(token)
        except SocketUnavailable as exc:
            return self.unreachable(exc)
        if isinstance(reply, Refused):
            return self.refusal(reply)
        return self.form(request, reply, 400, message, typed)

    def done(self, decided: Decided, who: Client, token: str) -> HTMLResponse:
        log.info(
            "web.decided",
            plan_id=decided.plan_id,
            sha256=decided.sha256,
            decision=decided.decision,
            approver=decided.approver,
            source=who.source,
        )
        past = "approved" if decided.decision == "approve" else "rejected"
        return self.page("done.html", decided=decided, past=past, follow=f"{token}/status")

    def not_found(self) -> HTMLResponse:
        return self.refused(404, "No such page", "This is not an approval link.")

    async def missing(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            return Response("Method not allowed.\n", 405, {"allow": "GET, POST"})
        return self.not_found()


def client(request: Request) -> Client:
    who = request.scope.get("state", {}).get("client")
    if isinstance(who, Client):
        return who
    peer = request.client
    return Client(peer.host if peer else "", request.url.scheme == "https")


def cross_site(request: Request) -> str | None:
    """Why the POST did not come from this host's page, or None: its Origin (else its
    Referer), when the browser sent one, must name the Host it was sent to."""
    host = request.headers.get("host", "").lower()
    # Over https (directly or to a trusted proxy), a page of the same host over plain
    # http (injected by someone on the path) is another origin.
    schemes = ("https",) if client(request).https else ("http", "https")
    origin = request.headers.get("origin")
    if origin is not None:
        if origin == "null":
            return "Origin: null"
        return None if _names(origin, host, schemes) else f"Origin {origin[:100]}"
    referer = request.headers.get("referer")
    if referer is not None and not _names(referer, host, schemes):
        return "Referer of another site"
    return None


def _names(url: str, host: str, schemes: tuple[str, ...]) -> bool:
    """Whether ``url`` is of ``host`` (not empty) over one of ``schemes``."""
    parts = urlsplit(url)
    return bool(host) and parts.netloc.lower() == host and parts.scheme.lower() in schemes


def create_app(
    settings: WebSettings,
    approver_socket: Path,
    *,
    clock: Clock = time.monotonic,
    config_digest: str | None = None,
    client: ApproverClient | None = None,
) -> Starlette:
    """The page for ``settings``, asking the approver at ``approver_socket`` (through
    ``client`` when given: the one a reload tells the new digest); the rate limits run on
    ``clock``."""
    pages = Pages(client or ApproverClient(approver_socket, config_digest=config_digest))
    limiter = RateLimiter(
        per_minute_per_source=settings.requests_per_minute_per_source,
        per_second=settings.requests_per_second,
        clock=clock,
    )
    guard = Middleware(
        Guard,
        limiter=limiter,
        max_body_bytes=settings.max_body_bytes,
        behind_proxy=settings.listen == "unix",
        content_security_policy=CONTENT_SECURITY_POLICY,
    )
    handler: Callable[[Request, Exception], Any] = pages.missing
    return Starlette(
        routes=[
            Route("/p/{token}", pages.show, methods=["GET"]),
            Route("/p/{token}", pages.decide, methods=["POST"]),
            Route("/p/{token}/status", pages.follow, methods=["GET"]),
        ],
        middleware=[guard],
        exception_handlers={404: handler, 405: handler},
    )
