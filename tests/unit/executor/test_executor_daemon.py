"""opsbot-executor over a real Unix socket: newline-delimited JSON, one reply per
message, bounded messages, and no client (slow, silent or greedy) holding up another."""

import socket
import threading
import time
from pathlib import Path

import pytest

from executor_svc import daemon
from executor_svc.daemon import Server
from executor_svc.peer import Roles
from shared_schema import (
    MAX_MESSAGE_BYTES,
    Accept,
    ListPlans,
    PlanList,
    Reject,
    SubmitPlan,
    encode_message,
    parse_reply,
)
from tests.unit.plans.helpers import plan_of, step

from .conftest import RunningExecutor


class Client:
    """One connection to the executor socket."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.buffer = b""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes | SubmitPlan | ListPlans) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else encode_message(data))

    def line(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the executor closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def reply(self) -> object:
        return parse_reply(self.line())

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def submit(unit: str = "nginx.service") -> SubmitPlan:
    return SubmitPlan(plan=plan_of(step("restart_unit", unit)).model_dump(mode="json"))


def test_a_valid_submit_is_accepted_and_stored(executor: RunningExecutor) -> None:
    """A submit from root over the socket gets ACCEPT with the plan's id and fingerprint,
    and the plan is in the store."""
    with Client(executor.socket) as client:
        client.send(submit())
        reply = client.reply()
    assert isinstance(reply, Accept)
    assert reply.sha256 == plan_of().fingerprint()
    assert executor.service.store.ids() == [reply.plan_id]


def test_two_messages_on_one_connection_get_two_replies_in_order(executor: RunningExecutor) -> None:
    """Two requests sent back to back on one connection are answered one line each, in
    order."""
    with Client(executor.socket) as client:
        client.send(encode_message(submit()) + encode_message(ListPlans()))
        accepted, listing = client.reply(), client.reply()
    assert isinstance(accepted, Accept)
    assert isinstance(listing, PlanList)
    assert [p.plan_id for p in listing.plans] == [accepted.plan_id]


def test_malformed_json_is_rejected_and_the_connection_still_works(
    executor: RunningExecutor,
) -> None:
    """A line that is not JSON gets REJECT with the reason; the next message on the same
    connection is served normally."""
    with Client(executor.socket) as client:
        client.send(b'{"v":1,"op":"submit","plan":\n')
        rejected = client.reply()
        client.send(submit())
        accepted = client.reply()
    assert isinstance(rejected, Reject)
    assert rejected.reason.startswith("message is not valid JSON")
    assert isinstance(accepted, Accept)


def test_a_bad_envelope_is_rejected_with_its_reason(executor: RunningExecutor) -> None:
    """Version 2, duplicate keys, or an unknown op: each gets REJECT saying which."""
    with Client(executor.socket) as client:
        client.send(b'{"v":2,"op":"list"}\n{"v":1,"op":"list","op":"list"}\n{"v":1,"op":"rm"}\n')
        reasons = [client.reply() for _ in range(3)]
    assert [r.reason[:30] for r in reasons if isinstance(r, Reject)] == [
        "unsupported protocol version 2",
        "duplicate key 'op'",
        "bad request: Input tag 'rm' fo",
    ]


def test_blank_lines_are_ignored(executor: RunningExecutor) -> None:
    """Empty lines between messages are not messages (no reply for them)."""
    with Client(executor.socket) as client:
        client.send(b"\n\n  \n" + encode_message(ListPlans()))
        assert isinstance(client.reply(), PlanList)


def test_a_last_message_without_a_newline_still_counts(executor: RunningExecutor) -> None:
    """A client that sends its message and shuts down its side without the newline still
    gets its reply."""
    with Client(executor.socket) as client:
        client.send(encode_message(ListPlans()).rstrip(b"\n"))
        client.sock.shutdown(socket.SHUT_WR)
        assert isinstance(client.reply(), PlanList)


def test_a_message_larger_than_64_kib_is_rejected_and_the_connection_closed(
    executor: RunningExecutor,
) -> None:
    """A message over 64 KiB gets REJECT "larger than" and the connection ends; nothing
    is stored."""
    with Client(executor.socket) as client:
        sender = threading.Thread(
            target=lambda: _send_ignoring_reset(client, b"x" * (MAX_MESSAGE_BYTES + 10) + b"\n")
        )
        sender.start()
        reply = client.reply()
        sender.join(timeout=5)
        assert isinstance(reply, Reject)
        assert reply.reason == f"message larger than {MAX_MESSAGE_BYTES} bytes"
        assert client.closed_by_peer()
    assert executor.service.store.ids() == []


def _send_ignoring_reset(client: Client, data: bytes) -> None:
    try:
        client.send(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the executor hung up once it had seen enough


def test_an_incomplete_message_times_out_with_a_reject(
    executor: RunningExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half a message and then silence: after MESSAGE_TIMEOUT the client gets REJECT
    "no complete message" and the connection is closed."""
    monkeypatch.setattr(daemon, "MESSAGE_TIMEOUT", 0.3)
    with Client(executor.socket) as client:
        client.send(b'{"v":1,"op":')
        reply = client.reply()
        assert reply == Reject(reason="no complete message within 0.3s")
        assert client.closed_by_peer()


