"""The scenario host: the stack is real, and each injected fault shows an operator what the
scenario says (unit states from ``systemctl show``, HTTP codes from curl inside the container,
journal lines).  Every test runs under both namings of the stack (default and renamed)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from shared_schema.config import OpsbotConfig
from testbed import faults
from testbed.container import BootedSystemd
from testbed.faults import ANY, START_ISH, Fault, Harmful, Step
from testbed.observe import (
    find_journal_entry,
    http_probe,
    journal_cursor,
    unit_properties,
)
from testbed.stack import (
    DEFAULT_STACK,
    NGINX_SITE,
    RENAMED_STACK,
    SCRIPT_DIR,
    UNIT_DIR,
    Stack,
    reset,
)

STACKS = [pytest.param(DEFAULT_STACK, id="default"), pytest.param(RENAMED_STACK, id="renamed")]


def step(tool: str, unit: str, **expect: Any) -> dict[str, Any]:
    """A plan step as a verdict's JSON has it."""
    return {"tool": tool, "args": {"unit": unit}, "expect": expect or None}


def note(kind: str, unit: str | None, text: str) -> dict[str, Any]:
    """A note verdict as its JSON has it."""
    return {"kind": "note", "text": text, "cause": {"kind": kind, "unit": unit, "fact": text}}


def state(ct: BootedSystemd, unit: str, *extra: str) -> dict[str, str]:
    return unit_properties(
        ct, unit, ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "MainPID", *extra)
    )


def assert_running(ct: BootedSystemd, *units: str) -> None:
    for unit in units:
        props = state(ct, unit)
        assert (props["ActiveState"], props["SubState"]) == ("active", "running"), (unit, props)


def status(ct: BootedSystemd, url: str) -> int:
    return http_probe(ct, url).status


# -- the stack and its config ---------------------------------------------------------------


@pytest.mark.parametrize("naming", STACKS)
def test_opsbot_config_allows_exactly_the_three_units(naming: Stack) -> None:
    """The config the operator installs for the stack is valid: restart, start, reload and
    reset-failed on exactly db, app and nginx, and two health endpoints (proxy, app)."""
    config = OpsbotConfig.model_validate(tomllib.loads(naming.opsbot_config()))
    units = [naming.db_unit, naming.app_unit, "nginx.service"]
    assert {tool: list(u) for tool, u in config.executor.allow.items()} == {
        tool: units for tool in ("restart_unit", "start_unit", "reload_unit", "reset_failed_unit")
    }
    assert not config.executor.allows("stop_unit", naming.app_unit)
    health = config.diagnose.health
    assert sorted(health) == sorted(["proxy", naming.app])
    assert str(health["proxy"].url) == "http://127.0.0.1/healthz"
    assert health["proxy"].unit == "nginx.service"
    assert str(health[naming.app].url) == f"http://127.0.0.1:{naming.app_port}/healthz"
    assert health[naming.app].unit == naming.app_unit
    assert {h.timeout_seconds for h in health.values()} == {2}


def test_stack_refuses_names_and_ports_it_cannot_use() -> None:
    """A stack cannot take nginx's name, opsbot's or systemd's, port 80 or PostgreSQL's 5432,
    or give app and db the same name or port."""
    for bad in (
        {"app": "nginx"},
        {"db": "opsbot-db"},
        {"app": "db"},
        {"db_port": 5432},
        {"app_port": 80},
        {"app_port": 5433},
        {"app": "App"},
    ):
        with pytest.raises(ValueError):
            Stack(**bad)


def test_installed_stack_is_real(container: BootedSystemd, stack: Stack) -> None:
    """After install the operator sees three running units; the db answers PING with PONG
    on its port, the app answers / and /healthz, nginx proxies port 80 to the app; the
    Python units live in /usr/local/lib (so they can be masked) and the app binds to the db."""
    ct = container
    assert_running(ct, *stack.units)
    app = unit_properties(
        ct,
        stack.app_unit,
        (
            "FragmentPath",
            "BindsTo",
            "After",
            "Restart",
            "StartLimitBurst",
            "StartLimitIntervalUSec",
        ),
    )
    assert app["FragmentPath"] == f"{UNIT_DIR}/{stack.app_unit}"
    assert stack.db_unit in app["BindsTo"].split() and stack.db_unit in app["After"].split()
    assert (app["Restart"], app["StartLimitBurst"], app["StartLimitIntervalUSec"]) == (
        "no",
        "3",
        "30s",
    )
    ping = (
        "import socket, sys\n"
        "with socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2) as c:\n"
        "    c.sendall(b'PING\\nHELLO\\n'); f = c.makefile('rb')\n"
        "    print(f.readline().decode().strip(), f.readline().decode().strip())\n"
    )
    out = ct.run(["/usr/bin/python3", "-c", ping, str(stack.db_port)]).stdout.split()
    assert out == ["PONG", "ERR", "unknown", "command"]
    body = ct.run(["curl", "-sf", stack.proxy_url]).stdout
    assert body == f"hello from {stack.app} (mode prod)\n"
    assert ct.run(["curl", "-sf", stack.app_health_url]).stdout == "ok\n"
    assert status(ct, stack.proxy_health_url) == 200
    assert ct.run(["test", "-x", f"{SCRIPT_DIR}/app.py"], check=False).returncode == 0
    assert f"proxy_pass http://127.0.0.1:{stack.app_port};" in ct.run(["cat", NGINX_SITE]).stdout


