"""The scenario host: a small real stack in the booted container for opsbot's fault scenarios.

Three units, named by a :class:`Stack` so that the whole suite can run a second time renamed:

* ``<db>.service``: a line-protocol "database" (``PING`` -> ``PONG``) on 127.0.0.1:<db_port>;
* ``<app>.service``: an HTTP app on 127.0.0.1:<app_port> whose ``/healthz`` is 200 only when
  it reaches the db within 1 s (503 otherwise); ``BindsTo=`` and ``After=`` the db;
* ``nginx.service``: Debian's nginx, its default site replaced by a reverse proxy from
  port 80 to the app, with its errors sent to the journal through syslog (entries with
  _SYSTEMD_UNIT=nginx.service, SYSLOG_IDENTIFIER=nginx, PRIORITY=3).

Both Python services are stdlib-only scripts (tests/scenarios/services/) run by Debian's
/usr/bin/python3 as Type=notify units.  Their unit files live in /usr/local/lib/systemd/system,
not /etc/systemd/system, so that ``systemctl mask`` (a symlink in /etc) works on them.
Scenario drop-ins go to /etc/systemd/system/<unit>.d/ and :func:`reset` removes them.

Usage::

    install(ct, DEFAULT_STACK)        # once per container; ends healthy
    reset(ct, DEFAULT_STACK)          # before and after each scenario
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from testbed.container import BootedSystemd
from testbed.observe import http_probe, unit_properties, unit_state

SERVICES_SRC = Path(__file__).resolve().parent / "services"
#: Where the services' scripts are installed in the container.
SCRIPT_DIR = "/usr/local/lib/opsbot-scenarios"
#: Where the stack's unit files are installed (a vendor directory: masking works).
UNIT_DIR = "/usr/local/lib/systemd/system"
#: Where scenario drop-ins go (removed by :func:`reset`).
DROPIN_DIR = "/etc/systemd/system"
NGINX_SITE = "/etc/nginx/sites-enabled/default"
PYTHON = "/usr/bin/python3"
HEALTH_TIMEOUT = 2
#: How long :func:`reset` waits for both health endpoints to answer 200.
READY_TIMEOUT = 20.0
# Ports the container already uses: nginx's 80, and PostgreSQL's 5432 (the container boots
# the host's enabled units, which may include postgresql.service).
_TAKEN_PORTS = frozenset({80, 5432})
_RESERVED = ("opsbot", "systemd", "nginx")
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


@dataclass(frozen=True)
class Stack:
    """Names and ports of one scenario stack; the proxy is always Debian's nginx.service."""

    app: str = "app"
    db: str = "db"
    app_port: int = 8080
    db_port: int = 5433
    proxy: str = field(default="nginx", init=False)

    def __post_init__(self) -> None:
        for name in (self.app, self.db):
            if not _NAME.match(name) or name == self.proxy or name.startswith(_RESERVED):
                raise ValueError(f"unusable unit name for the scenario stack: {name!r}")
        if self.app == self.db:
            raise ValueError("app and db need different names")
        ports = {self.app_port, self.db_port}
        if len(ports) != 2 or ports & _TAKEN_PORTS or not all(1024 <= p < 65536 for p in ports):
            raise ValueError(f"unusable ports: app {self.app_port}, db {self.db_port}")

    @property
    def app_unit(self) -> str:
        return f"{self.app}.service"

    @property
    def db_unit(self) -> str:
        return f"{self.db}.service"

    @property
    def proxy_unit(self) -> str:
        return f"{self.proxy}.service"

    @property
    def units(self) -> tuple[str, str, str]:
        """The three units, in start order: db, app, proxy."""
        return (self.db_unit, self.app_unit, self.proxy_unit)

    @property
    def app_health_url(self) -> str:
        return f"http://127.0.0.1:{self.app_port}/healthz"

    @property
    def proxy_health_url(self) -> str:
        return "http://127.0.0.1/healthz"

    @property
    def proxy_url(self) -> str:
        return "http://127.0.0.1/"

    @property
    def health(self) -> dict[str, tuple[str, str]]:
        """opsbot's health endpoints by name: name -> (url, unit)."""
        return {
            "proxy": (self.proxy_health_url, self.proxy_unit),
            self.app: (self.app_health_url, self.app_unit),
        }

    def dropin_dir(self, unit: str) -> str:
        return f"{DROPIN_DIR}/{unit}.d"

    def opsbot_config(self) -> str:
        """/etc/opsbot/opsbot.toml for this stack: the write tools opsbot may use on exactly
        its three units, and the two health endpoints diagnosis may probe."""
        units = ", ".join(f'"{unit}"' for unit in self.units)
        lines = [
            f"# opsbot on the scenario stack: {', '.join(self.units)}",
            "[executor]",
            "# The scenarios break the same units again and again within minutes.",
            "restart_budget = 100",
            "# ... and leave many plans waiting.",
            "max_waiting_plans_per_submitter = 1000",
            "max_waiting_plans = 5000",
            "",
            "[executor.allow]",
            *(
                f"{tool} = [{units}]"
                for tool in ("restart_unit", "start_unit", "reload_unit", "reset_failed_unit")
            ),
        ]
        for name, (url, unit) in self.health.items():
            lines += [
                "",
                f"[diagnose.health.{name}]",
                f'url = "{url}"',
                f'unit = "{unit}"',
                f"timeout_seconds = {HEALTH_TIMEOUT}",
            ]
        return "\n".join(lines) + "\n"


