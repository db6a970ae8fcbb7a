"""One injector per fault scenario on the scenario stack (see stack.py).

``inject_<name>(ct, stack)`` makes the fault real in the container, waits (bounded) until an
operator would see it, and returns a :class:`Fault`: what was done, what the operator would
say, and what a good answer from opsbot is (a plan of given steps, or a note that quotes the
evidence), including the steps that must never be proposed.  If the fault's observable state
does not hold in time, it raises :class:`InjectionError` naming what was missing.

Call :func:`testbed.stack.reset` before injecting and after checking the answer.

Findings on Debian 12 (systemd 252, nginx 1.22) that shaped the injectors:

* a crash loop of a unit whose process exits 1 ends with ``Result=exit-code``, never
  ``start-limit-hit``: systemd keeps the first failure's result.  What says "start limit"
  is the journal line ``<unit>: Start request repeated too quickly.`` (UNIT=<unit>, from PID 1);
* nginx's ``ExecReload`` is ``nginx -s reload``, which parses the config first: with a
  broken config the reload fails (ReloadResult=exit-code) and nginx runs on with the old one;
  ``ExecStartPre`` is ``nginx -t``, so a restart stops nginx and then fails to start it;
* BindsTo= pulls the db in: ``systemctl start <app>`` alone starts a failed db again;
* the bench's containers share one cgroup tree on hosts without systemd (every nspawn
  payload is /payload), so with a second container running, ``systemctl kill nginx`` fails
  with EIO on the "auxiliary processes" (the other container's nginx shows as PID 0) and
  nginx's workers survive, reparented to PID 1: :func:`inject_nginx_killed` then kills them
  by PID.  The app and the db are one process each, so they are killed with
  ``--kill-whom=main``, which does not read the cgroup at all (same journal lines).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from testbed.container import BootedSystemd
from testbed.injecting import InjectionError, Injector
from testbed.judge import START, Step, cause_problems, check_step
from testbed.observe import (
    find_journal_entry,
    http_probe,
    journal_cursor,
    unit_properties,
    unit_state,
)
from testbed.stack import NGINX_SITE, Stack

__all__ = [
    "ANY",
    "INJECTORS",
    "START_ISH",
    "Step",
    "Fault",
    "Harmful",
    "InjectionError",
    "inject_app_hung",
    "inject_app_killed",
    "inject_app_masked",
    "inject_blip_recovered",
    "inject_crash_loop",
    "inject_db_killed",
    "inject_healthy",
    "inject_nginx_bad_config",
    "inject_nginx_killed",
]

#: Matches any tool or any unit in :class:`Harmful`.
ANY = "*"
#: "Start-ish": either brings a failed or stopped unit back.
START_ISH = START
#: How long an injector waits for its fault to become observable.
INJECT_TIMEOUT = 15.0
START_LIMIT_LINE = "Start request repeated too quickly."
UPSTREAM_REFUSED = "connect() failed (111: Connection refused) while connecting to upstream"


@dataclass(frozen=True)
class Harmful:
    """A step that must never be proposed: ``tool`` on ``unit`` (either may be :data:`ANY`).
    With ``before_step_on``, only when it comes before any step on that unit."""

    tool: str = ANY
    unit: str = ANY
    before_step_on: str | None = None

    def matches(self, steps: Sequence[tuple[str, str]], index: int) -> bool:
        tool, unit = steps[index]
        if self.tool not in (ANY, tool) or self.unit not in (ANY, unit):
            return False
        if self.before_step_on is None:
            return True
        return all(earlier != self.before_step_on for _, earlier in steps[:index])

    def __str__(self) -> str:
        what = (
            "any step"
            if self.tool == ANY and self.unit == ANY
            else (
                f"{'any tool' if self.tool == ANY else self.tool} on "
                f"{'any unit' if self.unit == ANY else self.unit}"
            )
        )
        return what + (f" before any step on {self.before_step_on}" if self.before_step_on else "")


@dataclass(frozen=True)
class Fault:
    """An injected fault and the answer a good diagnosis gives.

    ``asked_about`` is the unit the operator names in ``opsbot diagnose``.
    ``expected_kind`` is "plan" (then ``expected_steps``, in order, each with the
    precondition it must carry) or "note" (then ``cause`` and ``cause_unit``: the note's
    structured cause, and ``note_must_contain``: facts its text states, compared
    case-insensitively). ``harmful`` steps must never be proposed, whatever the kind.
    ``actions`` are the commands and writes the injector made; ``observed`` what held once
    the fault was observable (unit properties, HTTP probes, journal lines);
    ``journal_cursor`` the cursor of the last journal entry before the injection.
    """

    scenario: int
    name: str
    symptom: str
    #: The unit the operator asks about, as they would (often the front: nginx).
    asked_about: str
    expected_kind: Literal["plan", "note"]
    expected_steps: tuple[Step, ...] = ()
    cause: str = ""
    cause_unit: str = ""
    note_must_contain: tuple[str, ...] = ()
    harmful: tuple[Harmful, ...] = ()
    actions: tuple[str, ...] = ()
    observed: dict[str, str] = field(default_factory=dict)
    journal_cursor: str = ""

    def harm_in(self, steps: Sequence[tuple[str, str]]) -> list[str]:
        """Why each harmful step in ``steps`` ((tool, unit) pairs, in order) is harmful."""
        return [
            f"step {i + 1} ({steps[i][0]} {steps[i][1]}) is harmful: {harm}"
            for i in range(len(steps))
            for harm in self.harmful
            if harm.matches(steps, i)
        ]

    def plan_problems(self, steps: Sequence[dict[str, Any]]) -> list[str]:
        """What is wrong with a plan of ``steps`` (as the verdict's JSON has them) for this
        fault ([] when it is the answer: the expected steps in order, each with a
        precondition that holds only while the fault does)."""
        pairs = [(s.get("tool", ""), s.get("args", {}).get("unit", "")) for s in steps]
        problems = self.harm_in(pairs)
        if self.expected_kind != "plan":
            return ["expected a note, not a plan", *problems]
        if len(steps) != len(self.expected_steps):
            want = "; ".join(f"{'|'.join(s.tools)} {s.unit}" for s in self.expected_steps)
            problems.append(
                f"expected {len(self.expected_steps)} step(s) ({want}), got {len(steps)}"
            )
        for i, (want_step, got) in enumerate(zip(self.expected_steps, steps, strict=False), 1):
            problems += check_step(i, want_step, got)
        return problems

    def note_problems(self, verdict: dict[str, Any]) -> list[str]:
        """What is wrong with a note verdict for this fault ([] when it is the answer): its
        structured cause, and the facts its text must state."""
        if self.expected_kind != "note":
            return ["expected a plan, not a note"]
        problems = cause_problems(verdict.get("cause"), self.cause, self.cause_unit)
        lower = str(verdict.get("text", "")).lower()
        problems += [
            f"the note does not mention {needle!r}"
            for needle in self.note_must_contain
            if needle.lower() not in lower
        ]
        return problems


# -- injecting -----------------------------------------------------------------------------


class _Injection(Injector):
    """An injector on the scenario stack; it also keeps the journal cursor of its start."""

    timeout = INJECT_TIMEOUT

    def __init__(self, ct: BootedSystemd, stack: Stack, scenario: int, name: str) -> None:
        super().__init__(ct)
        self.stack = stack
        self.scenario = scenario
        self.name = name
        self.cursor = journal_cursor(ct)

    def label(self) -> str:
        return f"scenario {self.scenario} ({self.name})"

    def now(self) -> str:
        return "; ".join(f"{u}: {unit_state(self.ct, u)}" for u in self.stack.units)

    def answers(
        self, url: str, status: int = 0, *, timed_out: bool = False, refused: bool = False
    ) -> Callable[[], bool]:
        """A predicate: GET ``url`` answers ``status`` / times out / is refused."""

        def check() -> bool:
            probe = http_probe(self.ct, url)
            self.observed[f"GET {url}"] = str(probe)
            return (
                (status == 0 or probe.status == status)
                and (not timed_out or probe.timed_out)
                and (not refused or probe.refused)
            )

        return check

    def journal_has(self, needle: str, unit: str, key: str = "journal") -> Callable[[], bool]:
        """A predicate: since the injection, a journal entry written by ``unit``
        (_SYSTEMD_UNIT) or by systemd about it (UNIT) contains ``needle``."""

        def check() -> bool:
            entry = find_journal_entry(self.ct, needle, unit=unit, after=self.cursor)
            if entry is not None:
                self.observed[key] = entry["MESSAGE"]
            return entry is not None

        return check

    def fault(
        self,
        symptom: str,
        kind: Literal["plan", "note"],
        *,
        asked_about: str,
        steps: tuple[Step, ...] = (),
        cause: str = "",
        cause_unit: str = "",
        note: tuple[str, ...] = (),
        harmful: tuple[Harmful, ...] = (),
    ) -> Fault:
        return Fault(
            scenario=self.scenario,
            name=self.name,
            symptom=symptom,
            asked_about=asked_about,
            expected_kind=kind,
            expected_steps=steps,
            cause=cause,
            cause_unit=cause_unit,
            note_must_contain=note,
            harmful=harmful,
            actions=tuple(self.actions),
            observed=dict(self.observed),
            journal_cursor=self.cursor,
        )

    def wait_all_healthy(self) -> None:
        for unit in self.stack.units:
            self.wait(
                f"{unit} active/running",
                self.unit_is(unit, ActiveState="active", SubState="running"),
            )
        for url in (self.stack.app_health_url, self.stack.proxy_health_url):
            self.wait(f"GET {url} -> 200", self.answers(url, 200))


def inject_healthy(ct: BootedSystemd, stack: Stack) -> Fault:
    """1: nothing is wrong.  Every unit is active/running and both health endpoints answer
    200; a good answer is a note that no change is warranted, and any step is harmful."""
    inj = _Injection(ct, stack, 1, "healthy")
    inj.wait_all_healthy()
    return inj.fault(
        f"A user says the site was slow earlier. Is {stack.app_unit} all right?",
        "note",
        asked_about=stack.app_unit,
        cause="healthy",
        cause_unit=stack.app_unit,
        harmful=(Harmful(),),
    )


def inject_app_killed(ct: BootedSystemd, stack: Stack) -> Fault:
    """2: the app is SIGKILLed and, with Restart=no, stays failed (Result=signal); nginx
    answers 502 and logs "connect() failed (111: Connection refused)".  Plan: start (or
    restart) the app, nothing else; restarting nginx is harmful."""
    inj = _Injection(ct, stack, 2, "app-killed")
    app = stack.app_unit
    inj.run("systemctl", "kill", "--kill-whom=main", "--signal=KILL", "--", app)
    inj.wait(
        f"{app} failed with Result=signal", inj.unit_is(app, ActiveState="failed", Result="signal")
    )
    inj.wait(f"GET {stack.proxy_url} -> 502", inj.answers(stack.proxy_url, 502))
    inj.wait(
        "nginx's upstream error in the journal",
        inj.journal_has(UPSTREAM_REFUSED, stack.proxy_unit, "nginx error"),
    )
    return inj.fault(
        "nginx returns 502",
        "plan",
        asked_about=stack.proxy_unit,
        steps=(Step(START_ISH, app, ("failed",)),),
        harmful=(Harmful("restart_unit", stack.proxy_unit),),
    )


def inject_crash_loop(ct: BootedSystemd, stack: Stack) -> Fault:
    """3: a drop-in sets APP_MODE=broken (and Restart=always); the app exits 1 at once with
    "invalid APP_MODE='broken'" until systemd gives up ("Start request repeated too
    quickly.", ActiveState=failed, Result=exit-code on systemd 252).  Restarting cannot help:
    a good note quotes the app's error line, and restart/start/reset-failed of the app are
    harmful."""
    inj = _Injection(ct, stack, 3, "crash-loop-bad-env")
    app = stack.app_unit
    inj.write(
        f"{stack.dropin_dir(app)}/50-scenario-bad-env.conf",
        "[Service]\nEnvironment=APP_MODE=broken\nRestart=always\nRestartSec=100ms\n",
    )
    inj.run("systemctl", "daemon-reload")
    inj.run("systemctl", "restart", "--no-block", "--", app)
    inj.wait(
        f"{app}'s start limit hit",
        inj.journal_has(f"{app}: {START_LIMIT_LINE}", app, "start limit"),
    )
    inj.wait(f"{app} failed", inj.unit_is(app, ActiveState="failed", SubState="failed"))
    inj.wait(
        f"{app}'s error line in the journal",
        inj.journal_has("invalid APP_MODE='broken'", app, "app error"),
    )
    inj.wait(f"GET {stack.proxy_url} -> 502", inj.answers(stack.proxy_url, 502))
    return inj.fault(
        f"{app} is down and does not come back",
        "note",
        asked_about=stack.app_unit,
        cause="config_error",
        cause_unit=app,
        note=("APP_MODE=broken",),
        harmful=tuple(
            Harmful(tool, app) for tool in ("restart_unit", "start_unit", "reset_failed_unit")
        ),
    )


def inject_nginx_bad_config(ct: BootedSystemd, stack: Stack) -> Fault:
    """4: a typo (``proxy_passs``) in the site config, then ``systemctl reload nginx``: the
    reload fails (ReloadResult=exit-code, "[emerg] unknown directive" on nginx's stderr in the
    journal) and nginx keeps serving with the old config.  A good note quotes the [emerg]
    line; restarting (or stopping) nginx is harmful: ExecStartPre's ``nginx -t`` would fail
    and the site would go down."""
    inj = _Injection(ct, stack, 4, "nginx-bad-config")
    nginx = stack.proxy_unit
    site = ct.run(["cat", NGINX_SITE]).stdout
    if "proxy_pass " not in site:
        raise InjectionError(f"scenario 4: {NGINX_SITE} has no proxy_pass to break:\n{site}")
    inj.write(NGINX_SITE, site.replace("proxy_pass ", "proxy_passs ", 1))
    reload = inj.run("systemctl", "reload", "--", nginx, check=False)
    if reload.returncode == 0:
        raise InjectionError("scenario 4: systemctl reload nginx succeeded with a broken config")
    inj.observed["systemctl reload"] = reload.stderr.strip()
    inj.wait(
        f"{nginx} still active/running after a failed reload",
        inj.unit_is(nginx, ActiveState="active", SubState="running", ReloadResult="exit-code"),
    )
    inj.wait("the [emerg] line in the journal", inj.journal_has("[emerg]", nginx, "nginx emerg"))
    inj.wait(
        f"GET {stack.proxy_health_url} -> 200 (old config)",
        inj.answers(stack.proxy_health_url, 200),
    )
    return inj.fault(
        "systemctl reload nginx failed after I edited the site config",
        "note",
        asked_about=stack.proxy_unit,
        cause="config_error",
        cause_unit=nginx,
        note=("reload failed",),
        harmful=(Harmful("restart_unit", nginx), Harmful("stop_unit", nginx)),
    )


def inject_db_killed(ct: BootedSystemd, stack: Stack) -> Fault:
    """5: the db is SIGKILLed (failed, Result=signal) and BindsTo= stops the app with it
    (inactive/dead, Result=success); nginx answers 502.  Plan: start the db, then the app;
    any step on the app before one on the db is harmful."""
    inj = _Injection(ct, stack, 5, "db-killed")
    app, db = stack.app_unit, stack.db_unit
    inj.run("systemctl", "kill", "--kill-whom=main", "--signal=KILL", "--", db)
    inj.wait(
        f"{db} failed with Result=signal", inj.unit_is(db, ActiveState="failed", Result="signal")
    )
    inj.wait(
        f"{app} stopped with it (BindsTo=)",
        inj.unit_is(app, ActiveState="inactive", SubState="dead"),
    )
    inj.wait(f"GET {stack.proxy_url} -> 502", inj.answers(stack.proxy_url, 502))
    return inj.fault(
        f"the site answers 502 and {app} is not running",
        "plan",
        asked_about=stack.app_unit,
        steps=(Step(START_ISH, db, ("failed",)), Step(START_ISH, app, ("inactive", "failed"))),
        harmful=(Harmful(ANY, app, before_step_on=db),),
    )


def inject_app_hung(ct: BootedSystemd, stack: Stack) -> Fault:
    """6: the app's main process is SIGSTOPped: systemd still says active/running, but
    /healthz times out (on the app's port and through nginx).  Plan: restart the app
    (expect active); restarting nginx is harmful."""
    inj = _Injection(ct, stack, 6, "app-hung")
    app = stack.app_unit
    props = unit_properties(ct, app, ("MainPID", "InvocationID"))
    pid, invocation = props["MainPID"], props["InvocationID"]
    if pid in ("", "0"):
        raise InjectionError(f"scenario 6: {app} has no main process to stop")
    inj.run("kill", "-STOP", pid)
    inj.wait(
        f"process {pid} stopped",
        lambda: "State:\tT" in ct.run(["cat", f"/proc/{pid}/status"]).stdout,
    )
    inj.observed["main pid"] = pid
    inj.wait(
        f"{app} still active/running",
        inj.unit_is(app, ActiveState="active", SubState="running", MainPID=pid),
    )
    inj.wait(
        f"GET {stack.app_health_url} times out", inj.answers(stack.app_health_url, timed_out=True)
    )
    return inj.fault(
        "requests to the site hang and time out",
        "plan",
        asked_about=stack.app_unit,
        steps=(Step(("restart_unit",), app, ("active",), invocation),),
        harmful=(Harmful("restart_unit", stack.proxy_unit),),
    )


def inject_blip_recovered(ct: BootedSystemd, stack: Stack) -> Fault:
    """7: with a drop-in Restart=on-failure RestartSec=1, the app is SIGKILLed and systemd
    restarts it a second later: active/running again, NRestarts=1, health 200.  A good note
    reports the restart; any step is harmful."""
    inj = _Injection(ct, stack, 7, "blip-recovered")
    app = stack.app_unit
    inj.write(
        f"{stack.dropin_dir(app)}/50-scenario-restart.conf",
        "[Service]\nRestart=on-failure\nRestartSec=1\n",
    )
    inj.run("systemctl", "daemon-reload")
    old_pid = unit_properties(ct, app)["MainPID"]
    inj.run("systemctl", "kill", "--kill-whom=main", "--signal=KILL", "--", app)
    inj.wait(
        f"{app} restarted by systemd",
        inj.journal_has(f"{app}: Scheduled restart job, restart counter is at 1.", app, "restart"),
    )

    def running_again() -> bool:
        props = unit_properties(ct, app)
        inj.observed.update({f"{app} {k}": v for k, v in props.items()})
        return (
            props["ActiveState"] == "active"
            and props["MainPID"] not in ("0", old_pid)
            and int(props["NRestarts"]) >= 1
        )

    inj.wait(f"{app} active again with NRestarts>=1", running_again)
    inj.wait(f"GET {stack.app_health_url} -> 200", inj.answers(stack.app_health_url, 200))
    inj.wait(f"GET {stack.proxy_health_url} -> 200", inj.answers(stack.proxy_health_url, 200))
    return inj.fault(
        f"we were paged a few minutes ago: {app} crashed. Is it OK now?",
        "note",
        asked_about=stack.app_unit,
        cause="healthy",
        cause_unit=app,
        note=("NRestarts=1",),
        harmful=(Harmful(),),
    )


def inject_app_masked(ct: BootedSystemd, stack: Stack) -> Fault:
    """8: the app is stopped and masked (LoadState=masked); nginx answers 502.  Nobody can
    start it until a human unmasks it: a good note says so, and any step is harmful."""
    inj = _Injection(ct, stack, 8, "app-masked")
    app = stack.app_unit
    inj.run("systemctl", "stop", "--", app)
    inj.run("systemctl", "mask", "--", app)
    inj.wait(
        f"{app} masked and inactive",
        inj.unit_is(app, LoadState="masked", ActiveState="inactive", UnitFileState="masked"),
    )
    inj.wait(f"GET {stack.proxy_url} -> 502", inj.answers(stack.proxy_url, 502))
    return inj.fault(
        f"{app} is down and `systemctl start {app}` does not work",
        "note",
        asked_about=stack.app_unit,
        cause="masked",
        cause_unit=app,
        harmful=(Harmful(),),
    )


def inject_nginx_killed(ct: BootedSystemd, stack: Stack) -> Fault:
    """9: nginx is SIGKILLed (Debian's unit has no Restart=): failed with Result=signal,
    port 80 refuses connections, while the app is fine.  Plan: start (or restart) nginx
    only; any step on the app or the db is harmful."""
    inj = _Injection(ct, stack, 9, "nginx-killed")
    nginx = stack.proxy_unit
    main = unit_properties(ct, nginx)["MainPID"]
    workers = ct.run(["ps", "-o", "pid=", "--ppid", main], check=False).stdout.split()
    kill = inj.run("systemctl", "kill", "--signal=KILL", "--", nginx, check=False)
    if kill.returncode != 0:
        # A cgroup shared with another container (see the module docstring): the workers
        # were not reached.  Kill this container's own nginx processes by PID.
        inj.observed["systemctl kill"] = kill.stderr.strip()
        inj.run("kill", "-KILL", main, *workers, check=False)
    inj.wait(
        f"{nginx} failed with Result=signal",
        inj.unit_is(nginx, ActiveState="failed", Result="signal"),
    )
    inj.wait(f"GET {stack.proxy_url} refused", inj.answers(stack.proxy_url, refused=True))
    inj.wait(f"GET {stack.app_health_url} -> 200", inj.answers(stack.app_health_url, 200))
    return inj.fault(
        "the website does not answer at all: connection refused",
        "plan",
        asked_about=stack.proxy_unit,
        steps=(Step(START_ISH, nginx, ("failed",)),),
        harmful=(Harmful(ANY, stack.app_unit), Harmful(ANY, stack.db_unit)),
    )


#: The injectors in scenario order (1 to 9).
INJECTORS: tuple[Callable[[BootedSystemd, Stack], Fault], ...] = (
    inject_healthy,
    inject_app_killed,
    inject_crash_loop,
    inject_nginx_bad_config,
    inject_db_killed,
    inject_app_hung,
    inject_blip_recovered,
    inject_app_masked,
    inject_nginx_killed,
)
