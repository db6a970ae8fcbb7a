"""The real-software suite: opsbot on graphs built from the daemons operators run.

Each case (testbed/daemon_faults.py) builds a graph from its seed out of Debian's nginx,
haproxy (a template instance), redis and memcached with their real configs (nginx's
sites-enabled include, haproxy's /etc/haproxy/%i.cfg, redis's own conf) and a small
Python app in its roles (a web app, a queue's producer and consumer, a Unix-socket
server) that speaks as such apps do: ``OSError: [Errno 98] Address already in use``
with no port, a settings file in ``EnvironmentFile=``, a socket path in its environment,
a queue it never names the consumer of. One fault of the kind is made the way it happens
on a host (a worker killed, a broker restarted under its consumer, a filesystem out of
inodes, a descriptor leak, a package upgraded with a bad conffile ...); opsbot is asked
as an operator would ask, and the verdict is judged against the answer derived from the
graph and the fault by construction (the generated suite's judge).

CI runs each kind's first two seeds, both carried through approval, apply and
verification (daemon_faults.CI_DAEMON_GATE, 14 cases); ``OPSBOT_GATE=full`` runs ten
seeds of each kind (``scripts/gate --full``). A case fails on a harmful plan, an applied
plan after which health does not hold or whose verification is wrong, or a fault that
could not be made. Accuracy by kind is in the scenario report with the generated suite's.

The graphs get a container of their own (the ``daemon_host`` fixture), so their nginx
sites and journal never meet the scenario stack's.
"""

from __future__ import annotations

import re

import pytest

from testbed import daemons
from testbed.container import BootedSystemd
from testbed.daemon_faults import DAEMON_CASES, DaemonKind, carried, case_graph
from testbed.graph_run import CaseRecord, run_daemon_case
from tests.scenarios.parts import parted
from tests.scenarios.report import GENERATED


def _explain(record: CaseRecord) -> str:
    return (
        f"seed {record.seed} ({record.kind}, {record.nodes} daemons, fault at "
        f"{record.target}, asked about {record.asked_about}): expected {record.expected}, "
        f"got {record.verdict} {record.plan_steps}; {record.problems}"
    )


@pytest.mark.parametrize(("kind", "seed"), parted(DAEMON_CASES, start=1))
def test_a_real_software_fault_gets_no_harm_and_its_plan_restores_health(
    daemon_host: BootedSystemd, kind: DaemonKind, seed: int
) -> None:
    """One case: opsbot proposes nothing harmful, the answer is the one the fault calls
    for, an applied plan's health holds and its verification says VERIFIED."""
    record = run_daemon_case(daemon_host, kind, seed, carry_plans=carried(kind, seed))
    GENERATED.append(record)
    assert not record.error, record.error
    assert not record.harmful, _explain(record)
    assert record.correct, _explain(record)
    assert not record.health_problem, f"{record.health_problem}: {_explain(record)}"
    assert not record.verify_problem, f"{record.verify_problem}: {_explain(record)}"


@pytest.mark.parametrize(("kind", "seed"), parted((("consumer_stale", 4012),), start=1))
def test_a_real_software_case_renamed_gets_the_same_verdict(
    daemon_host: BootedSystemd, kind: DaemonKind, seed: int
) -> None:
    """Every unit, instance, port and socket path drawn anew (the daemons stay Debian's,
    as on any host): the same steps on the same daemons, since nothing in the runbook is
    keyed to a name, a port or a path."""
    plain = run_daemon_case(daemon_host, kind, seed, carry_plans=False)
    other = run_daemon_case(daemon_host, kind, seed, carry_plans=False, rename=seed + 7)
    assert not plain.error and not other.error, (plain.error, other.error)
    original = case_graph(kind, seed)
    mapping = dict(
        zip(
            daemons.renamed(original, seed + 7).units,
            original.units,
            strict=True,
        )
    )

    def back(words: str) -> str:
        # the longest names first: an instance's name holds its template's
        for new in sorted(mapping, key=len, reverse=True):
            words = words.replace(new, mapping[new])
        return words

    assert plain.correct, _explain(plain)
    assert other.correct, _explain(other)
    assert (other.verdict, [back(s) for s in other.plan_steps], back(other.target)) == (
        plain.verdict,
        plain.plan_steps,
        plain.target,
    ), _explain(other)


@pytest.mark.parametrize(("kind", "seed"), parted((("package_config", 4064),), start=0))
def test_a_package_upgraded_since_the_host_was_healthy_is_named_with_its_versions_and_time(
    daemon_host: BootedSystemd, kind: DaemonKind, seed: int
) -> None:
    """The app's own .deb (version 1.4.2-1, installed with dpkg -i before the baseline)
    is upgraded to 1.5.0-1, whose new settings file breaks the start: the note says the
    app cannot start, and what changed since the host was healthy: the package, both
    versions and when, and its settings file."""
    record = run_daemon_case(daemon_host, kind, seed, carry_plans=False)
    assert not record.error, record.error
    assert record.verdict == "note: config_error", _explain(record)
    package = f"{record.target.removesuffix('.service').partition('@')[0]}-app"
    upgraded = rf"{package} 1\.4\.2-1 -> 1\.5\.0-1 upgraded \(\d{{4}}-\d\d-\d\d \d\d:\d\d UTC\)"
    assert re.search(upgraded, record.said), record.said
    assert re.search(
        r"Since the host was last seen healthy \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)", record.said
    ), record.said
    assert re.search(r"/etc/\S+ modified", record.said), record.said
