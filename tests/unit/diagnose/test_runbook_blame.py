"""The runbook's blame: which units a diagnosis is about (its scope), where in them the
fault is (the roots), which failing units it only names (strangers), and what systemd
stopped with a unit, to be started after it.

Like test_runbook.py, each test replays recorded systemd output through the real loop
(RecordedHost); the facts a test states about the host are answered in the tools' own
output models. Names are any names: the runbook decides from facts, never from them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from diagnose_svc.errors import ToolError
from diagnose_svc.policies.runbook import RunbookPolicy
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.tools import Tool, ToolContext, UnitArgs, UnitStatus, make_tool
from diagnose_svc.tools._baseline_store import BaselineEdge, BaselineListener, Snapshot
from diagnose_svc.tools.list_listeners import Holder, Listener
from diagnose_svc.tools.read_config_edges import ConfigEdge
from diagnose_svc.tools.read_connections import Edge
from diagnose_svc.tools.read_process_state import ProcessInfo
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import DiagnoseSettings
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import FakeSubmitter, RecordedHost, accept, health
from tests.unit.diagnose.test_runbook import (
    APP_ALONE,
    DB_RAN,
    PINNED,
    SOCKET_SHOW,
    cause_of,
    diagnose,
    looping,
    renamed,
    settings,
    steps_of,
    stopped,
)

#: What systemctl says when the bus does not answer in time: no state, and no "not found".
BUS_TIMEOUT = "Failed to get properties: Connection timed out"
NOON = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
START_AGAIN = {"active_state": ["inactive", "failed"]}
FAILED = {"active_state": ["failed"]}


def unreadable(host: RecordedHost, *units: str) -> dict[str, Tool]:
    """``host``'s tools, its read_unit_status failing for ``units`` as systemctl does when
    the bus times out (the units exist; their state cannot be read now)."""

    def read_unit_status(args: UnitArgs, context: ToolContext) -> UnitStatus:
        """Recorded read_unit_status, the bus timing out for some units."""
        host.calls.append(("read_unit_status", args.model_dump()))
        if args.unit in units:
            raise ToolError(BUS_TIMEOUT)
        return host.status(args.unit)

    return {**host.tools(), "read_unit_status": make_tool(UnitArgs, read_unit_status)}


def diagnose_with(tools: dict[str, Tool], unit: str) -> PlanVerdict | NoteVerdict:
    """A diagnosis of ``unit`` with ``tools``, as diagnose() runs one with a host's own."""
    config = DiagnoseSettings()
    submitter = FakeSubmitter([accept()])
    return run_diagnosis(unit, "", RunbookPolicy(config), tools, submitter, config)


def service(name: str, *, requires: str = "", wants: str = "", binds_to: str = "") -> str:
    """``name`` running, with the dependencies given (space-separated units)."""
    return (
        APP_ALONE.replace("app.service", name)
        .replace("Requires=sysinit.target", f"Requires=sysinit.target {requires}".rstrip())
        .replace("Wants=\n", f"Wants={wants}\n")
        .replace("BindsTo=\n", f"BindsTo={binds_to}\n")
    )


def failed(name: str) -> str:
    """``name`` failed: its program exited with status 2 after running for an hour."""
    return renamed(DB_RAN, "db.service", name).replace("RequiredBy=app.service", "RequiredBy=")


def reason_of(verdict: PlanVerdict | NoteVerdict) -> str:
    """The reason of a plan's first step; a note fails the test, showing its text."""
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    return verdict.plan.steps[0].reason or ""


def text_of(verdict: PlanVerdict | NoteVerdict) -> str:
    """A note's text; a plan fails the test."""
    assert isinstance(verdict, NoteVerdict), verdict
    return verdict.text


# -- what is in scope ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["timer", "path"])
def test_a_failed_dependency_of_any_kind_systemd_starts_is_the_root(kind: str) -> None:
    """app stopped because a unit it Requires= failed, be it a service, a timer or a path
    unit: that unit is where the fault is; the plan starts it, then app. (A failed mount
    is the root too, but a note: tests/unit/diagnose/test_runbook_mounts.py.)"""
    dep = f"data.{kind}"
    app = stopped(service("app.service", requires=dep))
    host = RecordedHost().add(app).add(failed(dep))
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", dep, FAILED),
        ("start_unit", "app.service", START_AGAIN),
    ]


