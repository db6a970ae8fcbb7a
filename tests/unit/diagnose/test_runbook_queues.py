"""A queue between units (diagnose_svc/policies/runbook/queues.py): a producer hands jobs
to a broker and a consumer, which no unit file or connection links to the producer,
takes them off it. When the producer's answers say its queue backs up, the consumer is
in its chain: stopped, it is started; running while the broker came back under it, it is
restarted; the producer and the front are left alone."""

from __future__ import annotations

from diagnose_svc.tools.read_config_edges import ConfigEdge
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from tests.unit.diagnose.helpers import RecordedHost, health
from tests.unit.diagnose.test_runbook import (
    APP_INVOCATION,
    DB_RAN,
    cause_of,
    diagnose,
    renamed,
    settings,
    steps_of,
)
from tests.unit.diagnose.test_runbook_blame import service

FULL = "queue full: 912 jobs waiting (max 200)"
STARTED = "Sun 2026-11-29 21:44:38.590102 UTC"


def edge(client: str, server: str, endpoint: str, source: str) -> ConfigEdge:
    return ConfigEdge(
        client=client, server=server, endpoint=endpoint, source=source, how="listens there now"
    )


def queue_host(consumer_show: str, broker_started: str = STARTED) -> RecordedHost:
    """front -> orders (producer) -> cache@jobs (redis) <- billing (consumer); orders'
    target answers 503 saying its queue is full, and front relays it."""
    broker = service("cache@jobs.service").replace(
        f"ExecMainStartTimestamp={STARTED}", f"ExecMainStartTimestamp={broker_started}"
    )
    host = (
        RecordedHost()
        .add(service("front.service"))
        .add(service("orders.service"))
        .add(broker)
        .add(consumer_show)
    )
    host.configured = [
        edge("front.service", "orders.service", ":21001", "/etc/nginx/sites-enabled/shop:9"),
        edge("orders.service", "cache@jobs.service", ":21500", "EnvironmentFile=REDIS_URL"),
        edge("billing.service", "cache@jobs.service", ":21500", "EnvironmentFile=REDIS_URL"),
    ]
    host.connections = []
    host.health["front"] = health("front", "front.service", "unexpected_status", 503, body=FULL)
    host.health["orders"] = health("orders", "orders.service", "unexpected_status", 503, body=FULL)
    return host


CONFIG = settings(
    front=("http://127.0.0.1:8080/healthz", "front.service"),
    orders=("http://127.0.0.1:21001/healthz", "orders.service"),
)


def test_a_stopped_consumer_of_a_queue_that_backs_up_is_started() -> None:
    """billing, the consumer, failed; orders says its queue is full. Asked about the
    front: start billing; neither orders nor front is touched."""
    failed = renamed(DB_RAN, "db.service", "billing.service").replace(
        "RequiredBy=app.service", "RequiredBy="
    )
    verdict, _ = diagnose(queue_host(failed), "front.service", CONFIG)
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    assert [(tool, unit) for tool, unit, _ in steps_of(verdict)] == [
        ("start_unit", "billing.service")
    ]


def test_a_consumer_whose_broker_came_back_under_it_is_restarted() -> None:
    """billing runs, but the broker was restarted after it started (a routine restart):
    it may hold a dead connection and consume nothing while orders' queue fills. The
    plan restarts billing (this run of it), saying why; orders is left alone."""
    consumer = service("billing.service")
    verdict, _ = diagnose(
        queue_host(consumer, broker_started="Sun 2026-11-29 21:50:00 UTC"),
        "front.service",
        CONFIG,
    )
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    [(tool, unit, expect)] = steps_of(verdict)
    assert (tool, unit) == ("restart_unit", "billing.service")
    assert expect == {"active_state": ["active"], "invocation_id": APP_INVOCATION}
    reason = verdict.plan.steps[0].reason or ""
    assert "drains the queue orders.service says backs up" in reason
    assert "cache@jobs.service was started again at 21:50:00 UTC" in reason


def test_a_healthy_consumer_and_broker_blame_neither_and_restart_nothing() -> None:
    """The queue backs up, but billing runs since before the broker started and nothing
    below orders is failing: no restart of anyone; a note for a human about orders."""
    verdict, _ = diagnose(queue_host(service("billing.service")), "front.service", CONFIG)
    assert isinstance(verdict, NoteVerdict), verdict
    assert cause_of(verdict)[1] == "orders.service"


def test_a_queue_that_does_not_back_up_brings_no_consumer_into_the_chain() -> None:
    """orders answers 503 for another reason: billing, failed on its own, is a stranger,
    named and never started."""
    failed = renamed(DB_RAN, "db.service", "billing.service").replace(
        "RequiredBy=app.service", "RequiredBy="
    )
    host = queue_host(failed)
    host.health["orders"] = health(
        "orders", "orders.service", "unexpected_status", 503, body="template error"
    )
    host.health["front"] = health(
        "front", "front.service", "unexpected_status", 503, body="bad gateway"
    )
    verdict, _ = diagnose(host, "front.service", CONFIG)
    assert isinstance(verdict, NoteVerdict), verdict
    assert cause_of(verdict)[1] == "orders.service"
    assert "Also failing, unrelated to front.service" in verdict.text
    assert "billing.service" in verdict.text


def test_a_front_failing_above_the_unit_asked_about_is_said_to_fail_through_it() -> None:
    """Asked about orders (the producer) while billing is down: front, which reaches
    orders, fails with it; it is named as failing through orders, never as unrelated,
    and the plan still starts billing alone."""
    failed = renamed(DB_RAN, "db.service", "billing.service").replace(
        "RequiredBy=app.service", "RequiredBy="
    )
    verdict, _ = diagnose(queue_host(failed), "orders.service", CONFIG)
    assert isinstance(verdict, PlanVerdict), getattr(verdict, "text", verdict)
    assert [(tool, unit) for tool, unit, _ in steps_of(verdict)] == [
        ("start_unit", "billing.service")
    ]
    reasons = " ".join(str(step.reason) for step in verdict.plan.steps)
    assert "Also failing, as it reaches orders.service: front.service" in reasons, reasons
    assert "unrelated" not in reasons, reasons


def test_a_healthy_unit_names_another_failing_chain_and_reads_none_of_its_processes() -> None:
    """Asked about status.service, running and answering, while front and orders (a
    chain of their own) answer 503: the note says status is healthy and names front and
    orders as unrelated, and no process of that other chain is read for it (each is its
    own diagnosis: before, every running unit of it was watched for its CPU)."""
    host = queue_host(service("billing.service")).add(service("status.service"))
    host.health["status"] = health("status", "status.service", "ok", 200)
    config = settings(
        front=("http://127.0.0.1:8080/healthz", "front.service"),
        orders=("http://127.0.0.1:21001/healthz", "orders.service"),
        status=("http://127.0.0.1:8083/", "status.service"),
    )
    verdict, _ = diagnose(host, "status.service", config)
    assert cause_of(verdict) == ("healthy", "status.service")
    assert "Also failing, unrelated to status.service" in verdict.text
    assert "shows: front.service, orders.service; diagnose each on its own." in verdict.text
    assert [args for tool, args in host.calls if tool == "read_process_state"] == []