def test_a_slow_client_does_not_delay_another_clients_submit(executor: RunningExecutor) -> None:
    """A client dribbling its message one byte every 0.2 s holds only its own
    connection: another client's submit is answered while the slow one is still
    sending, and the slow one is answered too when it finishes."""
    message = encode_message(ListPlans())
    dribbled = 6
    started = threading.Event()
    sent_last_byte_at: list[float] = []
    slow_reply: list[object] = []

    def slow() -> None:
        with Client(executor.socket) as client:
            for index in range(dribbled):
                client.send(message[index : index + 1])
                if index == 1:
                    started.set()
                time.sleep(0.2)
            sent_last_byte_at.append(time.monotonic())
            client.send(message[dribbled:])
            slow_reply.append(client.reply())

    thread = threading.Thread(target=slow)
    thread.start()
    assert started.wait(timeout=5)
    asked_at = time.monotonic()
    with Client(executor.socket) as fast:
        fast.send(submit())
        reply = fast.reply()
    answered_at = time.monotonic()
    thread.join(timeout=10)
    assert isinstance(reply, Accept)
    assert sent_last_byte_at and answered_at < sent_last_byte_at[0]
    assert answered_at - asked_at < 0.6
    assert len(slow_reply) == 1 and isinstance(slow_reply[0], PlanList)


def test_a_client_that_never_reads_its_replies_does_not_block_others(
    executor: RunningExecutor,
) -> None:
    """A client that floods requests and never reads a reply fills its own socket
    buffer; the thread serving it waits on it alone, and another client's submit is
    answered at once."""
    with Client(executor.socket) as greedy:
        greedy.send(b"not json\n" * 3000)
        time.sleep(0.3)
        asked_at = time.monotonic()
        with Client(executor.socket) as other:
            other.send(submit("app.service"))
            reply = other.reply()
        assert time.monotonic() - asked_at < 1.0
        assert isinstance(reply, Accept)
        assert greedy.sock.recv(1, socket.MSG_DONTWAIT)  # its replies sit unread


def test_the_daemon_exits_when_idle(tmp_path: Path, executor: RunningExecutor) -> None:
    """With --idle-timeout, serve() returns after that long without a connection (so
    socket activation starts it again on the next one)."""
    path = tmp_path / "idle.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    server = Server(
        listener,
        executor.service,
        Roles("opsbot-diagnose", "opsbot-operators"),
        idle_timeout=0.3,
        notify=False,
    )
    started = time.monotonic()
    thread = threading.Thread(target=server.serve)
    thread.start()
    thread.join(timeout=5)
    listener.close()
    assert not thread.is_alive()
    assert 0.3 <= time.monotonic() - started < 3
    assert server.served == 0