def test_a_failed_mount_it_requires_is_the_root_and_is_left_to_a_human() -> None:
    """app stopped because data.mount, which it Requires=, failed: the note is about the
    mount (/data); neither is started."""
    app = stopped(service("app.service", requires="data.mount"))
    host = RecordedHost().add(app).add(failed("data.mount"))
    verdict, _ = diagnose(host, "app.service")
    assert cause_of(verdict) == ("mount_failed", "data.mount")
    assert "/data is not mounted" in text_of(verdict)


def test_a_dependency_whose_state_cannot_be_read_is_blamed_not_the_unit_asked() -> None:
    """app stopped; db, which it Requires=, is down (systemd says so in app's
    dependencies) but reading db's own state timed out. The fault is in db, as far as
    anything shows: a note that db's state could not be read, never a start of app."""
    app = stopped(service("app.service", requires="db.service"))
    host = RecordedHost().add(app).add(failed("db.service"))
    verdict = diagnose_with(unreadable(host, "db.service"), "app.service")
    assert cause_of(verdict) == ("unknown", "db.service")
    assert "db.service is failing, but its state could not be read" in text_of(verdict)


def test_a_failed_wanted_unit_whose_state_cannot_be_read_is_still_named() -> None:
    """app runs and Wants= cache, which list_failed_units says failed, but reading
    cache's state timed out: app is healthy, and the note still names cache as failing."""
    host = RecordedHost().add(service("app.service", wants="cache.service"))
    host.add(failed("cache.service"))
    verdict = diagnose_with(unreadable(host, "cache.service"), "app.service")
    assert cause_of(verdict) == ("healthy", "app.service")
    assert "cache.service; diagnose it on its own" in text_of(verdict)


def _peer(name: str) -> ConfigEdge:
    """``name``'s configuration lists its own address among its peers (a cluster's
    member list): an edge from it to itself."""
    return ConfigEdge(
        client=name,
        server=name,
        endpoint=":7000",
        source=f"/etc/{name}/cluster.conf:3",
        how="listens there now",
    )


def test_a_unit_whose_configuration_names_itself_is_still_where_the_fault_is() -> None:
    """db failed; its cluster configuration lists its own address as a peer. Reaching
    itself is no dependency: db is the root, and it is started."""
    host = RecordedHost(configured=[_peer("db.service")]).add(failed("db.service"))
    verdict, _ = diagnose(host, "db.service")
    assert steps_of(verdict) == [("start_unit", "db.service", FAILED)]


def test_an_unreadable_dependency_that_names_itself_is_still_blamed() -> None:
    """As above, db's configuration lists itself as a peer, and db's state could not be
    read while app, which Requires= it, stopped: db is still the one blamed."""
    app = stopped(service("app.service", requires="db.service"))
    host = RecordedHost(configured=[_peer("db.service")]).add(app).add(failed("db.service"))
    verdict = diagnose_with(unreadable(host, "db.service"), "app.service")
    assert cause_of(verdict) == ("unknown", "db.service")


def _removed_behind(path: list[str]) -> tuple[RecordedHost, DiagnoseSettings]:
    """front runs and answers; the baseline remembers ``path`` (front, ..., old.service)
    reaching one another, and old.service has been removed since, though a health target
    still names it (it refuses connections). web failed on its own, its target refusing
    too; nothing links it to front."""
    edges = [
        BaselineEdge(client=a, server=b, endpoint=f":700{i}", source="observed")
        for i, (a, b) in enumerate(pairwise(path))
    ]
    snap = Snapshot(
        taken_at=NOON,
        units={u: "active/running" for u in path},
        listeners=[],
        edges=edges,
        health={},
    )
    host = RecordedHost(baseline=snap, connections=[], configured=[])
    for unit in path[:-1]:
        host.add(service(unit))
    host.add(failed("web.service"))
    host.health["legacy"] = health("legacy", "old.service", "connection_refused")
    host.health["web"] = health("web", "web.service", "connection_refused")
    config = settings(
        legacy=("http://127.0.0.1:7009/", "old.service"),
        web=("http://127.0.0.1:8081/", "web.service"),
    )
    return host, config


