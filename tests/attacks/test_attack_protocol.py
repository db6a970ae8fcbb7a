"""Attacks on the executor socket's protocol, against the real daemon code: the real
``Server`` on a real Unix socket (in a thread), the real ``ExecutorService`` and
``PlanStore`` on a tmp state directory. The peer is root here, so every op is open to
it: the protocol, not the role check, is what stands.

For every message: no connection thread crashes, nothing hangs (each answer within 10s),
every answer is a well-formed reply line (``shared_schema.parse_reply``), nothing that
is not a valid, allowed plan is stored, and the daemon serves a valid submit right after.

Slow and silent clients are tried twice: in-process (short timeouts, many clients), and
in the booted systemd against the socket-activated opsbot-executor with its real ones.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings

from executor_svc import daemon
from shared_schema import MAX_MESSAGE_BYTES, ListPlans, encode_message, parse_reply
from testbed.container import BootedSystemd
from testbed.host import PYTHON, REPO, opsbot as cli, restart_plan, submit
from testbed.inproc import (
    InProcessExecutor,
    exchange,
    one_reply,
    plan,
    report,
    running_executor,
    submit_bytes,
)
from testbed.wire_attacks import (
    EMPTY,
    MALFORMED,
    VALID_FRAMINGS,
    VALID_PLAN,
    envelopes,
    line,
    messages,
    mutated_plans,
)

FUZZ = settings(
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[InProcessExecutor]:
    """The daemon in a thread; its info events are dropped (thousands per test)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with running_executor(tmp_path / "state", str(tmp_path / "executor.sock")) as running:
        yield running


def frames(data: bytes) -> list[bytes]:
    """The messages the daemon sees in ``data``: non-blank lines, the last one also
    without its newline."""
    return [f for f in data.split(b"\n") if f.strip()]


def check_exchange(ex: InProcessExecutor, data: bytes) -> list[str]:
    """Send ``data`` as an attacker would and check every invariant; the verdicts."""
    lines = exchange(ex.address, data)
    sent = frames(data)
    if sent:
        assert lines, f"no answer to {data[:120]!r}"
    assert len(lines) <= len(sent), f"more answers than messages for {data[:120]!r}"
    verdicts = []
    for raw in lines:
        verdict = parse_reply(raw).verdict
        if verdict != "PLANS":  # only a listing grows with the store; the rest answer 64 KiB
            assert len(raw) <= MAX_MESSAGE_BYTES, f"a {len(raw)}-byte answer to {data[:80]!r}"
        verdicts.append(verdict)
    assert ex.thread_errors == [], f"{data[:120]!r} crashed a connection: {ex.thread_errors!r}"
    ex.assert_store_valid()
    after = one_reply(ex.address, submit_bytes(VALID_PLAN))
    assert after.verdict == "ACCEPT", f"not served after {data[:120]!r}: {after}"
    return verdicts


def test_every_crafted_attack_gets_reject_or_revise(executor: InProcessExecutor) -> None:
    """Truncated, oversized, wrongly typed, deeply nested, invalid UTF-8, NUL bytes, huge
    numbers, duplicate keys, unknown ops, valid envelopes around invalid or forbidden
    plans (denylisted and unlisted units, unknown tools, control characters, path
    traversal, 9 steps, 6000 unknown keys): each gets exactly REJECT or REVISE, in one
    bounded line, and none of it is stored."""
    seen: dict[str, int] = {}
    for data in MALFORMED:
        verdicts = check_exchange(executor, data)
        assert verdicts and set(verdicts) <= {"REJECT", "REVISE"}, (data[:120], verdicts)
        for verdict in verdicts:
            seen[verdict] = seen.get(verdict, 0) + 1
    assert executor.assert_store_valid() == 1  # only the valid plan sent after each attack
    report("crafted", cases=len(MALFORMED), verdicts=seen)


def test_a_plan_with_thousands_of_errors_gets_one_bounded_revise(
    executor: InProcessExecutor,
) -> None:
    """6000 unknown keys in a 50 KB plan, or one 60000-character tool name: the answer is
    one REVISE line of at most 64 KiB that parse_reply reads (the first 20 errors, each
    cut to 200 characters, and one saying how many more), not the 350 KB it used to be."""
    many = line(
        {"v": 1, "op": "submit", "plan": {**VALID_PLAN, **{f"{i:x}": 1 for i in range(6000)}}}
    )
    [raw] = exchange(executor.address, many)
    reply = parse_reply(raw)
    assert reply.verdict == "REVISE" and len(raw) <= MAX_MESSAGE_BYTES
    assert len(reply.errors) == 21
    assert reply.errors[0].message == "Extra inputs are not permitted"
    assert reply.errors[-1].message == "... and 5980 more errors"
    long_tool = line(
        {
            "v": 1,
            "op": "submit",
            "plan": {
                "goal": "x",
                "steps": [{"tool": "t" * 60000, "args": {"unit": "demo-web.service"}}],
            },
        }
    )
    [raw] = exchange(executor.address, long_tool)
    reply = parse_reply(raw)
    assert reply.verdict == "REVISE" and len(raw) < 1024
    assert all(len(e.message) <= 200 for e in reply.errors)