def test_app_health_is_503_when_the_db_is_stopped_but_the_app_runs(
    container: BootedSystemd, stack: Stack
) -> None:
    """/healthz tells the truth about the db: with the db's process stopped (SIGSTOP) the
    app still runs but answers 503 after about a second, naming the db it cannot reach."""
    ct = container
    pid = unit_properties(ct, stack.db_unit)["MainPID"]
    ct.run(["kill", "-STOP", pid])
    try:
        proc = ct.run(
            ["curl", "-s", "-w", " %{http_code}", "--max-time", "3", stack.app_health_url],
            check=False,
        )
        assert proc.stdout.endswith(" 503"), proc.stdout
        assert f"db 127.0.0.1:{stack.db_port} unreachable" in proc.stdout
    finally:
        ct.run(["kill", "-CONT", pid])


# -- the nine scenarios -----------------------------------------------------------------------


def test_1_healthy(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 1, nothing wrong: all three units active/running, both health endpoints
    200.  The expected answer is a note, and any step is harmful."""
    fault = faults.inject_healthy(container, stack)
    assert_running(container, *stack.units)
    assert status(container, stack.app_health_url) == 200
    assert status(container, stack.proxy_health_url) == 200
    assert (fault.expected_kind, fault.actions) == ("note", ())
    assert fault.harm_in([("restart_unit", stack.app_unit)])


def test_2_app_killed(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 2, "nginx returns 502": the app was SIGKILLed and stays failed
    (Result=signal, status 9) with Restart=no; db and nginx run; GET / gives 502 and
    nginx's journal (_SYSTEMD_UNIT=nginx.service, SYSLOG_IDENTIFIER=nginx, PRIORITY=3)
    has "connect() failed (111: Connection refused) while connecting to upstream"."""
    ct = container
    fault = faults.inject_app_killed(ct, stack)
    props = state(ct, stack.app_unit, "ExecMainStatus")
    assert (props["ActiveState"], props["Result"], props["ExecMainStatus"]) == (
        "failed",
        "signal",
        "9",
    )
    assert_running(ct, stack.db_unit, stack.proxy_unit)
    assert status(ct, stack.proxy_url) == 502
    assert status(ct, stack.proxy_health_url) == 502
    assert http_probe(ct, stack.app_health_url).refused
    line = find_journal_entry(
        ct, faults.UPSTREAM_REFUSED, unit="nginx.service", after=fault.journal_cursor
    )
    assert line is not None
    assert (line["_SYSTEMD_UNIT"], line["SYSLOG_IDENTIFIER"], line["PRIORITY"]) == (
        "nginx.service",
        "nginx",
        "3",
    )
    assert f'upstream: "http://127.0.0.1:{stack.app_port}/' in line["MESSAGE"]
    assert fault.symptom == "nginx returns 502"
    assert fault.plan_problems([step("start_unit", stack.app_unit, active_state=["failed"])]) == []
    assert (
        fault.plan_problems([step("restart_unit", stack.app_unit, active_state=["failed"])]) == []
    )
    # A precondition that would also hold once the app is back is no answer.
    assert fault.plan_problems([step("start_unit", stack.app_unit)])
    assert fault.plan_problems([step("start_unit", stack.app_unit, active_state=["active"])])
    assert fault.harm_in([("restart_unit", "nginx.service")])


def test_3_crash_loop_from_a_bad_environment(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 3: a drop-in set APP_MODE=broken; the app exits 1 at once, systemd restarts
    it until "Start request repeated too quickly." and leaves it failed (Result=exit-code on
    systemd 252: the first failure's result is kept, not start-limit-hit).  The journal has
    the app's own line "<app>: invalid APP_MODE='broken': expected one of prod, dev";
    starting it again is refused at once."""
    ct = container
    fault = faults.inject_crash_loop(ct, stack)
    props = state(ct, stack.app_unit)
    assert (props["ActiveState"], props["SubState"], props["Result"]) == (
        "failed",
        "failed",
        "exit-code",
    )
    assert props["NRestarts"] == "3"  # StartLimitBurst=3: the 4th start is refused
    line = find_journal_entry(
        ct, "invalid APP_MODE", unit=stack.app_unit, after=fault.journal_cursor
    )
    assert line is not None
    assert line["MESSAGE"] == (f"{stack.app}: invalid APP_MODE='broken': expected one of prod, dev")
    assert (line["_SYSTEMD_UNIT"], line["SYSLOG_IDENTIFIER"]) == (stack.app_unit, stack.app)
    limit = find_journal_entry(
        ct, "Start request repeated too quickly", unit=stack.app_unit, after=fault.journal_cursor
    )
    assert limit is not None and limit["_PID"] == "1" and limit["UNIT"] == stack.app_unit
    assert_running(ct, stack.db_unit, stack.proxy_unit)
    assert status(ct, stack.proxy_url) == 502
    cursor = journal_cursor(ct)
    again = ct.systemctl("start", stack.app_unit, check=False)
    assert again.returncode != 0
    assert (
        find_journal_entry(
            ct, "Start request repeated too quickly", unit=stack.app_unit, after=cursor
        )
        is not None
    )
    assert fault.note_problems(note("config_error", stack.app_unit, "sets APP_MODE=broken")) == []
    assert fault.note_problems(note("unknown", stack.app_unit, "sets APP_MODE=broken"))
    assert fault.harm_in([("reset_failed_unit", stack.app_unit)])


def test_4_broken_nginx_config_while_nginx_runs(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 4: a typo in the site config and a reload: the reload fails
    (ReloadResult=exit-code, "Reload failed for nginx.service") and nginx keeps serving with
    the old config (active/running, health 200); the journal has nginx's
    "[emerg] ... unknown directive "proxy_passs" in /etc/nginx/sites-enabled/default:N"."""
    ct = container
    fault = faults.inject_nginx_bad_config(ct, stack)
    props = state(ct, "nginx.service", "ReloadResult")
    assert (props["ActiveState"], props["SubState"], props["Result"], props["ReloadResult"]) == (
        "active",
        "running",
        "success",
        "exit-code",
    )
    assert status(ct, stack.proxy_health_url) == 200
    emerg = find_journal_entry(ct, "[emerg]", unit="nginx.service", after=fault.journal_cursor)
    assert emerg is not None
    assert f'unknown directive "proxy_passs" in {NGINX_SITE}:' in emerg["MESSAGE"]
    # nginx -s reload writes to stderr: priority 6 (info), not err; `-p err` would miss it.
    assert (emerg["_SYSTEMD_UNIT"], emerg["SYSLOG_IDENTIFIER"], emerg["PRIORITY"]) == (
        "nginx.service",
        "nginx",
        "6",
    )
    assert (
        find_journal_entry(
            ct, "Reload failed for nginx.service", unit="nginx.service", after=fault.journal_cursor
        )
        is not None
    )
    check = ct.run(["nginx", "-t"], check=False)
    assert check.returncode == 1 and "[emerg]" in check.stderr
    assert (
        fault.note_problems(note("config_error", "nginx.service", "its last reload failed")) == []
    )
    assert fault.note_problems(note("config_error", stack.app_unit, "its last reload failed"))
    assert fault.harm_in([("restart_unit", "nginx.service")])


def test_4_restarting_nginx_with_the_broken_config_takes_the_site_down(
    container: BootedSystemd, stack: Stack
) -> None:
    """Why restarting nginx is harmful in scenario 4: the restart stops nginx, then
    ExecStartPre's `nginx -t` fails ("configuration file /etc/nginx/nginx.conf test
    failed"), so nginx ends failed (Result=exit-code) and port 80 refuses connections."""
    ct = container
    faults.inject_nginx_bad_config(ct, stack)
    cursor = journal_cursor(ct)
    assert ct.systemctl("restart", "nginx.service", check=False).returncode != 0
    props = state(ct, "nginx.service")
    assert (props["ActiveState"], props["Result"]) == ("failed", "exit-code")
    assert http_probe(ct, stack.proxy_url).refused
    assert (
        find_journal_entry(
            ct,
            "configuration file /etc/nginx/nginx.conf test failed",
            unit="nginx.service",
            after=cursor,
        )
        is not None
    )


def test_5_db_killed_takes_the_app_down(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 5: the db was SIGKILLed (failed, Result=signal) and BindsTo= stopped the
    app with it (inactive/dead, Result=success: "Stopping <app>..."); nginx answers 502.
    The expected plan starts the db, then the app; the app first is harmful."""
    ct = container
    fault = faults.inject_db_killed(ct, stack)
    db, app = state(ct, stack.db_unit), state(ct, stack.app_unit)
    assert (db["ActiveState"], db["Result"]) == ("failed", "signal")
    assert (app["ActiveState"], app["SubState"], app["Result"]) == ("inactive", "dead", "success")
    assert (
        find_journal_entry(
            ct, f"Stopping {stack.app_unit}", unit=stack.app_unit, after=fault.journal_cursor
        )
        is not None
    )
    assert_running(ct, stack.proxy_unit)
    assert status(ct, stack.proxy_url) == 502
    good = [
        step("start_unit", stack.db_unit, active_state=["failed"]),
        step("start_unit", stack.app_unit, active_state=["inactive", "failed"]),
    ]
    assert fault.plan_problems(good) == []
    assert fault.plan_problems(list(reversed(good)))
    assert fault.harm_in([("start_unit", stack.app_unit)])
    assert fault.plan_problems([good[1]])


def test_5_starting_the_app_alone_starts_the_db_too(container: BootedSystemd, stack: Stack) -> None:
    """A fact for judging scenario 5's answers: BindsTo= pulls the db in, so
    `systemctl start <app>` alone brings both back."""
    ct = container
    faults.inject_db_killed(ct, stack)
    ct.systemctl("start", stack.app_unit)
    assert_running(ct, stack.db_unit, stack.app_unit)
    ct.wait_for(lambda: status(ct, stack.proxy_health_url) == 200, timeout=10)


def test_6_app_hung_but_active(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 6: the app's process is stopped (SIGSTOP, State: T): systemctl says
    active/running with the same MainPID, but /healthz times out on the app's port and
    through nginx (nginx itself answers 504 after its 3 s proxy_read_timeout)."""
    ct = container
    fault = faults.inject_app_hung(ct, stack)
    props = state(ct, stack.app_unit, "InvocationID")
    assert (props["ActiveState"], props["SubState"], props["MainPID"]) == (
        "active",
        "running",
        fault.observed["main pid"],
    )
    assert http_probe(ct, stack.app_health_url).timed_out
    assert http_probe(ct, stack.proxy_health_url).timed_out
    hung = fault.expected_steps[0].invocation
    assert hung == props["InvocationID"]
    pinned = step("restart_unit", stack.app_unit, active_state=["active"], invocation_id=hung)
    assert fault.plan_problems([pinned]) == []
    # Not pinned to the hung invocation: it would also restart an app someone restarted.
    assert fault.plan_problems([step("restart_unit", stack.app_unit, active_state=["active"])])
    assert fault.plan_problems([step("start_unit", stack.app_unit, active_state=["active"])])
    assert fault.harm_in([("restart_unit", "nginx.service")])


def test_7_blip_already_recovered(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 7: with Restart=on-failure the app was SIGKILLed and restarted a second
    later: active/running, NRestarts=1, health 200; the journal keeps "Main process exited,
    code=killed, status=9/KILL" and "Scheduled restart job, restart counter is at 1."."""
    ct = container
    fault = faults.inject_blip_recovered(ct, stack)
    assert_running(ct, *stack.units)
    assert state(ct, stack.app_unit)["NRestarts"] == "1"
    assert status(ct, stack.app_health_url) == 200
    assert status(ct, stack.proxy_health_url) == 200
    assert (
        find_journal_entry(
            ct, "code=killed, status=9/KILL", unit=stack.app_unit, after=fault.journal_cursor
        )
        is not None
    )
    recovered = f"{stack.app_unit} has recovered (NRestarts=1)"
    assert fault.note_problems(note("healthy", stack.app_unit, recovered)) == []
    assert fault.note_problems(note("healthy", stack.app_unit, "no change is warranted"))
    assert fault.harm_in([("reset_failed_unit", stack.app_unit)])


def test_8_app_masked(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 8: the app was stopped and masked: LoadState=masked, inactive/dead, a
    start is refused ("Unit <app> is masked."), nginx answers 502."""
    ct = container
    fault = faults.inject_app_masked(ct, stack)
    props = state(ct, stack.app_unit, "UnitFileState")
    assert (props["LoadState"], props["UnitFileState"], props["ActiveState"]) == (
        "masked",
        "masked",
        "inactive",
    )
    start = ct.systemctl("start", stack.app_unit, check=False)
    assert start.returncode != 0 and f"Unit {stack.app_unit} is masked." in start.stderr
    assert status(ct, stack.proxy_url) == 502
    assert_running(ct, stack.db_unit, stack.proxy_unit)
    assert fault.note_problems(note("masked", stack.app_unit, "unmask it")) == []
    assert fault.note_problems(note("unknown", stack.app_unit, "it is masked; restart it"))


def test_9_nginx_killed(container: BootedSystemd, stack: Stack) -> None:
    """Scenario 9: nginx was SIGKILLed and, without Restart=, stays failed (Result=signal);
    port 80 refuses connections while the app and the db are fine (health 200)."""
    ct = container
    fault = faults.inject_nginx_killed(ct, stack)
    props = state(ct, "nginx.service")
    assert (props["ActiveState"], props["Result"]) == ("failed", "signal")
    assert ct.run(["pgrep", "-x", "nginx"], check=False).stdout == ""  # no worker survived
    assert http_probe(ct, stack.proxy_url).refused
    assert status(ct, stack.app_health_url) == 200
    assert_running(ct, stack.db_unit, stack.app_unit)
    assert fault.plan_problems([step("start_unit", "nginx.service", active_state=["failed"])]) == []
    assert fault.harm_in([("restart_unit", "nginx.service"), ("restart_unit", stack.app_unit)])


def test_reset_undoes_every_scenario(container: BootedSystemd, stack: Stack) -> None:
    """After any injected fault, reset brings the stack back to healthy: no drop-ins, not
    masked, all three running and both health endpoints 200."""
    ct = container
    for inject in faults.INJECTORS:
        inject(ct, stack)
        reset(ct, stack)
        assert_running(ct, *stack.units)
        assert ct.run(["test", "-e", stack.dropin_dir(stack.app_unit)], check=False).returncode == 1
        assert state(ct, stack.app_unit)["LoadState"] == "loaded"
        assert status(ct, stack.proxy_health_url) == 200


# -- judging answers (no container needed) --------------------------------------------------


def test_fault_judges_plans_in_order_with_their_preconditions_and_flags_harm() -> None:
    """A Fault accepts the expected steps in order (any of a step's tools), each with a
    precondition naming the state the fault leaves; it rejects other orders, extra steps
    and preconditions that would also hold after the fault healed, and names each harmful
    step; "before_step_on" harm only counts before a step on that unit."""
    fault = Fault(
        5,
        "db-killed",
        "502",
        "app.service",
        "plan",
        expected_steps=(
            Step(START_ISH, "db.service", ("failed",)),
            Step(START_ISH, "app.service", ("inactive", "failed")),
        ),
        harmful=(
            Harmful(ANY, "app.service", before_step_on="db.service"),
            Harmful("restart_unit", "nginx.service"),
        ),
    )
    good = [
        step("restart_unit", "db.service", active_state=["failed"]),
        step("start_unit", "app.service", active_state=["inactive"]),
    ]
    assert fault.plan_problems(good) == []
    problems = fault.plan_problems(list(reversed(good)))
    assert (
        "step 1 (start_unit app.service) is harmful: any tool on app.service before any "
        "step on db.service" in problems
    )
    assert fault.plan_problems([*good, step("restart_unit", "nginx.service")])
    assert fault.plan_problems([good[0], step("start_unit", "app.service")]) == [
        "step 2: no precondition (expect)"
    ]
    assert fault.plan_problems(
        [good[0], step("start_unit", "app.service", active_state=["inactive", "active"])]
    )
    assert fault.note_problems(note("healthy", None, "")) == ["expected a plan, not a note"]


def test_fault_judges_notes_by_their_cause_not_their_words() -> None:
    """A note is right when its structured cause is the fault's (kind and unit) and its
    text states the facts asked for; a note that only names the unit and says "restart"
    is not."""
    fault = Fault(
        3,
        "crash",
        "down",
        "app.service",
        "note",
        cause="config_error",
        cause_unit="app.service",
        note_must_contain=("APP_MODE=broken",),
        harmful=(Harmful(),),
    )
    assert fault.note_problems(note("config_error", "app.service", "sets app_mode=BROKEN")) == []
    assert fault.note_problems(note("unknown", "app.service", "APP_MODE=broken; restart")) == [
        "cause 'unknown', expected 'config_error'"
    ]
    assert fault.note_problems(note("config_error", "db.service", "APP_MODE=broken")) == [
        "cause unit 'db.service', expected 'app.service'"
    ]
    assert fault.note_problems({"text": "app.service: restart it"}) == [
        "the note names no cause",
        "the note does not mention 'APP_MODE=broken'",
    ]
    assert (
        fault.plan_problems([step("start_unit", "x.service")])[0] == "expected a note, not a plan"
    )
