"""opsbot's Debian package, as an operator of Debian hosts lives it: `packaging/deb/build`
makes opsbot_VERSION_ARCH.deb from the checkout and lintian finds no error in it; on a
systemd of its own, without network and with the host's venv (/opt/opsbot) and the
checkout hidden, so that the package alone is proved, `apt install ./opsbot_*.deb`
enables the sockets, timers and paths and the executor answers on its socket; README's
config step follows and an operator's `opsbot diagnose` reaches a verdict; `apt install`
of the next version while one plan waits and another applies lets that apply finish under
the old code, restarts and names every daemon, and keeps plans, config and secrets; `apt
remove` waits for an apply that runs, then leaves the config and the state and nothing of
opsbot running or listening; `apt purge` leaves nothing of opsbot but its system users,
as Debian keeps them (docs/operating.md, "The Debian package").

The package is built once for the module (about a minute: pip fetches the dependencies
from the package index); the next version is that package repacked with one line added
to shared_io, which every daemon imports, and a later version (seconds, where a second
build would take another minute). One container goes through the whole story, the tests in
this order (each one's docstring says where it starts).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from shared_io.unit_show import parse_timestamp
from testbed.container import REPO_ROOT, BootedSystemd, can_boot
from testbed.host import (
    APPLY_GO,
    DAEMONS,
    SLOW_APPLY,
    SLOW_APPLY_TEXT,
    STEPS_RAN,
    restart_plan,
)
from testbed.readme import OPERATING, block, commands, units_to_enable
from testbed.skips import skip_unless

VENV = "/usr/lib/opsbot/venv"
#: Where the deb is seen inside the container.
DEBS = "/var/tmp/opsbot-debs"
#: The test's own client of the executor socket (run with the package's Python).
TOOLS = "/var/tmp/opsbot-test"
CLIENT_NAME = "socket_client.py"
EXECUTOR_SOCKET = "/run/opsbot/executor.sock"
#: A drop-in that keeps opsbot-verify.service running while the package is removed.
SLOW_VERIFY = "/etc/systemd/system/opsbot-verify.service.d"
#: The host's own service, which fails for opsbot to diagnose.
APP_UNIT = """\
[Unit]
Description=the host's app (tests/integration/test_deb_package.py)

