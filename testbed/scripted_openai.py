"""A real OpenAI-compatible HTTP server that answers from a script, for tests and benchmarks.

It listens on 127.0.0.1 (port 0: the kernel picks one) in a background thread and serves

* ``POST /v1/chat/completions``: each request consumes the next scripted turn and gets it
  back in the wire format of the OpenAI API (``chat.completion`` with one choice and
  ``usage``); once the script is spent it answers HTTP 400 ``script exhausted``;
* ``GET /v1/models``: the one model it pretends to be.

Every request is recorded (method, path, lower-cased headers, decoded JSON body) so tests
can assert on what a client sent. Connections close after each response (HTTP/1.0), so
closing the server never waits for an idle keep-alive connection.

Turns (as Python objects, or as JSON objects in a script file)::

    ToolCall("journal", {"unit": "a.service"})   {"tool": "journal", "arguments": {...}}
    ToolCall("x", "not json")  # raw arguments   {"tool": "x", "arguments": "not json"}
    Text("all fine")                             {"text": "all fine"}
    Reasoning("thinking...")                     {"reasoning": "thinking...",
                                                  "field": "reasoning_content"}
    HttpError(429, retry_after="1")              {"status": 429, "retry_after": "1"}
    Raw("<html>", content_type="text/html")      {"raw": "<html>", "content_type": ...}
    ToolCalls([ToolCall(...), ...], ids=False,   {"calls": [{"tool": ...}, ...], "ids": false,
              objects=True, finish="stop")        "objects": true, "finish": "stop"}
    Message({"role": "assistant", ...})          {"message": {...}, "finish": "stop"}
    ErrorObject("context too long")              {"error_object": "context too long"}
    Cut()                                        {"cut": true}

The last four play what real servers send (each quirk is named in docs/diagnosis.md,
"Hosted models"): several calls in one message, with or without ``id``, arguments as objects,
``finish_reason`` "stop"; a message exactly as given (calls written into ``content``,
reasoning fields); 200 with an ``error`` object; and a reply cut off mid-body.

Each may carry ``delay`` (seconds to wait before answering; closing the server cuts
it short) and ``ToolCall``/``Text`` a ``content`` / ``reasoning`` of their own.

Token counts are a deterministic stand-in for a tokenizer, so benchmarks can compare
loops: ``prompt_tokens`` = ceil(len(compact JSON of ``messages`` and ``tools``) / 4);
``completion_tokens`` = ceil(len(compact JSON of the reply message) / 4). Compact JSON is
``json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)``.

As a script, for container tests::

    python -m testbed.scripted_openai --script turns.json --port 8080 \\
        [--host 127.0.0.1] [--model NAME] [--record requests.jsonl]

prints ``listening <base_url>`` once ready and serves until SIGTERM or SIGINT. The script
file is a JSON list of turns, or ``{"model": ..., "turns": [...]}``.
"""

import argparse
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TextIO

DEFAULT_MODEL = "scripted-model"


@dataclass(frozen=True, kw_only=True)
class _Turn:
    delay: float = 0.0


@dataclass(frozen=True)
class ToolCall(_Turn):
    """Reply with one tool call; ``arguments`` is JSON-encoded unless it is already a str."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    content: str | None = None


@dataclass(frozen=True)
class Text(_Turn):
    """Reply with assistant text and no tool call (``finish_reason`` ``stop``)."""

    content: str
    reasoning: str | None = None


@dataclass(frozen=True)
class Reasoning(_Turn):
    """Reply with empty content and the text in ``field`` (as reasoning models do)."""

    text: str
    field: str = "reasoning_content"
    content: str | None = ""


@dataclass(frozen=True)
class HttpError(_Turn):
    """Answer with an HTTP error status and an OpenAI-style error body."""

    status: int
    retry_after: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class Raw(_Turn):
    """Answer 200 with this body as it is (to play a server that does not speak JSON)."""

    body: str
    content_type: str = "text/plain"
    status: int = 200


@dataclass(frozen=True)
class ToolCalls(_Turn):
    """Reply with several tool calls in one message, as real servers do: ``ids`` False
    leaves out each call's ``id`` (Ollama), ``objects`` sends arguments as JSON objects
    (llama.cpp server, Ollama), ``finish`` is the finish_reason (vLLM may say "stop")."""

    calls: Sequence[ToolCall]
    ids: bool = True
    objects: bool = False
    finish: str = "tool_calls"
    content: str | None = None


@dataclass(frozen=True)
class Message(_Turn):
    """Reply with this assistant message exactly (calls in content, reasoning fields)."""

    message: Mapping[str, Any]
    finish: str = "stop"


@dataclass(frozen=True)
class ErrorObject(_Turn):
    """Answer HTTP 200 with an error instead of choices: ``{"error": {...}}``, or with
    ``top_level`` ``{"object": "error", "message": ...}`` (vLLM behind some gateways)."""

    message: str
    top_level: bool = False


@dataclass(frozen=True)
class Cut(_Turn):
    """Answer 200 with a Content-Length for the whole completion, send half, and close."""

    fraction: float = 0.5


Turn = ToolCall | Text | Reasoning | HttpError | Raw | ToolCalls | Message | ErrorObject | Cut


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def approx_tokens(value: Any) -> int:
    """ceil(len(compact JSON of ``value``) / 4): the server's stand-in for a tokenizer."""
    return math.ceil(len(_compact(value)) / 4)


