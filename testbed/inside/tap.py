"""What an approver's phone does with a link, run inside the container (httpx, no browser):

    python tap.py URL [--code CODE --confirm WORD] [--reason TEXT] [--source ADDRESS]
                      [--forwarded-for ADDRESS]

GET the link; with ``--code``, submit the page's form as a browser would (its hidden
fields and cookie, the code, the link's confirmation and the reason), from ``--source``
(a loopback address the client binds to, e.g. 127.0.0.2), with ``--forwarded-for`` as
the X-Forwarded-For of every request (an attacker's claim). Prints one JSON object:
``get`` and ``post`` each with ``status``, ``text`` (the page's visible text) and
``seconds`` (wall time of that step).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpx


class Page(HTMLParser):
    """The visible text of a page and the fields and action of its first form."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.fields: dict[str, str] = {}
        self.action: str | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in ("script", "style", "title"):
            self._skip += 1
        if tag == "form" and self.action is None:
            self.action = a.get("action", "")
        if tag in ("input", "textarea") and a.get("name"):
            self.fields.setdefault(a["name"], a.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.text.append(data.strip())


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--code")
    p.add_argument("--confirm", default="")
    p.add_argument("--reason", default="")
    p.add_argument("--source")
    p.add_argument("--forwarded-for")
    args = p.parse_args()
    transport = httpx.HTTPTransport(local_address=args.source) if args.source else None
    headers = {"x-forwarded-for": args.forwarded_for} if args.forwarded_for else {}
    said: dict[str, Any] = {}
    with httpx.Client(
        transport=transport, timeout=10, follow_redirects=True, headers=headers
    ) as client:
        started = time.monotonic()
        got = client.get(args.url)
        page = parse(got.text)
        said["get"] = {
            "status": got.status_code,
            "text": " ".join(page.text),
            "seconds": time.monotonic() - started,
            "fields": sorted(page.fields),
        }
        if args.code is not None and page.action is not None:
            form = dict(page.fields)
            form["code"] = args.code
            form["confirm"] = args.confirm
            if "reason" in form or args.reason:
                form["reason"] = args.reason
            started = time.monotonic()
            posted = client.post(urljoin(str(got.url), page.action or str(got.url)), data=form)
            said["post"] = {
                "status": posted.status_code,
                "text": " ".join(parse(posted.text).text),
                "seconds": time.monotonic() - started,
            }
    json.dump(said, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
