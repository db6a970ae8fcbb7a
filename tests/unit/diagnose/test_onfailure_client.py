"""opsbot-onfailure@ asks the diagnosis service instead of loading the diagnosis itself
(diagnose_svc/onfailure.py): the service, run by the same user in the same sandbox,
answers its own user's request as a unit's failure (as ``opsbot-diagnose run`` would,
whatever the scope says), and anyone else's within the scope; where the service cannot be
asked, the failure is diagnosed in the process itself."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from diagnose_svc.events import Event
from diagnose_svc.onfailure import EX_UNAVAILABLE, NotAnswered, ask_service, main
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.scope import OutOfScope
from diagnose_svc.server import DiagnoseServer
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings
from testbed.inproc import NotePolicy, _NoExecutor

Diagnose = Callable[[str, str, Callable[[Event], None]], PlanVerdict | NoteVerdict]


def noted(unit: str, symptom: str, on_event: Callable[[Event], None]) -> NoteVerdict:
    verdict = run_diagnosis(
        unit, symptom, NotePolicy(), {}, _NoExecutor(), DiagnoseSettings(), on_event
    )
    assert isinstance(verdict, NoteVerdict)
    return verdict


def in_scope_only(unit: str, symptom: str, on_event: Callable[[Event], None]) -> NoteVerdict:
    raise OutOfScope(f"{unit} is not in the diagnosis scope")


@contextmanager
def service(path: Path, own_uid: int | None = None) -> Iterator[list[str]]:
    """The real DiagnoseServer: operators' requests within the scope (here: none is),
    a unit's failure answered by a real run; the units it diagnosed as failures."""
    failures: list[str] = []

    def failed(unit: str, symptom: str, on_event: Callable[[Event], None]) -> NoteVerdict:
        failures.append(unit)
        return noted(unit, symptom, on_event)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    server = DiagnoseServer(
        listener,
        in_scope_only,
        idle_timeout=0,
        notify=False,
        diagnose_failed=failed,
        own_uid=own_uid,
    )
    thread = threading.Thread(target=server.serve, name="diagnose", daemon=True)
    thread.start()
    try:
        yield failures
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()


def test_a_units_failure_is_diagnosed_by_the_running_service_whatever_the_scope(
    tmp_path: Path,
) -> None:
    """app.service is out of the diagnosis scope, but root watches it: its failure, asked
    by the service's own user, is diagnosed by the service, and the client's journal gets
    each event and the verdict in the words ``opsbot-diagnose run`` prints."""
    path = tmp_path / "diagnose.sock"
    with service(path) as failures:
        printed, status = ask_service("app.service", "systemd marked the unit failed", path)
    assert failures == ["app.service"]
    assert status == 0
    assert printed[0].startswith("diagnose.started ")
    assert any(line.startswith("diagnose.finished ") for line in printed)
    assert "of app.service:" in printed[-2]
    assert printed[-1] == "nothing found about app.service"


def test_another_users_request_is_not_a_units_failure(tmp_path: Path) -> None:
    """Only the service's own user speaks for a unit's failure: an operator asking about
    the same unit gets the scope's refusal (the client then diagnoses in its process,
    which an operator's uid could not do as the diagnose user)."""
    path = tmp_path / "diagnose.sock"
    with service(path, own_uid=os.getuid() + 1) as failures:
        with pytest.raises(NotAnswered, match="not in the diagnosis scope"):
            ask_service("app.service", "it failed", path)
    assert failures == []


def test_a_diagnosis_the_policy_failed_exits_as_run_does(tmp_path: Path) -> None:
    """A verdict that the policy or the executor failed makes the unit fail (69), as
    ``opsbot-diagnose run`` exits on it."""
    verdict = (
        b'{"event":"diagnose.verdict","verdict":{"kind":"note","run_id":"r","unit":"a.service",'
        b'"steps_used":1,"ended_by":"policy_error","text":"the model is away"}}\n'
    )
    printed, status = ask_service("a.service", "", tmp_path / "unused", lines=[verdict])
    assert status == EX_UNAVAILABLE
    assert printed == ["diagnosis r of a.service: 1 steps", "the model is away"]


def test_where_the_service_cannot_be_asked_the_failure_is_diagnosed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No socket (the service's socket unit is stopped): the client says so and runs
    ``opsbot-diagnose run`` itself with the same unit and symptom."""
    ran: list[list[str]] = []
    monkeypatch.setenv("OPSBOT_DIAGNOSE_SOCKET", str(tmp_path / "missing.sock"))

    def diagnose_here(argv: list[str]) -> int:
        ran.append(list(argv))
        return 0

    monkeypatch.setattr("diagnose_svc.daemon.main", diagnose_here)
    assert main(["--symptom", "it failed", "app"]) == 0
    assert ran == [["run", "--symptom", "it failed", "app"]]
    assert "unreachable" in capsys.readouterr().err