@pytest.mark.parametrize(
    "path",
    [
        ["front.service", "old.service"],
        ["front.service", "mid.service", "bal.service", "old.service"],
    ],
    ids=["reached-by-front", "reached-by-a-unit-never-read"],
)
def test_an_edge_to_a_removed_unit_pulls_no_stranger_into_the_plan(path: list[str]) -> None:
    """An edge the baseline kept to a unit removed since (systemd: not found) is history,
    whether front reached it or a unit behind front that this run never read did: its
    stale health target failing is no reason to follow every failing target, so web,
    which failed on its own, is named and never started."""
    host, config = _removed_behind(path)
    verdict, _ = diagnose(host, "front.service", config)
    assert cause_of(verdict) == ("healthy", "front.service")
    assert ("read_unit_status", {"unit": "old.service"}) in host.calls
    assert "web.service" in text_of(verdict)


def test_a_failed_unit_beyond_24_links_is_named_but_not_planned_for() -> None:
    """u01's links lead through a chain of 24 more units, a third of the links seen now,
    a third configured, a third remembered by the baseline; the last unit failed. A
    diagnosis follows links at most 24 units deep: the last is named as failing, never
    started."""
    chain = [f"u{i:02d}.service" for i in range(1, 26)]
    pairs = list(pairwise(chain))
    host = RecordedHost(
        connections=[
            Edge(client=a, server=b, address="127.0.0.1", port=7000, states={"established": 1})
            for a, b in pairs[:8]
        ],
        configured=[
            ConfigEdge(client=a, server=b, endpoint=":7000", source="/etc/c", how="x")
            for a, b in pairs[8:16]
        ],
        baseline=Snapshot(
            taken_at=NOON,
            units={},
            listeners=[],
            edges=[
                BaselineEdge(client=a, server=b, endpoint=":7000", source="observed")
                for a, b in pairs[16:]
            ],
            health={},
        ),
    )
    for name in chain[:-1]:
        host.add(service(name))
    host.add(failed(chain[-1]))
    verdict, _ = diagnose(host, "u01.service")
    assert ("read_unit_status", {"unit": "u25.service"}) in host.calls
    assert cause_of(verdict) == ("healthy", "u01.service")
    assert "u25.service; diagnose it on its own" in text_of(verdict)


# -- what starts again after the root -------------------------------------------------------


def test_each_root_s_plan_starts_only_what_is_down_because_of_it() -> None:
    """web runs and Wants= db, y and worker. db and db2 failed; worker (Requires=db) and y
    (Requires=db2) stopped. One plan: start the roots db and db2, then worker and y,
    which stopped with them; a unit is never skipped because another unit in scope runs
    or has a root of its own."""
    host = (
        RecordedHost()
        .add(service("web.service", wants="db.service y.service worker.service"))
        .add(failed("db.service"))
        .add(stopped(service("y.service", requires="db2.service")))
        .add(stopped(service("worker.service", requires="db.service")))
        .add(failed("db2.service"))
    )
    verdict, _ = diagnose(host, "web.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "db2.service", FAILED),
        ("start_unit", "worker.service", START_AGAIN),
        ("start_unit", "y.service", START_AGAIN),
    ]
    assert isinstance(verdict, PlanVerdict)
    assert verdict.plan.goal == (
        "Start failed db.service, then worker.service, which stopped with it; "
        "Start failed db2.service, then y.service, which stopped with it"
    )


def test_a_unit_that_needs_two_failed_roots_is_started_once_after_both() -> None:
    """web (stopped) Requires= db and db2, and both failed: start db, start db2, then web
    once. Started after db alone, web would make systemd start db2 under the plan's
    next step, whose precondition (db2 failed) would then fail."""
    host = (
        RecordedHost()
        .add(stopped(service("web.service", requires="db.service db2.service")))
        .add(failed("db.service"))
        .add(failed("db2.service"))
    )
    verdict, _ = diagnose(host, "web.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "db2.service", FAILED),
        ("start_unit", "web.service", START_AGAIN),
    ]


