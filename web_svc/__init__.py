"""opsbot-web: the approval page, which holds no authority.

An approver opens the link a notification carried (``/p/<token>``); the page shows the
plan as root's opsbot-approver describes it and, on a POST with the approver's TOTP code,
relays the decision to that approver. Every check that matters (the token, the code, the
plan's sha256) is the approver's; this unit only shows, relays and protects itself.

    app        the Starlette app: the two routes, the pages, CSRF
    approver   the one client of /run/opsbot/approver.sock
    guard      the ASGI middleware: rate limits, the body cap, security headers
    limits     token buckets and the source address a limit counts against
    protocol   uvicorn's h11 protocol with connection limits and header/body deadlines
    reload     ``systemctl reload``: the config read again, or the page stopped for a new one
    main       ``opsbot-web``: the socket from systemd, the config, the server
"""

from web_svc.app import create_app

__all__ = ["create_app"]
