"""The receivers an operator's side would run, started by a test inside the container: a
webhook endpoint that checks opsbot's signature as docs/operating.md tells receivers to, and a
real SMTP server (aiosmtpd). Each message received is a file in OUTDIR:

    python receivers.py OUTDIR KEYFILE WEBHOOK_PORT SMTP_PORT

- ``hook-N.json``: a webhook POST whose HMAC-SHA256 over ``timestamp + "." + body``
  (headers X-Opsbot-Timestamp, X-Opsbot-Signature: ``sha256=<hex>``) matched the key in
  KEYFILE and whose timestamp was within 5 minutes: answered 204. Anything else is
  ``refused-N.txt`` with the reason, answered 401.
- ``chat-N.json``: a POST to ``/chat/NAME`` (a chat service's stand-in, as an Apprise
  ``json://`` URL reaches it: no signature), as ``{"path": ..., "body": <its JSON>}``.
- ``mail-N.eml``: each mail the SMTP server accepted, as received.

Checked here with hmac.compare_digest, not with opsbot's own helper: the test asks
whether what opsbot sends is what a receiver written from docs/operating.md accepts. The
process ends by itself after ``LIFETIME`` seconds (the test's transient unit also bounds
it).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

MAX_SKEW = 300
LIFETIME = 900
_count = itertools.count(1)


def _write(outdir: Path, name: str, data: bytes) -> None:
    tmp = outdir / f".{name}.tmp"
    tmp.write_bytes(data)
    tmp.rename(outdir / name)


def webhook_handler(outdir: Path, key: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1 << 20))
            if self.path.startswith("/chat/"):
                chat = {"path": self.path, "body": json.loads(body or b"null")}
                _write(outdir, f"chat-{next(_count)}.json", json.dumps(chat).encode())
                self.send_response(200)
                self.end_headers()
                return
            stamp = self.headers.get("X-Opsbot-Timestamp", "")
            signature = self.headers.get("X-Opsbot-Signature", "")
            mac = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256)
            expected = "sha256=" + mac.hexdigest()
            reason = ""
            if not hmac.compare_digest(signature, expected):
                reason = "bad signature"
            elif not stamp.isdigit() or abs(time.time() - int(stamp)) > MAX_SKEW:
                reason = f"timestamp {stamp!r} more than {MAX_SKEW} s off"
            n = next(_count)
            if reason:
                _write(outdir, f"refused-{n}.txt", reason.encode())
                self.send_response(401)
            else:
                _write(outdir, f"hook-{n}.json", body)
                self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class MailSink:
    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        _write(self.outdir, f"mail-{next(_count)}.eml", envelope.original_content or b"")
        return "250 OK"


def main() -> int:
    outdir, keyfile, web_port, smtp_port = sys.argv[1:5]
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    key = Path(keyfile).read_bytes().strip()
    server = ThreadingHTTPServer(("127.0.0.1", int(web_port)), webhook_handler(out, key))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mail = Controller(MailSink(out), hostname="127.0.0.1", port=int(smtp_port))
    mail.start()
    (out / "ready").write_text("ready\n")
    time.sleep(LIFETIME)
    mail.stop()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