DEFAULT_STACK = Stack()
RENAMED_STACK = Stack(app="api", db="store", app_port=9090, db_port=6544)


class StackError(RuntimeError):
    """The scenario stack could not be installed or brought back to healthy."""


# -- what gets installed ------------------------------------------------------------------


def db_unit_text(stack: Stack) -> str:
    return f"""\
# opsbot scenario stack (tests/scenarios/stack.py): the "database"
[Unit]
Description=Scenario db {stack.db} (PING/PONG on 127.0.0.1:{stack.db_port})

[Service]
Type=notify
Environment=DB_NAME={stack.db} DB_PORT={stack.db_port}
ExecStart={PYTHON} -u {SCRIPT_DIR}/db.py
SyslogIdentifier={stack.db}
Restart=no

[Install]
WantedBy=multi-user.target
"""


def app_unit_text(stack: Stack) -> str:
    return f"""\
# opsbot scenario stack (tests/scenarios/stack.py): the app behind nginx
[Unit]
Description=Scenario app {stack.app} (HTTP on 127.0.0.1:{stack.app_port})
BindsTo={stack.db_unit}
After={stack.db_unit}
# A crash loop (scenario 3's Restart=always) hits the start limit within a second.
StartLimitIntervalSec=30
StartLimitBurst=3

[Service]
Type=notify
Environment=APP_NAME={stack.app} APP_PORT={stack.app_port} APP_MODE=prod
Environment=DB_HOST=127.0.0.1 DB_PORT={stack.db_port}
EnvironmentFile=-/etc/default/{stack.app}
ExecStart={PYTHON} -u {SCRIPT_DIR}/app.py
SyslogIdentifier={stack.app}
Restart=no
RestartSec=100ms

[Install]
WantedBy=multi-user.target
"""


def app_defaults_text(stack: Stack) -> str:
    # No APP_MODE here: an EnvironmentFile= overrides Environment=, drop-ins included.
    return f"""\
# Settings for {stack.app_unit} (opsbot scenario stack)
APP_GREETING="hello from {stack.app}"
"""


def nginx_site_text(stack: Stack) -> str:
    return f"""\
# opsbot scenario stack (tests/scenarios/stack.py): port 80 -> {stack.app} on {stack.app_port}
server {{
    listen 80 default_server;
    server_name _;
    # Errors to the journal, not /var/log/nginx/error.log.  Without nohostname journald
    # cannot parse the header: no SYSLOG_IDENTIFIER, MESSAGE starting "<hostname> nginx: ".
    error_log syslog:server=unix:/dev/log,tag=nginx,nohostname error;

    location / {{
        proxy_pass http://127.0.0.1:{stack.app_port};
        proxy_connect_timeout 2s;
        proxy_read_timeout 3s;
    }}
}}
"""


# -- install, reset, uninstall --------------------------------------------------------------


def install(ct: BootedSystemd, stack: Stack) -> None:
    """Install ``stack`` in the container and bring it up healthy (see :func:`reset`)."""
    for script in ("db.py", "app.py"):
        ct.write_file(f"{SCRIPT_DIR}/{script}", (SERVICES_SRC / script).read_text(), 0o755)
    ct.write_file(f"{UNIT_DIR}/{stack.db_unit}", db_unit_text(stack))
    ct.write_file(f"{UNIT_DIR}/{stack.app_unit}", app_unit_text(stack))
    # Debian ships sites-enabled/default as a symlink; replace it, leave sites-available be.
    ct.run(["rm", "-f", NGINX_SITE])
    reset(ct, stack)  # writes the site


