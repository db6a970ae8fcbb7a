"""A flood at the approval page from one source, and an approver's click from another,
run inside the container:

    python flood.py --page URL --legit APPROVE_URL --code CODE --confirm WORD
                    --victim URL --pid PID
                    [--rate 500] [--seconds 20] [--legit-at 5]

For ``--seconds`` at a fixed ``--rate`` of new connections from 127.0.0.66 (bounded: at
most ``MAX_OPEN`` open at once; each gives up after ``CLIENT_TIMEOUT`` seconds), a mix of:
GETs of unknown links (70%); POSTs of random codes to ``--victim``, a real link of a plan
nobody approves, with a cookie and CSRF field that agree, so that they reach the approver
(10%); garbage bytes that are not HTTP (10%); and slow clients that send a request line
and then a header byte a second (10%). At ``--legit-at`` seconds, the approver opens
``--legit`` from 127.0.0.2 and submits ``--code`` and ``--confirm``, as a phone would.
The page's RSS (``--pid``'s VmRSS) is sampled every 0.25 s. Prints one JSON object with
the figures; the test judges them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import sys
import time
from typing import Any
from urllib.parse import urljoin, urlparse

import httpx

MAX_OPEN = 400
#: The flood's one address: not the tests' own 127.0.0.1, which the approver would then
#: refuse for 15 minutes (ten wrong codes from one source).
FLOOD_SOURCE = "127.0.0.66"
CLIENT_TIMEOUT = 5.0


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Flood:
    def __init__(self, host: str, port: int, prefix: str, victim_path: str) -> None:
        self.host, self.port, self.victim_path = host, port, victim_path
        self.prefix = prefix.rstrip("/")
        self.statuses: collections.Counter[str] = collections.Counter()
        self.open = 0
        self.started = 0
        self.skipped = 0

    async def one(self, kind: str) -> None:
        self.open += 1
        try:
            async with asyncio.timeout(CLIENT_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, local_addr=(FLOOD_SOURCE, 0)
                )
                try:
                    await self._send(kind, reader, writer)
                finally:
                    writer.close()
        except TimeoutError:
            self.statuses[f"{kind}:timeout"] += 1
        except OSError as exc:
            self.statuses[f"{kind}:{type(exc).__name__}"] += 1
        finally:
            self.open -= 1

    async def _send(
        self, kind: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host = f"{self.host}:{self.port}"
        if kind == "get":
            token = "".join(random.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123456789", k=22))
            request = f"GET {self.prefix}/p/{token} HTTP/1.1\r\nHost: {host}\r\n\r\n"
            writer.write(request.encode())
        elif kind == "wrong-code":
            # A script is not a browser: it sends a cookie and a form field of its own that
            # agree (double-submit stops only cross-site forms), so its wrong codes reach
            # the approver, which counts them.
            csrf = "".join(random.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh0123456789", k=43))
            code = f"{random.randrange(1_000_000):06d}"
            body = f"code={code}&confirm=AAAA&csrf={csrf}&reason=".encode()
            writer.write(
                (
                    f"POST {self.victim_path} HTTP/1.1\r\nHost: {host}\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\n"
                    f"Cookie: opsbot_csrf={csrf}\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                + body
            )
        elif kind == "garbage":
            writer.write(random.randbytes(200) + b"\r\n\r\n")
        else:  # slow: a request line, then one header byte a second
            writer.write(f"GET {self.prefix}/p/".encode())
            for _ in range(int(CLIENT_TIMEOUT) + 2):
                await writer.drain()
                await asyncio.sleep(1)
                writer.write(b"a")
        await writer.drain()
        line = await reader.readline()
        parts = line.split()
        self.statuses[f"{kind}:{parts[1].decode() if len(parts) > 1 else 'closed'}"] += 1


async def legit(url: str, code: str, confirm: str) -> dict[str, Any]:
    """The approver's phone: GET the link, submit the form with the code and the
    confirmation beside the link."""
    from tap import parse  # type: ignore[import-not-found]  # testbed/inside/tap.py, beside it

    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    started = time.monotonic()
    async with httpx.AsyncClient(transport=transport, timeout=10) as client:
        got = await client.get(url)
        page = parse(got.text)
        form = dict(page.fields)
        form["code"] = code
        form["confirm"] = confirm
        posted = await client.post(urljoin(str(got.url), page.action or ""), data=form)
    return {
        "get_status": got.status_code,
        "post_status": posted.status_code,
        "seconds": time.monotonic() - started,
        "text": " ".join(parse(posted.text).text)[:500],
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    page = urlparse(args.page)
    victim = urlparse(args.victim).path
    flood = Flood(page.hostname or "127.0.0.1", page.port or 80, page.path, victim)
    kinds = ["get"] * 7 + ["wrong-code", "garbage", "slow"]
    rss: list[int] = []
    tasks: set[asyncio.Task[None]] = set()
    legit_task: asyncio.Task[dict[str, Any]] | None = None
    start = time.monotonic()
    interval = 1.0 / args.rate
    n = 0
    next_sample = start
    while (now := time.monotonic()) - start < args.seconds:
        if legit_task is None and now - start >= args.legit_at:
            legit_task = asyncio.create_task(legit(args.legit, args.code, args.confirm))
        if now >= next_sample:
            rss.append(_rss_kib(args.pid))
            next_sample += 0.25
        due = int((now - start) / interval)
        while n < due:
            n += 1
            if flood.open >= MAX_OPEN:
                flood.skipped += 1
                continue
            flood.started += 1
            task = asyncio.create_task(flood.one(kinds[n % len(kinds)]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.sleep(interval)
    elapsed = time.monotonic() - start
    if tasks:
        await asyncio.wait(tasks, timeout=CLIENT_TIMEOUT + 3)
    legit_said = await legit_task if legit_task is not None else {}
    rss.append(_rss_kib(args.pid))
    return {
        "seconds": elapsed,
        "started": flood.started,
        "skipped_at_cap": flood.skipped,
        "rate": flood.started / elapsed,
        "statuses": dict(flood.statuses),
        "legit": legit_said,
        "rss_max_kib": max(rss),
        "rss_first_kib": rss[0],
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--page", required=True)
    p.add_argument("--legit", required=True)
    p.add_argument("--code", required=True)
    p.add_argument("--confirm", required=True)
    p.add_argument("--victim", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--rate", type=float, default=500)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--legit-at", type=float, default=5)
    args = p.parse_args()
    json.dump(asyncio.run(main_async(args)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