[Service]
ExecStart=/bin/sleep infinity
"""
#: The units install.sh --enable starts: those of units/ with an [Install] section.
ENABLED = units_to_enable()
#: What `apt purge` leaves of opsbot, as docs/operating.md lists it: its system users,
#: then its groups (Debian keeps them: a uid given again would own what they left).
USERS, GROUPS = (line.split() for line in block("deb-purge-leaves", doc=OPERATING).splitlines())
#: The package's code stamp: out of the venv, whose files are dpkg's.
STAMP = "/var/lib/opsbot-code/opsbot-code.json"
#: Where a package's files, its state and what it wrote could be (the hidden /opt is
#: not the package's).
SEARCHED = ("/etc", "/lib/systemd", "/usr/lib", "/usr/bin", "/usr/share", "/var/lib", "/run")


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """opsbot_VERSION_ARCH.deb, built from this checkout by packaging/deb/build (lintian
    is the test's), or the one OPSBOT_TEST_DEB names (built from this checkout before)."""
    given = os.environ.get("OPSBOT_TEST_DEB")
    if given:
        return Path(given).resolve()
    tools = ("dpkg-buildpackage", "dh_virtualenv", "lintian")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    skip_unless(not missing, f"no {', '.join(missing)}: scripts/setup installs them")
    out = tmp_path_factory.mktemp("deb")
    # docs/operating.md's build line (its apt-get line is scripts/setup's).
    (build,) = (
        argv
        for argv in commands(block("deb-build-commands", doc=OPERATING))
        if argv[0] == "packaging/deb/build"
    )
    argv = [str(REPO_ROOT / build[0]), *build[1:], "--output", str(out), "--no-lintian"]
    subprocess.run(argv, check=True, timeout=900)
    (built,) = out.glob("opsbot_*.deb")
    return built


@pytest.fixture(scope="module")
def next_deb(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The next version: ``deb`` repacked as VERSION+next1 with one line added to
    shared_io/__init__.py (every daemon imports it), its md5sums written again."""
    tree = tmp_path_factory.mktemp("next") / "tree"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True, timeout=300)
    control = tree / "DEBIAN" / "control"
    text = control.read_text()
    version = re.search(r"^Version: (.+)$", text, re.MULTILINE)
    assert version is not None, text
    newer = f"{version[1]}+next1"
    control.write_text(text.replace(version[0], f"Version: {newer}"))
    (module,) = tree.glob("usr/lib/opsbot/venv/lib/python3*/site-packages/shared_io/__init__.py")
    module.write_text(module.read_text() + "# the next version\n")
    relative = module.relative_to(tree).as_posix()
    md5sums = tree / "DEBIAN" / "md5sums"
    digest = hashlib.md5(module.read_bytes()).hexdigest()
    md5sums.write_text(
        re.sub(rf"^\w+(  {re.escape(relative)})$", rf"{digest}\1", md5sums.read_text(), flags=re.M)
    )
    out = deb.parent / "next"
    out.mkdir(exist_ok=True)
    built = out / deb.name.replace(f"_{version[1]}_", f"_{newer}_")
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", str(tree), str(built)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    shutil.rmtree(tree)
    return built


@pytest.fixture(scope="module")
def host(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BootedSystemd]:
    """A systemd of its own (no network) that sees the deb at /var/tmp/opsbot-debs and, at
    /opt/opsbot and at the checkout's path, empty directories instead of the host's venv
    and code (the checkout is not mounted either: what runs is the package's); with what
    the host had before opsbot: app.service running, the login alice."""
    ok, reason = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {reason}")
    empty = tmp_path_factory.mktemp("no-opt")
    tools = tmp_path_factory.mktemp("tools")
    shutil.copy(REPO_ROOT / "testbed" / "inside" / "socket_client.py", tools / CLIENT_NAME)
    tools.chmod(0o755)  # the diagnose user runs it
    (tools / CLIENT_NAME).chmod(0o644)
    hidden = [(empty, "/opt/opsbot"), (empty, str(REPO_ROOT))]  # the host's venv, checkout
    with BootedSystemd(
        mount_repo=False, bind_ro=[(deb.parent, DEBS), (tools, TOOLS), *hidden]
    ) as ct:
        ct.write_file("/etc/systemd/system/app.service", APP_UNIT)
        ct.systemctl("daemon-reload")
        ct.systemctl("start", "app.service")
        ct.run(["useradd", "--create-home", "--shell", "/bin/bash", "alice"])
        yield ct


def _apt(ct: BootedSystemd, *args: str) -> str:
    result = ct.run(
        ["apt-get", "-y", *args],
        env={"DEBIAN_FRONTEND": "noninteractive"},
        timeout=300,
    )
    return result.stdout + result.stderr


def _active_units(ct: BootedSystemd) -> list[str]:
    result = ct.systemctl(
        "list-units",
        "opsbot-*",
        "--all",
        "--state=active,activating,reloading",
        "--plain",
        "--no-legend",
    )
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def _opsbot_processes(ct: BootedSystemd) -> list[str]:
    users = ",".join(USERS)
    result = ct.run(["pgrep", "-a", "-u", users], check=False)
    return result.stdout.splitlines()


def _exists(ct: BootedSystemd, path: str) -> bool:
    return ct.run(["test", "-e", path], check=False).returncode == 0


def _opsbot(ct: BootedSystemd, *args: str) -> Any:
    """``opsbot ARGS --json`` as root, its answer parsed."""
    return json.loads(ct.run(["opsbot", *args, "--json"], check=False).stdout)


def _submit(ct: BootedSystemd, plan: dict[str, Any]) -> str:
    """A plan submitted as diagnosis submits it, on the executor's socket; its id."""
    message = json.dumps({"v": 1, "op": "submit", "plan": plan}) + "\n"
    client = f"{TOOLS}/{CLIENT_NAME}"
    proc = ct.run(
        [f"{VENV}/bin/python", client, EXECUTOR_SOCKET], user="opsbot-diagnose", input=message
    )
    return str(json.loads(proc.stdout.splitlines()[0])["plan_id"])


def _state(ct: BootedSystemd, plan_id: str) -> str:
    return str(_opsbot(ct, "show", plan_id)["summary"]["state"])


def _pids(ct: BootedSystemd) -> dict[str, str]:
    return {unit: ct.systemctl("show", "-P", "MainPID", unit).stdout.strip() for unit in DAEMONS}


def _kept(ct: BootedSystemd) -> str:
    """sha256 of every file under /etc/opsbot (the config and root's secrets)."""
    return ct.run(
        ["bash", "-c", "find /etc/opsbot -type f -print0 | sort -z | xargs -0 sha256sum"]
    ).stdout


def _hold_an_apply(ct: BootedSystemd) -> None:
    """opsbot-apply.service started and held before its plan (SLOW_APPLY) until APPLY_GO."""
    ct.write_file(SLOW_APPLY, SLOW_APPLY_TEXT)
    ct.systemctl("daemon-reload")
    ct.systemctl("start", "--no-block", "opsbot-apply.service")
    ct.wait_for(
        lambda: (
            ct.systemctl("is-active", "opsbot-apply.service", check=False).stdout.strip()
            == "activating"
        ),
        what="opsbot-apply.service held",
    )


def _let_go(ct: BootedSystemd, after: int = 2) -> None:
    """The held apply goes on ``after`` seconds from now."""
    ct.run(["rm", "-f", APPLY_GO])
    ct.run(["systemd-run", "--collect", f"--on-active={after}", "touch", APPLY_GO])


def _unhold(ct: BootedSystemd) -> None:
    ct.run(["rm", "-f", SLOW_APPLY, APPLY_GO])
    ct.systemctl("daemon-reload")


def test_the_package_is_lintian_clean(deb: Path) -> None:
    """lintian reports no error in the package; its name is opsbot_VERSION_ARCH.deb, and
    nothing of it lies under /opt (lintian's fatal dir-or-file-in-opt)."""
    assert re.fullmatch(r"opsbot_\d[\w.+~]*_[a-z0-9]+\.deb", deb.name)
    report = subprocess.run(
        ["lintian", "--fail-on", "none", str(deb)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    errors = [line for line in report.splitlines() if line.startswith("E: ")]
    assert errors == [], report
    listing = subprocess.run(
        ["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    assert not re.search(r" \./opt/", listing)


def test_apt_install_enables_the_units_and_the_executor_answers(
    host: BootedSystemd, deb: Path
) -> None:
    """From nothing of opsbot (its venv in /opt hidden): `apt install ./opsbot_*.deb`
    installs from the deb alone (no download), enables and starts the sockets, timers and
    paths, writes the polkit rule, hides the executor's code from diagnosis at the venv's
    real paths; the executor's socket listens and `opsbot plans` gets its answer through
    it, from the package's own venv."""
    assert not _exists(host, "/opt/opsbot/venv")
    _apt(host, "install", f"{DEBS}/{deb.name}")

    enabled = {
        unit: host.systemctl("is-enabled", unit, check=False).stdout.strip() for unit in ENABLED
    }
    assert enabled == dict.fromkeys(ENABLED, "enabled")
    active = set(_active_units(host))
    assert set(ENABLED) <= active
    assert host.run(["test", "-S", EXECUTOR_SOCKET], check=False).returncode == 0

    host.run(["/usr/bin/opsbot", "plans"])
    executor = host.systemctl("show", "-P", "ExecStart", "opsbot-executor.service").stdout
    assert f"{VENV}/bin/opsbot-executor" in executor
    assert _exists(host, "/etc/polkit-1/rules.d/60-opsbot.rules")
    # Diagnosis is kept from the code that changes the host at the venv's real paths.
    hidden = host.systemctl("show", "-P", "InaccessiblePaths", "opsbot-diagnose.service").stdout
    paths = [path.lstrip("-") for path in hidden.split()]
    assert {Path(path).name for path in paths} >= {"plans", "executor_svc", "opsbot-apply"}
    assert [path for path in paths if not _exists(host, path)] == []
    man = host.run(["man", "-w", "opsbot"]).stdout.strip()
    assert man == "/usr/share/man/man8/opsbot.8.gz"


def test_the_readme_config_step_and_a_diagnosis_work(host: BootedSystemd) -> None:
    """After the install: README's config as /etc/opsbot/opsbot.toml, the polkit rule
    written again, alice an operator; `opsbot check-config` exits 0 and alice's `opsbot
    diagnose app` on the killed app.service reaches a verdict through the package's
    diagnose socket, its units sandboxed as the package installed them."""
    host.write_file("/etc/opsbot/opsbot.toml", block("install-config") + "\n")
    host.run(["opsbot", "polkit-rule", "--write"])
    host.run(["usermod", "-aG", "opsbot-operators", "alice"])
    host.run(["opsbot", "check-config"])
    host.systemctl("kill", "--kill-who=main", "-s", "KILL", "app.service")
    host.wait_for(
        lambda: host.systemctl("is-failed", "app.service", check=False).returncode == 0,
        timeout=15,
        what="app.service failed",
    )
    proc = host.run(
        ["opsbot", "diagnose", "app", "--symptom", "the app is down", "--json"],
        user="alice",
        check=False,
        timeout=120,
    )
    try:
        verdict = json.loads(proc.stdout)["verdict"]
    except ValueError:
        pytest.fail(f"no verdict (exit {proc.returncode}): {proc.stdout} {proc.stderr}")
    assert verdict["kind"] in ("plan", "note"), verdict


def test_an_upgrade_waits_for_the_apply_that_runs_then_restarts_and_names_every_daemon(
    host: BootedSystemd, deb: Path, next_deb: Path
) -> None:
    """After the diagnosis, the four daemons running: one plan waits for approval, another
    is approved and its apply runs (held by a drop-in) when the next version is installed
    with `apt-get install`. With OPSBOT_APPLY_WAIT=1 the preinst refuses and nothing
    changes (the old version, the same stamp and daemons, the apply's triggers back). With
    its default wait it says it waits, the apply finishes under the old code (before the
    code changed), the postinst restarts the four daemons and names them, the waiting plan
    waits on, the config and secrets are the same, and check-config names no daemon that
    runs older code."""
    ct = host
    ct.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer")
    ct.systemctl("start", *DAEMONS)
    waiting = _submit(ct, {**restart_plan("app.service"), "goal": "app.service, later"})
    applying = _submit(ct, restart_plan("app.service"))
    sha = _opsbot(ct, "show", applying)["summary"]["sha256"]
    ct.run(["opsbot", "approve", applying, "--sha256", str(sha)[:16]])
    waiting_state = _state(ct, waiting)
    kept = _kept(ct)
    before = _pids(ct)
    stamp_before = ct.run(["cat", STAMP]).stdout
    ct.systemctl("start", "opsbot-apply.path", "opsbot-apply.timer")
    _hold_an_apply(ct)
    install = ["apt-get", "-y", "-o", "Dpkg::Options::=--force-confold", "install"]
    try:
        refused = ct.run(
            [*install, f"{DEBS}/next/{next_deb.name}"],
            env={"DEBIAN_FRONTEND": "noninteractive", "OPSBOT_APPLY_WAIT": "1"},
            check=False,
            timeout=300,
        )
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0, said
        assert "still runs after 1s, so nothing was changed" in said, said
        version = ct.run(["dpkg-query", "-W", "-f", "${Version} ${Status}", "opsbot"]).stdout
        assert version == f"{deb.name.split('_')[1]} install ok installed", version
        assert ct.run(["cat", STAMP]).stdout == stamp_before
        assert _pids(ct) == before
        for trigger in ("opsbot-apply.path", "opsbot-apply.timer"):
            assert ct.systemctl("is-active", trigger, check=False).stdout.strip() == "active"

        _let_go(ct)
        done = ct.run(
            [*install, f"{DEBS}/next/{next_deb.name}"],
            env={"DEBIAN_FRONTEND": "noninteractive"},
            check=False,
            timeout=300,
        )
    finally:
        _unhold(ct)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "opsbot-apply.service runs a plan: waiting up to 600s" in said, said
    assert "opsbot: restarting what ran the old code: " + " ".join(DAEMONS) in said, said

    result, exited = (
        ct.systemctl(
            "show", "--timestamp=us+utc", "-P", name, "opsbot-apply.service"
        ).stdout.strip()
        for name in ("Result", "ExecMainExitTimestamp")
    )
    assert result == "success", result
    apply_ended = parse_timestamp(exited)
    stamp = json.loads(ct.run(["cat", STAMP]).stdout)
    replaced = datetime.fromisoformat(stamp["parts"]["shared_io"]["changed_at"])
    assert apply_ended is not None and apply_ended < replaced, (exited, replaced)
    ct.wait_for(lambda: _state(ct, applying) in STEPS_RAN, what=f"plan {applying} applied")
    assert _state(ct, waiting) == waiting_state
    after = _pids(ct)
    assert all(after[unit] not in ("0", before[unit]) for unit in DAEMONS), (before, after)
    assert _kept(ct) == kept
    code = _opsbot(ct, "check-config")["code"]
    assert [d["unit"] for d in code["daemons"] if d["status"] == "older"] == [], code
    for trigger in ("opsbot-apply.path", "opsbot-apply.timer"):
        assert ct.systemctl("is-active", trigger, check=False).stdout.strip() == "active"
    assert not _exists(ct, "/run/opsbot-apply-held")
    version = ct.run(["dpkg-query", "-W", "-f", "${Version}", "opsbot"]).stdout
    assert version.endswith("+next1"), version


def test_apt_remove_stops_everything_and_keeps_config_and_state(host: BootedSystemd) -> None:
    """After the upgrade: `apt remove opsbot` waits for the apply that runs (it restarts
    app.service, as approved), then stops every unit, a service that runs too (no opsbot
    process, no socket listening), removes the polkit rule, and keeps the config, a secret
    and the state."""
    host.write_file("/etc/opsbot/totp/alice", "JBSWY3DPEHPK3PXP\n", mode=0o600)
    host.run(["touch", "/var/lib/opsbot/kept-by-remove"])
    # A oneshot that runs when the package goes: no socket or timer stopping stops it.
    host.write_file(f"{SLOW_VERIFY}/90-test-slow.conf", "[Service]\nExecStartPre=sleep 600\n")
    host.systemctl("daemon-reload")
    host.systemctl("start", "--no-block", "opsbot-verify.service")
    host.wait_for(lambda: "opsbot-verify.service" in _active_units(host), what="verify runs")
    # An approved plan whose apply runs (held) when the package goes.
    host.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer")
    plan_id = _submit(host, {**restart_plan("app.service"), "goal": "app.service, at remove"})
    sha = _opsbot(host, "show", plan_id)["summary"]["sha256"]
    host.run(["opsbot", "approve", plan_id, "--sha256", str(sha)[:16]])
    app_before = host.systemctl("show", "-P", "InvocationID", "app.service").stdout
    _hold_an_apply(host)
    try:
        _let_go(host)
        said = _apt(host, "remove", "opsbot")
    finally:
        _unhold(host)
    host.run(["rm", "-r", SLOW_VERIFY])
    assert "opsbot-apply.service runs a plan: waiting up to 600s" in said, said
    assert host.systemctl("show", "-P", "InvocationID", "app.service").stdout != app_before

    assert _active_units(host) == []
    assert _opsbot_processes(host) == []
    assert not _exists(host, EXECUTOR_SOCKET)
    assert not _exists(host, "/etc/polkit-1/rules.d/60-opsbot.rules")
    for kept in (
        "/etc/opsbot/opsbot.toml",
        "/etc/opsbot/totp/alice",
        "/var/lib/opsbot/kept-by-remove",
    ):
        assert _exists(host, kept), kept
    status = host.run(["dpkg-query", "-W", "-f", "${Status}", "opsbot"]).stdout
    assert status == "deinstall ok config-files"


def test_apt_purge_leaves_only_the_system_users(host: BootedSystemd) -> None:
    """After the remove: `apt purge opsbot` removes the config, the secrets, the state and
    every file of opsbot's; what is left is what docs/operating.md lists, its system
    users and groups."""
    _apt(host, "purge", "opsbot")

    found = host.run(["find", *SEARCHED, "-xdev", "-name", "*opsbot*"], check=False).stdout
    assert found.splitlines() == []
    status = host.run(["dpkg-query", "-W", "-f", "${Status}", "opsbot"], check=False)
    assert status.returncode != 0 or "not-installed" in status.stdout
    for user in USERS:
        assert host.run(["getent", "passwd", user], check=False).returncode == 0, user
    for group in GROUPS:
        assert host.run(["getent", "group", group], check=False).returncode == 0, group