def write_nginx_site(ct: BootedSystemd, stack: Stack) -> None:
    """Write the good proxy site and check the whole nginx config with ``nginx -t``."""
    ct.write_file(NGINX_SITE, nginx_site_text(stack))
    check = ct.run(["nginx", "-t", "-q"], check=False)
    if check.returncode != 0:
        raise StackError(f"the scenario nginx config does not pass nginx -t:\n{check.stderr}")


def reset(ct: BootedSystemd, stack: Stack) -> None:
    """Bring the stack back to healthy whatever a scenario did: remove the scenario drop-ins,
    unmask, rewrite the app's environment file and the nginx site, reset-failed (which also
    clears start-limit counters and NRestarts), restart db and app and reload-or-restart
    nginx, then wait until both health endpoints answer 200."""
    app, db, proxy = stack.app_unit, stack.db_unit, stack.proxy_unit
    ct.run(["rm", "-rf", stack.dropin_dir(app), stack.dropin_dir(db)])
    ct.systemctl("unmask", "--", app, db)
    ct.write_file(f"/etc/default/{stack.app}", app_defaults_text(stack))
    write_nginx_site(ct, stack)
    ct.systemctl("daemon-reload")
    reset_failed(ct, db, app, proxy)
    _kill_orphaned_nginx(ct, proxy)
    # A hung (SIGSTOPped) app is no obstacle: systemd follows SIGTERM with SIGCONT.
    ct.systemctl("restart", "--", db, app)
    ct.systemctl("reload-or-restart", "--", proxy)
    wait_healthy(ct, stack)


def _kill_orphaned_nginx(ct: BootedSystemd, proxy: str) -> None:
    """Kill nginx processes that outlived a stopped nginx.service (they would keep port 80
    and fail its start).  That happens when ``systemctl kill`` could not read the unit's
    cgroup, shared with another bench container (see faults.py).  By PID, in the container."""
    if unit_properties(ct, proxy, ("ActiveState",))["ActiveState"] in ("active", "reloading"):
        return
    pids = ct.run(["pgrep", "--exact", "nginx"], check=False).stdout.split()
    if pids:
        ct.run(["kill", "-KILL", *pids], check=False)


def reset_failed(ct: BootedSystemd, *units: str) -> None:
    """``systemctl reset-failed``: clears a failed state, the start-limit counter and
    NRestarts.  A unit that is not loaded (never started, or garbage-collected) has none."""
    proc = ct.systemctl("reset-failed", "--", *units, check=False)
    problems = [line for line in proc.stderr.splitlines() if not line.endswith(" not loaded.")]
    if proc.returncode != 0 and problems:
        raise StackError(f"systemctl reset-failed {' '.join(units)} failed: {proc.stderr}")


def wait_healthy(ct: BootedSystemd, stack: Stack, timeout: float = READY_TIMEOUT) -> None:
    """Wait until both health endpoints answer 200, or raise :class:`StackError` saying why."""
    try:
        for url in (stack.app_health_url, stack.proxy_health_url):
            ct.wait_for(
                _answers_200(ct, url), timeout=timeout, interval=0.2, what=f"GET {url} -> 200"
            )
    except TimeoutError as exc:
        states = "; ".join(f"{unit}: {unit_state(ct, unit)}" for unit in stack.units)
        raise StackError(f"the scenario stack did not become healthy: {exc} ({states})") from None


def _answers_200(ct: BootedSystemd, url: str) -> Callable[[], bool]:
    return lambda: http_probe(ct, url).status == 200


def uninstall(ct: BootedSystemd, stack: Stack) -> None:
    """Stop ``stack``'s app and db and remove their files (nginx keeps its site until the
    next :func:`install` rewrites it)."""
    app, db = stack.app_unit, stack.db_unit
    ct.systemctl("unmask", "--", app, db)
    ct.systemctl("stop", "--", app, db)
    ct.run(
        [
            "rm",
            "-rf",
            stack.dropin_dir(app),
            stack.dropin_dir(db),
            f"{UNIT_DIR}/{app}",
            f"{UNIT_DIR}/{db}",
            f"/etc/default/{stack.app}",
        ]
    )
    ct.systemctl("daemon-reload")
    reset_failed(ct, app, db)