def test_a_dependent_systemd_is_still_stopping_is_started_after_the_root() -> None:
    """db failed and systemd is still stopping app, which Requires= it
    (deactivating/stop-sigterm): db is started, then app, whichever state app has
    settled in by then."""
    app = (
        service("app.service", requires="db.service")
        .replace("ActiveState=active", "ActiveState=deactivating")
        .replace("SubState=running", "SubState=stop-sigterm")
    )
    host = RecordedHost().add(app).add(failed("db.service"))
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "app.service", START_AGAIN),
    ]


def _at(seconds: float) -> str:
    """A systemctl timestamp ``seconds`` after 21:44:40 UTC."""
    moment = datetime(2026, 11, 29, 21, 44, 40, tzinfo=UTC) + timedelta(seconds=seconds)
    return f"{moment:%a %Y-%m-%d %H:%M:%S.%f} UTC"


def went_down(show: str, seconds: float) -> str:
    """``show`` stopped cleanly ``seconds`` after 21:44:40 UTC (its timestamps say so)."""
    return (
        stopped(show)
        .replace("InactiveEnterTimestamp=\n", f"InactiveEnterTimestamp={_at(seconds)}\n")
        .replace(
            "ActiveExitTimestamp=Sun 2026-11-29 21:49:00 UTC", f"ActiveExitTimestamp={_at(seconds)}"
        )
    )


def test_asked_about_the_root_what_stopped_with_it_is_started_after_it() -> None:
    """The operator asks about db, which failed at 21:44:40; app (BindsTo=db) went down
    with it a second later. The plan starts db, then app."""
    db = failed("db.service").replace("BoundBy=\n", "BoundBy=app.service\n")
    host = RecordedHost().add(db).add(went_down(service("app.service", binds_to="db.service"), 1))
    verdict, _ = diagnose(host, "db.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "app.service", START_AGAIN),
    ]


def test_a_dependent_both_in_scope_and_stopped_with_the_root_is_started_once() -> None:
    """app (BindsTo=db) went down a second after db failed, and the operator asks about
    app: it is both in the chain asked about and stopped with db; it is started once."""
    db = failed("db.service").replace("BoundBy=\n", "BoundBy=app.service\n")
    host = RecordedHost().add(db).add(went_down(service("app.service", binds_to="db.service"), 1))
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "app.service", START_AGAIN),
    ]


def test_dependents_are_started_dependencies_first() -> None:
    """app Requires= mid, mid Requires= db; db failed and both stopped. Asked about app
    (so app is found before mid), the plan still starts db, then mid, then app."""
    host = (
        RecordedHost()
        .add(stopped(service("app.service", requires="mid.service")))
        .add(stopped(service("mid.service", requires="db.service")))
        .add(failed("db.service"))
    )
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "mid.service", START_AGAIN),
        ("start_unit", "app.service", START_AGAIN),
    ]


def test_dependents_that_want_each_other_are_started_in_the_order_found() -> None:
    """x and y both Require= db and Want= each other (no order between them); db failed
    and both stopped. The plan starts db, then x and y in the order the diagnosis met
    them, and the diagnosis does not stall on the cycle."""
    host = (
        RecordedHost()
        .add(stopped(service("x.service", requires="db.service", wants="y.service")))
        .add(stopped(service("y.service", requires="db.service", wants="x.service")))
        .add(failed("db.service"))
    )
    verdict, _ = diagnose(host, "x.service")
    assert steps_of(verdict) == [
        ("start_unit", "db.service", FAILED),
        ("start_unit", "x.service", START_AGAIN),
        ("start_unit", "y.service", START_AGAIN),
    ]


# -- what systemd stopped with a unit it restarted -------------------------------------------


