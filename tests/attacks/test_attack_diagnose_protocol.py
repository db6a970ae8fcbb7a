"""Attacks on the diagnose socket's protocol, against the real ``DiagnoseServer`` on a
real Unix socket (in a thread) with the real runtime behind it: the executor socket's
framing attacks and requests that are JSON but not a diagnosis of a unit.

For every message: no connection thread crashes, nothing hangs, every line back is a
well-formed stream item (shared_schema.diagnose_socket.STREAM_ITEM), a bad request gets
exactly one ``diagnose.error`` and starts no diagnosis, and the service serves a valid
request right after. A request larger than 64 KiB, and one that never ends, are refused
within the request deadline while another operator's diagnosis goes through.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings

from diagnose_svc import server as diagnose_server
from shared_schema import MAX_MESSAGE_BYTES, decode_json_object
from shared_schema.diagnose_socket import STREAM_ITEM, ErrorMessage, VerdictMessage
from testbed.inproc import InProcessDiagnose, exchange, report, running_diagnose_server
from testbed.wire_attacks import DIAGNOSE_MALFORMED, VALID_DIAGNOSE, diagnose_messages, line

FUZZ = settings(
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def diagnose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessDiagnose]:
    """The diagnosis service in a thread, with a 1 s request deadline (10 s in the unit)."""
    monkeypatch.setattr(diagnose_server, "REQUEST_TIMEOUT", 1.0)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with running_diagnose_server(str(tmp_path / "diagnose.sock")) as running:
        yield running


def items(ds: InProcessDiagnose, data: bytes) -> list[object]:
    return [
        STREAM_ITEM.validate_python(decode_json_object(raw))
        for raw in exchange(ds.address, data, timeout=10)
    ]


def served(ds: InProcessDiagnose) -> None:
    """A valid request right after gets its verdict."""
    answer = items(ds, line(VALID_DIAGNOSE))
    assert isinstance(answer[-1], VerdictMessage), answer
    assert answer[-1].verdict.unit == "demo-web.service"


def test_every_crafted_request_gets_one_error_and_starts_nothing(
    diagnose: InProcessDiagnose,
) -> None:
    """Truncated, oversized, wrongly typed, deeply nested, invalid UTF-8, NUL bytes,
    duplicate keys, other versions and ops, symptoms too long, names that are not unit
    names: each gets exactly one diagnose.error line, and no diagnosis runs."""
    for data in DIAGNOSE_MALFORMED:
        answer = items(diagnose, data)
        assert len(answer) == 1 and isinstance(answer[0], ErrorMessage), (data[:100], answer)
        assert diagnose.diagnoses == [], data[:100]
    assert diagnose.thread_errors == []
    served(diagnose)
    report("diagnose-crafted", cases=len(DIAGNOSE_MALFORMED))


def test_generated_requests_get_well_formed_answers(diagnose: InProcessDiagnose) -> None:
    """Hypothesis: requests whose v, op, unit and symptom take any JSON value (or are
    missing), byte mutations of valid messages, random bytes. Every line back is a
    stream item; a request that is not valid gets exactly one error and runs nothing; a
    valid one runs one diagnosis and ends with its verdict."""
    counts = {"error": 0, "verdict": 0}

    @settings(FUZZ, max_examples=600)
    @given(diagnose_messages)
    def attack(data: bytes) -> None:
        before = len(diagnose.diagnoses)
        answer = items(diagnose, data)
        assert answer, f"no answer to {data[:100]!r}"
        if isinstance(answer[-1], ErrorMessage):
            assert len(answer) == 1 and len(diagnose.diagnoses) == before, data[:100]
            counts["error"] += 1
        else:
            assert isinstance(answer[-1], VerdictMessage), answer
            assert len(diagnose.diagnoses) == before + 1
            counts["verdict"] += 1
        assert diagnose.thread_errors == []

    attack()
    served(diagnose)
    report("diagnose-hypothesis", examples=600, answers=counts)


def test_a_request_over_64_kib_is_refused_without_reading_on(
    diagnose: InProcessDiagnose,
) -> None:
    """64 KiB and one byte without a newline, the connection kept open: one error naming
    the limit, at once (not when the request deadline passes), and the service goes on."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(diagnose.address)
        started = time.monotonic()
        conn.sendall(b"x" * (MAX_MESSAGE_BYTES + 1))
        reply = conn.recv(65536)
        elapsed = time.monotonic() - started
    error = json.loads(reply.splitlines()[0])
    assert error["event"] == "diagnose.error"
    assert error["message"] == f"request larger than {MAX_MESSAGE_BYTES} bytes"
    assert elapsed < 0.9, f"answered after {elapsed:.2f} s: the request was read on"
    served(diagnose)


def test_slow_and_silent_clients_are_cut_off_and_block_no_one(
    diagnose: InProcessDiagnose,
) -> None:
    """Two clients that send a byte every 0.2 s without ever ending their request, and one
    that sends nothing: each gets "no complete request within 1s" (its deadline does not
    move with each byte); meanwhile another operator's diagnosis is answered at once."""
    answers: list[bytes] = []

    def slow(trickle: bool) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(diagnose.address)
            reply = b""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and b"\n" not in reply:
                conn.settimeout(0.2)
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    chunk = None
                except OSError:
                    break
                if chunk == b"":
                    break
                reply += chunk or b""
                if trickle and b"\n" not in reply:
                    try:
                        conn.sendall(b"{")
                    except OSError:
                        pass
            answers.append(reply)

    threads = [threading.Thread(target=slow, args=(t,)) for t in (True, True, False)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    started = time.monotonic()
    served(diagnose)
    assert time.monotonic() - started < 0.9, "a slow client held up a real diagnosis"
    for t in threads:
        t.join(timeout=10)
    assert len(answers) == 3
    for reply in answers:
        error = json.loads(reply.splitlines()[0])
        assert error["event"] == "diagnose.error"
        assert error["message"] == "no complete request within 1s"