def test_valid_requests_in_odd_framing_are_served(executor: InProcessExecutor) -> None:
    """CRLF endings, no final newline, several requests in one write, blank lines: each
    request is answered, in order; a write with nothing in it gets no answer and no
    crash."""
    for data in VALID_FRAMINGS:
        verdicts = check_exchange(executor, data)
        assert len(verdicts) == len(frames(data)), (data[:80], verdicts)
        assert set(verdicts) <= {"ACCEPT", "PLANS"}, verdicts
    for data in EMPTY:
        assert check_exchange(executor, data) == []


def test_any_message_is_answered_well_or_not_at_all(executor: InProcessExecutor) -> None:
    """Hypothesis, derandomized: JSON envelopes with any values, mutated plans, byte-level
    mutations of valid messages (cut, spliced, poisoned with NUL, invalid UTF-8, escapes
    of lone surrogates, 1e999, NaN), random bytes. Every answer parses as a reply; only a
    plan the policy allows is ever stored; the daemon keeps serving."""
    counts: dict[str, int] = {}

    @settings(FUZZ, max_examples=2000)
    @given(messages)
    def attack(data: bytes) -> None:
        for verdict in check_exchange(executor, data):
            counts[verdict] = counts.get(verdict, 0) + 1

    attack()
    report(
        "hypothesis-messages",
        examples=2000,
        verdicts=counts,
        plans_stored=executor.assert_store_valid(),
    )


def test_a_valid_envelope_around_a_mutated_plan_is_revised_or_allowed(
    executor: InProcessExecutor,
) -> None:
    """Hypothesis: a valid submit whose plan has one to three parts replaced, removed or
    added (hostile units and tools among the values). The answer is REVISE with at
    least one field error, REJECT, or ACCEPT of a plan the policy allows: never a stored
    plan that touches anything else."""
    counts: dict[str, int] = {}

    @settings(FUZZ, max_examples=800)
    @given(mutated_plans())
    def attack(body: dict[str, object]) -> None:
        verdicts = check_exchange(executor, line({"v": 1, "op": "submit", "plan": body}))
        assert len(verdicts) == 1
        counts[verdicts[0]] = counts.get(verdicts[0], 0) + 1

    attack()
    report(
        "hypothesis-plans",
        examples=800,
        verdicts=counts,
        plans_stored=executor.assert_store_valid(),
    )


def test_envelopes_with_any_fields_never_reach_the_store_unvalidated(
    executor: InProcessExecutor,
) -> None:
    """Hypothesis: envelopes whose v, op, plan, plan_id, run_id and symptom take any JSON
    value (or are missing). Replies are well-formed; the store holds only allowed plans."""

    @settings(FUZZ, max_examples=600)
    @given(envelopes)
    def attack(envelope: dict[str, object]) -> None:
        check_exchange(executor, line(envelope))

    attack()


# -- slow and silent clients ---------------------------------------------------------------


def _timed_submit(address: str, goal: str) -> float:
    started = time.monotonic()
    reply = one_reply(address, submit_bytes(plan(goal)), timeout=5)
    assert reply.verdict == "ACCEPT", reply
    return time.monotonic() - started