def restarted_core(bound_by: str = "", required_by: str = "") -> str:
    """core.service runs again: it stopped being active at 21:44:40 UTC and systemd
    restarted it (NRestarts=1). ``bound_by``/``required_by``: its dependents."""
    return (
        service("core.service")
        .replace("NRestarts=0", "NRestarts=1")
        .replace("BoundBy=\n", f"BoundBy={bound_by}\n")
        .replace("RequiredBy=\n", f"RequiredBy={required_by}\n")
        .replace("ActiveExitTimestamp=\n", f"ActiveExitTimestamp={_at(0)}\n")
    )


def test_what_stopped_with_a_restarted_unit_is_started_and_the_goal_names_it() -> None:
    """core crashed at 21:44:40 and systemd restarted it; edge (BindsTo=core) went down
    with it, and web and api (Requires=edge; web Requires= core too) with edge. Each is
    started once, after what it depends on, and the goal says they stopped with core."""
    host = (
        RecordedHost()
        .add(restarted_core(bound_by="edge.service", required_by="web.service"))
        .add(
            went_down(service("edge.service", binds_to="core.service"), 0.2).replace(
                "RequiredBy=\n", "RequiredBy=web.service api.service\n"
            )
        )
        .add(went_down(service("web.service", requires="core.service edge.service"), 0.5))
        .add(went_down(service("api.service", requires="edge.service"), 0.6))
    )
    verdict, _ = diagnose(host, "core.service")
    assert steps_of(verdict) == [
        ("start_unit", "edge.service", START_AGAIN),
        ("start_unit", "web.service", START_AGAIN),
        ("start_unit", "api.service", START_AGAIN),
    ]
    assert isinstance(verdict, PlanVerdict)
    assert verdict.plan.goal == (
        "Start edge.service, web.service, api.service, which stopped with core.service"
    )


def test_a_dependent_already_running_again_is_left_alone() -> None:
    """core crashed and was restarted; api (BindsTo=core) went down with it and is
    already running again (its Restart= brought it back), edge (BindsTo=core) stayed
    down: only edge is started."""
    api = service("api.service", binds_to="core.service").replace(
        "InactiveEnterTimestamp=\n", f"InactiveEnterTimestamp={_at(0.3)}\n"
    )
    host = (
        RecordedHost()
        .add(restarted_core(bound_by="api.service edge.service"))
        .add(api)
        .add(went_down(service("edge.service", binds_to="core.service"), 0.3))
    )
    verdict, _ = diagnose(host, "core.service")
    assert steps_of(verdict) == [("start_unit", "edge.service", START_AGAIN)]


@pytest.mark.parametrize("dependent", ["stack.target", "dbus-watch.service"])
def test_a_dependent_opsbot_may_not_start_is_left_out(dependent: str) -> None:
    """core crashed and was restarted; edge and ``dependent`` (both BindsTo=core) went
    down with it. A target, or a unit on opsbot's denylist, is never put in the plan:
    only edge is started."""
    host = (
        RecordedHost()
        .add(restarted_core(bound_by=f"{dependent} edge.service"))
        .add(went_down(service(dependent, binds_to="core.service"), 0.3))
        .add(went_down(service("edge.service", binds_to="core.service"), 0.3))
    )
    verdict, _ = diagnose(host, "core.service")
    assert steps_of(verdict) == [("start_unit", "edge.service", START_AGAIN)]


@pytest.mark.parametrize(
    ("seconds", "started"),
    [(-1.5, False), (-1.0, True), (90.0, True), (90.5, False)],
)
def test_stopped_with_it_means_from_a_second_before_to_90_seconds_after(
    seconds: float, started: bool
) -> None:
    """edge (BindsTo=core) went down ``seconds`` after core stopped being active. From
    one second before (leeway between two state changes' clocks) to 90 s after (systemd's
    default stop timeout) it went down with core and is started; earlier or later, someone else
    stopped it, and core is healthy."""
    host = (
        RecordedHost()
        .add(restarted_core(bound_by="edge.service"))
        .add(went_down(service("edge.service", binds_to="core.service"), seconds))
    )
    verdict, _ = diagnose(host, "core.service")
    if started:
        assert steps_of(verdict) == [("start_unit", "edge.service", START_AGAIN)]
    else:
        assert cause_of(verdict) == ("healthy", "core.service")