def turn_from_json(data: Mapping[str, Any]) -> Turn:
    """One turn of a script file (see the module docstring)."""
    delay = float(data.get("delay", 0.0))
    if "tool" in data:
        return ToolCall(data["tool"], data.get("arguments", {}), data.get("content"), delay=delay)
    if "text" in data:
        return Text(data["text"], data.get("reasoning"), delay=delay)
    if "reasoning" in data:
        return Reasoning(data["reasoning"], data.get("field", "reasoning_content"), delay=delay)
    if "status" in data:
        return HttpError(data["status"], data.get("retry_after"), data.get("body"), delay=delay)
    if "raw" in data:
        return Raw(
            data["raw"],
            data.get("content_type", "text/plain"),
            data.get("status", 200),
            delay=delay,
        )
    if "calls" in data:
        calls = [ToolCall(c["tool"], c.get("arguments", {})) for c in data["calls"]]
        return ToolCalls(
            calls,
            bool(data.get("ids", True)),
            bool(data.get("objects", False)),
            str(data.get("finish", "tool_calls")),
            data.get("content"),
            delay=delay,
        )
    if "message" in data:
        return Message(data["message"], str(data.get("finish", "stop")), delay=delay)
    if "error_object" in data:
        return ErrorObject(data["error_object"], bool(data.get("top_level")), delay=delay)
    if data.get("cut"):
        return Cut(float(data.get("fraction", 0.5)), delay=delay)
    raise ValueError(f"not a scripted turn (needs tool, text, reasoning, status or raw): {data}")


def load_script(path: Path) -> tuple[str, list[Turn]]:
    """Model name and turns from a script file: a list of turns or {"model", "turns"}."""
    data = json.loads(path.read_text(encoding="utf-8"))
    model = DEFAULT_MODEL
    if isinstance(data, dict):
        model = str(data.get("model", DEFAULT_MODEL))
        data = data["turns"]
    return model, [turn_from_json(item) for item in data]


