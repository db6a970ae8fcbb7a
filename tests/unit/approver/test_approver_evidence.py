"""What diagnosis saw reaches the approver: the submitter sends two evidence lines with
the plan, the executor keeps them with who submitted it (outside the fingerprint: they
are words for the approver, not part of what runs), and the page shows them. A record
stored before there was evidence still reads."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from diagnose_svc.executor_client import ExecutorClient
from executor_svc.peer import Peer, Role
from executor_svc.service import ExecutorService
from plans import PlanStore
from shared_schema import Accept, SubmitPlan, encode_message
from shared_schema.approver_socket import Viewed
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import NOW, POLICY, plan_of

DIAGNOSE = Peer(pid=4242, uid=998, gid=998, user="opsbot-diagnose", role=Role.DIAGNOSE)
SEEN = [
    "step 1 unit_status(unit=nginx.service): failed (exit-code), restarted 5 times",
    "step 2 journal(unit=nginx.service): bind() to 0.0.0.0:80 failed (98: in use)",
]


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


def test_the_submitter_sends_at_most_two_lines_of_evidence(tmp_path: Path) -> None:
    """ExecutorClient.submit puts the first two lines (each cut to 300 characters) in
    the request, whatever the run gathered."""
    path = tmp_path / "executor.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                data += conn.recv(65536)
            got.append(data)
            conn.sendall(
                encode_message(Accept(plan_id="20261129-213500-1a2b3c4d", sha256="a" * 64))
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ExecutorClient(path, 5).submit(plan_of(), "run-1", "nginx is down", [*SEEN, "x" * 400, "more"])
    thread.join(timeout=5)
    listener.close()
    sent = json.loads(got[0])
    assert sent["evidence"] == SEEN


def test_the_wire_takes_two_lines_of_300_characters_at_most() -> None:
    """A third line or a longer one is a malformed submission, not a longer page."""
    plan = plan_of().model_dump(mode="json")
    for evidence in (["a", "b", "c"], ["x" * 301]):
        with pytest.raises(ValidationError):
            SubmitPlan(plan=plan, evidence=evidence)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def test_the_executor_keeps_the_evidence_and_the_page_shows_it(b: Bench) -> None:
    """Submitted with evidence, stored with its provenance (the sha256 is the plan's
    alone), and the page shows both lines."""
    service = ExecutorService(b.store, POLICY, lambda: NOW, b.approvals_dir)
    reply = service.handle(
        SubmitPlan(plan=plan_of().model_dump(mode="json"), run_id="run-7", evidence=SEEN),
        DIAGNOSE,
    )
    assert isinstance(reply, Accept) and reply.sha256 == plan_of().fingerprint()
    record = b.store.load(reply.plan_id)
    assert record.submitted_by.evidence == SEEN
    link = b.links(b.submit(record).plan_id)[("alice", "approve")]
    seen = b.view(link.token)
    assert isinstance(seen, Viewed) and seen.plan.evidence == SEEN


def test_a_record_from_before_evidence_reads_and_shows_its_symptom(b: Bench) -> None:
    """plans/<id>.json written without ``evidence``: it loads (an empty list), and the
    page shows the symptom diagnosis was asked about instead."""
    service = ExecutorService(b.store, POLICY, lambda: NOW, b.approvals_dir)
    reply = service.handle(
        SubmitPlan(plan=plan_of().model_dump(mode="json"), symptom="nginx is down"), DIAGNOSE
    )
    assert isinstance(reply, Accept)
    path = b.store.plans / f"{reply.plan_id}.json"
    data = json.loads(path.read_text())
    del data["submitted_by"]["evidence"]
    path.write_text(json.dumps(data))
    record = b.store.load(reply.plan_id)
    assert record.submitted_by.evidence == []
    link = b.links(b.submit(record).plan_id)[("bob", "reject")]
    seen = b.view(link.token)
    assert isinstance(seen, Viewed) and seen.plan.evidence == ["nginx is down"]