# -- where the fault is among units that run -------------------------------------------------


def test_a_relay_s_502_is_no_fault_while_an_upstream_does_not_answer() -> None:
    """edge answers 502 on one health target and 200 on another; app, which nothing
    links to edge, does not answer at all (times out). A relay's error is not its own
    fault while another does not answer: app is restarted, edge left alone."""
    config = settings(
        web=("http://127.0.0.1/", "edge.service"),
        static=("http://127.0.0.1/static", "edge.service"),
        app=("http://127.0.0.1:8080/health", "app.service"),
    )
    host = RecordedHost(
        health={
            "web": health("web", "edge.service", "unexpected_status", 502, "Bad Gateway"),
            "static": health("static", "edge.service", "ok", 200),
            "app": health("app", "app.service", "timeout"),
        }
    )
    host.add(service("edge.service")).add(service("app.service"))
    verdict, _ = diagnose(host, "edge.service", config)
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]


def test_a_unit_whose_health_target_answers_is_never_named_as_failing() -> None:
    """app and api both run and both health targets answer 200: asked about app, the
    note says no change is warranted and does not name api."""
    config = settings(
        app=("http://127.0.0.1:8080/", "app.service"), api=("http://127.0.0.1:8081/", "api.service")
    )
    host = RecordedHost(
        health={
            "app": health("app", "app.service", "ok", 200),
            "api": health("api", "api.service", "ok", 200),
        }
    )
    host.add(service("app.service")).add(service("api.service"))
    verdict, _ = diagnose(host, "app.service", config)
    assert cause_of(verdict) == ("healthy", "app.service")
    assert "api.service" not in text_of(verdict)


def test_a_unit_whose_reload_failed_keeps_the_blame_from_another_s_failing_target() -> None:
    """reloadfail runs, its last reload failed and its target answers 500; other, which
    nothing links to it, times out. reloadfail's fault is its own (systemd shows it):
    the note is about reloadfail, and other is named, never restarted."""
    config = settings(
        site=("http://127.0.0.1/", "reloadfail.service"),
        other=("http://127.0.0.1:8082/", "other.service"),
    )
    host = RecordedHost(
        health={
            "site": health("site", "reloadfail.service", "unexpected_status", 500),
            "other": health("other", "other.service", "timeout"),
        }
    )
    host.add(recorded.RELOADFAIL_SHOW, recorded.RELOADFAIL_JOURNAL).add(service("other.service"))
    verdict, submitter = diagnose(host, "reloadfail.service", config)
    assert cause_of(verdict) == ("config_error", "reloadfail.service")
    assert "other.service" in text_of(verdict)
    assert submitter.submitted == []


def test_an_idle_socket_activated_dependency_does_not_keep_a_relay_from_its_upstream() -> None:
    """front answers 502; api, which front Wants=, is inactive because nobody connected
    yet and its socket listens (no fault); backend, behind another target, does not
    answer. The idle api is no fault of front's chain, so the failing targets are
    followed: backend is restarted."""
    socket = (
        SOCKET_SHOW.replace("queue", "api")
        .replace("ActiveState=failed", "ActiveState=active")
        .replace("SubState=failed", "SubState=listening")
        .replace("Result=resources", "Result=success")
    )
    api = stopped(service("api.service")) + "TriggeredBy=api.socket\n"
    config = settings(
        web=("http://127.0.0.1/", "front.service"),
        backend=("http://127.0.0.1:8090/", "backend.service"),
    )
    host = RecordedHost(
        health={
            "web": health("web", "front.service", "unexpected_status", 502),
            "backend": health("backend", "backend.service", "timeout"),
        }
    )
    host.add(service("front.service", wants="api.service")).add(api).add(socket)
    host.add(service("backend.service"))
    verdict, _ = diagnose(host, "front.service", config)
    assert steps_of(verdict) == [("restart_unit", "backend.service", PINNED)]