class ScriptedOpenAI:
    """The server. Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        model: str = DEFAULT_MODEL,
        host: str = "127.0.0.1",
        port: int = 0,
        record: TextIO | None = None,
    ) -> None:
        self.model = model
        self.received: list[Received] = []
        self.served = 0  # chat completions answered from the script
        self._turns = list(turns)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._record = record
        self._host = host
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    @property
    def chat_requests(self) -> list[Received]:
        """Recorded ``POST /v1/chat/completions`` requests, oldest first."""
        with self._lock:
            return [r for r in self.received if r.path == "/v1/chat/completions"]

    def add(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(turns)

    def start(self) -> "ScriptedOpenAI":
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="scripted-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut delays short, wait for handler threads, close the socket."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()  # joins the handler threads

    def __enter__(self) -> "ScriptedOpenAI":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- called from handler threads ------------------------------------------------------

    def _remember(self, request: Received) -> None:
        with self._lock:
            self.received.append(request)
            if self._record is not None:
                self._record.write(_compact(asdict(request)))
                self._record.write("\n")
                self._record.flush()

    def _next_turn(self) -> tuple[int, Turn | None]:
        with self._lock:
            index = self.served
            if index >= len(self._turns):
                return index, None
            self.served += 1
            return index, self._turns[index]

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server closes first; True when it did not."""
        return seconds <= 0 or not self._stopping.wait(seconds)

    def completion(
        self, index: int, turn: ToolCall | Text | Reasoning | ToolCalls | Message, body: Any
    ) -> Any:
        """The chat.completion object answering ``body`` with ``turn``."""
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if isinstance(turn, ToolCalls):
            message["content"] = turn.content
            message["tool_calls"] = []
            for number, call in enumerate(turn.calls):
                arguments: Any = call.arguments
                if not turn.objects and not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                entry: dict[str, Any] = {
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
                if turn.ids:
                    entry["id"] = f"call_{index:04d}_{number}"
                message["tool_calls"].append(entry)
            finish = turn.finish
        elif isinstance(turn, Message):
            message = dict(turn.message)
            finish = turn.finish
        elif isinstance(turn, ToolCall):
            arguments = turn.arguments
            message["content"] = turn.content
            message["tool_calls"] = [
                {
                    "id": f"call_{index:04d}",
                    "type": "function",
                    "function": {
                        "name": turn.name,
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            ]
            finish = "tool_calls"
        elif isinstance(turn, Text):
            message["content"] = turn.content
            if turn.reasoning is not None:
                message["reasoning_content"] = turn.reasoning
        else:
            message["content"] = turn.content
            message[turn.field] = turn.text
        request = body if isinstance(body, dict) else {}
        prompt = approx_tokens(
            {"messages": request.get("messages", []), "tools": request.get("tools", [])}
        )
        completion = max(1, approx_tokens(message))
        return {
            "id": f"chatcmpl-scripted-{index:04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _handler_for(server: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "scripted-openai/1"
        timeout = 10  # a client that never sends its body does not hold close() forever

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests assert on ``received``, not on stderr."""

        def _send(
            self,
            status: int,
            payload: Any,
            content_type: str = "application/json",
            headers: Mapping[str, str] | None = None,
        ) -> None:
            data = (payload if isinstance(payload, str) else _compact(payload)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _record(self, body: Any) -> None:
            server._remember(
                Received(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
            )

        def do_GET(self) -> None:
            self._record(None)
            if self.path == "/v1/models":
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": server.model,
                                "object": "model",
                                "created": 0,
                                "owned_by": "scripted",
                            }
                        ],
                    },
                )
            else:
                self._send(404, _error(f"no route GET {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            self._record(body)
            if self.path != "/v1/chat/completions":
                self._send(404, _error(f"no route POST {self.path}"))
                return
            if not isinstance(body, dict):
                self._send(400, _error("the body is not a JSON object"))
                return
            index, turn = server._next_turn()
            if turn is None:
                self._send(400, _error(f"scripted server: script exhausted after {index} turns"))
                return
            if not server._wait(turn.delay):
                return  # closing: drop the connection unanswered
            if isinstance(turn, HttpError):
                headers = {} if turn.retry_after is None else {"Retry-After": turn.retry_after}
                payload = (
                    turn.body
                    if turn.body is not None
                    else _error(f"scripted HTTP {turn.status}", "server_error")
                )
                self._send(turn.status, payload, headers=headers)
            elif isinstance(turn, Raw):
                self._send(turn.status, turn.body, content_type=turn.content_type)
            elif isinstance(turn, ErrorObject):
                error = _error(turn.message, "server_error")
                if turn.top_level:
                    error = {"object": "error", "message": turn.message, "code": 400}
                self._send(200, error)
            elif isinstance(turn, Cut):
                self._cut(server.completion(index, Text("cut off"), body), turn.fraction)
            else:
                self._send(200, server.completion(index, turn, body))

        def _cut(self, payload: Any, fraction: float) -> None:
            data = _compact(payload).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: int(len(data) * fraction)])
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--script", type=Path, required=True, help="JSON file of turns")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default=None, help="overrides the script's model")
    parser.add_argument("--record", type=Path, default=None, help="append requests as JSON lines")
    args = parser.parse_args(argv)
    model, turns = load_script(args.script)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    record = args.record.open("a", encoding="utf-8") if args.record else None
    try:
        with ScriptedOpenAI(
            turns, model=args.model or model, host=args.host, port=args.port, record=record
        ) as server:
            print(f"listening {server.base_url}", flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        if record is not None:
            record.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