def test_slow_and_silent_clients_hold_only_their_own_connection(
    executor: InProcessExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (the real Server; MESSAGE_TIMEOUT 3s, SEND_TIMEOUT 1s): 20 clients that
    send a byte a second, 20 that pipeline requests and never read a reply, 20 that
    connect and say nothing. For the 4 seconds they try, another client's submits are
    each answered within a second. The drip-feeders get REJECT "no complete message
    within 3s", the hoarders are cut off, the silent ones are closed, and afterwards no
    connection is held."""
    monkeypatch.setattr(daemon, "MESSAGE_TIMEOUT", 3.0)
    monkeypatch.setattr(daemon, "SEND_TIMEOUT", 1.0)
    address = executor.address
    outcome: dict[str, list[object]] = {"drip": [], "hoard": [], "mute": []}
    lock = threading.Lock()

    def record(kind: str, value: object) -> None:
        with lock:
            outcome[kind].append(value)

    def drip() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(address)
            sock.settimeout(8)
            with contextlib.suppress(OSError):  # the daemon hangs up on us mid-drip
                for byte in submit_bytes(plan("slow"))[:5]:
                    sock.sendall(bytes([byte]))
                    time.sleep(1.0)
            try:
                reply = sock.recv(65536)
            except OSError:
                reply = b""
            record("drip", reply)

    def hoard() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(address)
            sock.settimeout(10)
            request = encode_message(ListPlans()) * 500
            started = time.monotonic()
            try:
                while time.monotonic() - started < 8:
                    sock.sendall(request)  # and never a recv
            except OSError:
                record("hoard", time.monotonic() - started)  # cut off, as it should be

    def mute() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(address)
            sock.settimeout(8)
            started = time.monotonic()
            with contextlib.suppress(OSError):
                sock.recv(1)
            record("mute", time.monotonic() - started)

    threads = [threading.Thread(target=f) for f in [drip] * 20 + [hoard] * 20 + [mute] * 20]
    for t in threads:
        t.start()
    latencies = []
    for i in range(20):
        latencies.append(_timed_submit(address, f"while attacked {i}"))
        time.sleep(0.2)
    for t in threads:
        t.join(timeout=15)
    assert max(latencies) < 1.0, latencies
    assert len(outcome["drip"]) == 20
    for raw in outcome["drip"]:
        assert isinstance(raw, bytes) and raw, "a drip-feeder got no answer"
        reply = parse_reply(raw.split(b"\n")[0])
        assert reply.verdict == "REJECT" and "no complete message within 3s" in reply.reason
    assert len(outcome["hoard"]) == 20, "a client that never reads was not cut off"
    assert len(outcome["mute"]) == 20 and max(outcome["mute"]) < 5  # type: ignore[type-var]
    deadline = time.monotonic() + 8
    while executor.server.active and time.monotonic() < deadline:
        time.sleep(0.1)
    assert executor.server.active == 0, f"{executor.server.active} connections still held"
    report(
        "slow-clients-inprocess",
        submits=len(latencies),
        max_latency_s=round(max(latencies), 3),
        hoarders_cut_off_after_s=round(max(outcome["hoard"]), 2),  # type: ignore[type-var]
    )


def test_a_full_house_is_told_busy_not_left_hanging(
    executor: InProcessExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: 128 silent connections take every slot. The 129th client gets REJECT
    "executor busy; try again" at once (it is not left hanging), and when the silent
    ones time out the executor serves again."""
    monkeypatch.setattr(daemon, "MESSAGE_TIMEOUT", 2.0)
    socks = []
    try:
        for _ in range(daemon.MAX_CLIENTS):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(executor.address)
            socks.append(sock)
        deadline = time.monotonic() + 5
        while executor.server.active < daemon.MAX_CLIENTS and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        busy = one_reply(executor.address, submit_bytes(plan("one too many")), timeout=3)
        assert time.monotonic() - started < 1.5
        assert busy.verdict == "REJECT" and busy.reason == "executor busy; try again"
    finally:
        for sock in socks:
            sock.close()
    deadline = time.monotonic() + 5
    while executor.server.active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _timed_submit(executor.address, "after the full house") < 1.0


def test_slow_clients_do_not_block_the_socket_activated_daemon(opsbot: BootedSystemd) -> None:
    """In the booted systemd, against the socket-activated opsbot-executor (its real
    timeouts: 10s per message, 5s per send): 10 diagnose-user clients drip a submit at a
    byte a second and 10 pipeline requests without ever reading. Meanwhile five submits
    by the diagnose service's user are each answered within 2 seconds (a fresh process
    each time); the drippers get REJECT "no complete message within 10s" and the
    hoarders are cut off."""
    ct = opsbot
    argv = [
        "nsenter",
        "-t",
        str(ct.pid),
        "-a",
        "runuser",
        "-u",
        "opsbot-diagnose",
        "--",
        PYTHON,
        f"{REPO}/tests/attacks/slow_clients.py",
        "/run/opsbot/executor.sock",
        "10",
        "10",
        "13",
    ]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    ) as attackers:
        time.sleep(1.5)
        latencies, ids = [], []
        for number in range(5):
            started = time.monotonic()
            reply = submit(ct, restart_plan("demo-db.service", goal=f"attack: under drip {number}"))
            latencies.append(time.monotonic() - started)
            assert reply["verdict"] == "ACCEPT", reply
            ids.append(reply["plan_id"])
        out, err = attackers.communicate(timeout=60)
    assert attackers.returncode == 0, err
    result = json.loads(out)
    assert max(latencies) < 2.0, latencies
    assert len(result["drip"]) == 10
    for first in result["drip"]:
        assert first is not None, "a dripper got no answer"
        reply = parse_reply(first.encode())
        assert reply.verdict == "REJECT" and reply.reason == "no complete message within 10s"
    assert len(result["hoard"]) == 10 and all(cut is not None for cut in result["hoard"])
    for plan_id in ids:
        cli(ct, "reject", plan_id, "--reason", "attack test cleanup", check=False)
    report(
        "slow-clients-container",
        max_submit_latency_s=round(max(latencies), 2),
        hoarders_cut_off_after_s=max(result["hoard"]),
    )