@pytest.mark.parametrize(
    ("state", "words"),
    [("T", "stopped"), ("t", "stopped by a debugger"), ("Z", "a zombie")],
)
def test_a_dependency_whose_process_is_stuck_behind_active_is_restarted(
    state: str, words: str
) -> None:
    """front answers 502; app, which it Requires=, is active/running with no health
    target of its own, but /proc shows its main process stopped, stopped by a debugger
    or a zombie: app is restarted, pinned, and front left alone."""
    stuck = ProcessInfo(
        pid=95, role="main", visible=True, comm="app", state=state, state_words=words
    )
    config = settings(web=("http://127.0.0.1/", "front.service"))
    host = RecordedHost(
        health={"web": health("web", "front.service", "unexpected_status", 502)},
        processes={"app.service": [stuck]},
    )
    host.add(service("front.service", requires="app.service")).add(service("app.service"))
    verdict, _ = diagnose(host, "front.service", config)
    assert steps_of(verdict) == [("restart_unit", "app.service", PINNED)]
    assert f"is {words}" in reason_of(verdict)


def test_a_port_another_process_holds_is_found_from_the_health_target_s_address() -> None:
    """app runs, but its health target at 127.0.0.1:8080 refuses connections, and
    list_listeners shows another process holding port 8080: a note naming the holder."""
    holder = Listener(
        address="0.0.0.0",
        port=8080,
        uid=0,
        user="root",
        processes=[Holder(pid=4242, comm="python3", unit="squatter.service")],
    )
    config = settings(app=("http://127.0.0.1:8080/health", "app.service"))
    host = RecordedHost(
        health={"app": health("app", "app.service", "connection_refused")}, listening=[holder]
    )
    host.add(service("app.service"))
    verdict, _ = diagnose(host, "app.service", config)
    assert cause_of(verdict) == ("port_in_use", "app.service")
    assert "pid 4242 python3 of squatter.service" in text_of(verdict)


def test_a_reload_only_its_journal_says_failed_is_never_restarted() -> None:
    """systemd's ReloadResult= says success, but PID 1's own journal line says the last
    reload failed, and the unit answers 500: a note quoting that line,
    never a restart."""
    show = recorded.RELOADFAIL_SHOW.replace("ReloadResult=exit-code", "ReloadResult=success")
    config = settings(web=("http://127.0.0.1/", "reloadfail.service"))
    host = RecordedHost(
        health={"web": health("web", "reloadfail.service", "unexpected_status", 500)}
    ).add(show, recorded.RELOADFAIL_JOURNAL)
    verdict, submitter = diagnose(host, "reloadfail.service", config)
    assert cause_of(verdict) == ("config_error", "reloadfail.service")
    assert 'systemd: "Reload failed for reloadfail.service."' in text_of(verdict)
    assert submitter.submitted == []


# -- strangers -------------------------------------------------------------------------------


def test_at_most_six_strangers_are_named() -> None:
    """app is healthy; seven units failed on their own. The note names the first six
    (each to be diagnosed on its own), not the seventh: a note stays readable."""
    host = RecordedHost().add(service("app.service"))
    for i in range(1, 8):
        host.add(failed(f"s{i}.service"))
    verdict, _ = diagnose(host, "app.service")
    text = text_of(verdict)
    assert "s1.service, s2.service, s3.service, s4.service, s5.service, s6.service;" in text
    assert "s7.service" not in text


# -- why a dependency no unit file declares is needed ----------------------------------------


def _remembered(units: dict[str, str], edges: list[tuple[str, str]]) -> Snapshot:
    """A baseline taken at noon: the newest healthy snapshot's ``units``, and the
    (client, server) ``edges`` its snapshots saw, db listening on four endpoints."""
    return Snapshot(
        taken_at=NOON,
        units=units,
        listeners=[
            BaselineListener(unit="db.service", endpoint=e)
            for e in ("127.0.0.1:5432", "[::1]:5432", "127.0.0.1:5433", "[::1]:5433")
        ],
        edges=[
            BaselineEdge(client=c, server=s, endpoint="127.0.0.1:5432", source="observed")
            for c, s in edges
        ],
        health={},
    )


@pytest.mark.parametrize("then", [None, "inactive/dead"], ids=["not-in-it", "same-state"])
def test_a_dependency_only_the_baseline_links_is_explained_by_the_edge_it_kept(
    then: str | None,
) -> None:
    """app loops; db, stopped, is linked to it by nothing but the baseline's memory of
    app reaching it. The newest healthy snapshot has no state of db that differs from
    now (it does not list db, or lists it as stopped then too): the plan starts db and
    its reason says what the baseline saw, app reaching db, and no other "then"."""
    units = {"app.service": "active/running"} | ({"db.service": then} if then else {})
    host = RecordedHost(
        baseline=_remembered(units, [("app.service", "db.service")]),
        connections=[],
        configured=[],
    )
    host.add(looping(APP_ALONE)).add(stopped(service("db.service")))
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [("start_unit", "db.service", {"active_state": ["inactive"]})]
    reason = reason_of(verdict)
    assert reason.endswith(
        "No unit file declares it, but when the host was last healthy (2026-11-29 12:00 UTC) "
        "app.service reached db.service at 127.0.0.1:5432 (observed)."
    )
    assert "Last healthy" not in reason


def test_what_changed_since_the_host_was_healthy_is_said_once() -> None:
    """db was active/running when the host was last healthy, listening on four
    endpoints, reached by five clients; now it failed. The reason says so once, with the
    first three endpoints and four clients, and does not repeat the baseline's edge."""
    clients = ["app.service", "b.service", "c.service", "d.service", "e.service"]
    units = {"app.service": "active/running", "db.service": "active/running"}
    host = RecordedHost(
        baseline=_remembered(units, [(c, "db.service") for c in clients]),
        connections=[],
        configured=[],
    )
    host.add(looping(APP_ALONE)).add(failed("db.service"))
    verdict, _ = diagnose(host, "app.service")
    assert steps_of(verdict) == [("start_unit", "db.service", FAILED)]
    reason = reason_of(verdict)
    assert reason.endswith(
        "Last healthy 2026-11-29 12:00 UTC: db.service was active/running, listening on "
        "127.0.0.1:5432, [::1]:5432, 127.0.0.1:5433, reached by app.service, b.service, "
        "c.service, d.service; now it is failed/failed."
    )
    assert "No unit file declares it" not in reason


def test_a_configured_link_is_named_even_past_a_unit_that_could_not_be_read() -> None:
    """web's configuration names hub, then app; reading hub's state timed out. app is
    configured to reach db, which failed: the plan starts db, and its reason names
    app's setting, as it would without hub."""

    def link(client: str, server: str, port: int) -> ConfigEdge:
        source = f"/etc/{client.removesuffix('.service')}.conf"
        return ConfigEdge(
            client=client, server=server, endpoint=f":{port}", source=source, how="listens there"
        )

    host = RecordedHost(
        configured=[
            link("web.service", "hub.service", 7001),
            link("web.service", "app.service", 7002),
            link("app.service", "db.service", 5432),
        ]
    )
    host.add(service("web.service")).add(service("hub.service")).add(service("app.service"))
    host.add(failed("db.service"))
    verdict = diagnose_with(unreadable(host, "hub.service"), "web.service")
    assert steps_of(verdict) == [("start_unit", "db.service", FAILED)]
    assert reason_of(verdict).endswith(
        "No unit file declares it, but app.service is configured to reach :5432 "
        "(/etc/app.conf), where db.service listens there."
    )


@pytest.mark.parametrize("asked", ["app.service", "db.service"])
def test_a_dependency_its_unit_file_declares_needs_no_other_explanation(asked: str) -> None:
    """db failed; app, stopped, Requires= it. Whether app or db is asked about, the
    reason for starting db ends with the facts checked: a unit file says why db is
    needed (or nothing in scope needs it), so nothing more is said."""
    host = RecordedHost().add(stopped(service("app.service", requires="db.service")))
    host.add(failed("db.service"), recorded.DB_JOURNAL)
    verdict, _ = diagnose(host, asked)
    assert steps_of(verdict)[0] == ("start_unit", "db.service", FAILED)
    assert reason_of(verdict).endswith("so starting it again should bring it back.")
