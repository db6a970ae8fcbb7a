"""A small fleet for the Ansible tests: booted systemd containers, each in a network namespace
of its own, and a controller that reaches them over real SSH.

Every address lives inside namespaces this module makes (nothing is added to the machine's own
network): a controller namespace holds a bridge (``10.231.0.1/24``); each host's namespace has
one end of a veth pair (``eth0``, ``10.231.0.1N/24``) whose other end is on that bridge. The
containers boot with ``--network-namespace-path=``; their sshd (Debian's, from the host's /)
lets the controller's key in as root. Ansible runs on this machine, inside the controller's
namespace (``ip netns exec``), from the venv's ansible-playbook, with an inventory, ansible.cfg
and known_hosts of the fleet's own.

Usage::

    with Fleet(("web1", "web2", "web3"), collector="collector") as fleet:
        fleet.playbook("fleet-install.yml", "-e", "opsbot_wheelhouse=...")
        fleet["web1"].run(["systemctl", "is-active", "opsbot-executor.socket"])
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from testbed.container import REPO_ROOT, BootedSystemd, _exec

log = logging.getLogger(__name__)

VENV_BIN = Path("/opt/opsbot/venv/bin")
COLLECTION_SRC = REPO_ROOT / "packaging" / "ansible" / "ansible_collections" / "opsbot" / "fleet"
SUBNET = "10.231.0"
CONTROLLER_ADDRESS = f"{SUBNET}.1"
_RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


@dataclass
class FleetHost:
    """One host of the fleet: its inventory name (also its hostname), address and container."""

    name: str
    address: str
    netns: str
    ct: BootedSystemd

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.ct.run(argv, **kwargs)


@dataclass(frozen=True)
class PlaybookRun:
    """What ansible-playbook printed, its exit status, and its PLAY RECAP by host."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def recap(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for line in self.stdout.splitlines():
            m = _RECAP.match(line)
            if m:
                found[m[1]] = {
                    "ok": int(m[2]),
                    "changed": int(m[3]),
                    "unreachable": int(m[4]),
                    "failed": int(m[5]),
                }
        return found

    def changed(self) -> int:
        return sum(host["changed"] for host in self.recap.values())

    def __str__(self) -> str:
        return (
            f"$ {' '.join(self.argv)}  (exit {self.returncode}, {self.seconds:.1f} s)\n"
            f"{self.stdout}\n{self.stderr}"
        )


class Fleet:
    """Hosts (and a journal collector) booted in namespaces of their own; see the module doc."""

    def __init__(self, names: Sequence[str], *, collector: str | None = None) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.controller_netns = f"opsbot-ctl-{self.tag}"
        self.names = list(names)
        self.collector = collector
        self.hosts: dict[str, FleetHost] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="opsbot-fleet-"))
        self._netns: list[str] = []
        #: Variables every playbook run gets (``-e @file``), before its own ``extra``.
        self.vars: dict[str, Any] = {}

    # -- life cycle ------------------------------------------------------------------------

    def __enter__(self) -> Fleet:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getitem__(self, name: str) -> FleetHost:
        return self.hosts[name]

    @property
    def all_names(self) -> list[str]:
        return self.names + ([self.collector] if self.collector else [])

    def start(self) -> None:
        self._controller_network()
        for index, name in enumerate(self.all_names, start=11):
            netns = self._host_network(name, f"{SUBNET}.{index}", index)
            ct = BootedSystemd(
                machine=f"opsbot-fleet-{self.tag}-{name}",
                network_namespace=f"/run/netns/{netns}",
                hostname=name,
            )
            self.hosts[name] = FleetHost(name, f"{SUBNET}.{index}", netns, ct)
        for host in self.hosts.values():
            host.ct.start()
        self._ssh()
        self._ansible_files()

    def close(self) -> None:
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.ct.close()
        for netns in reversed(self._netns):
            _exec(["ip", "netns", "delete", netns], check=False, timeout=30)
        self._netns.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- network -----------------------------------------------------------------------------

    def _controller_network(self) -> None:
        ns = self.controller_netns
        _exec(["ip", "netns", "add", ns])
        self._netns.append(ns)
        ip = ["ip", "-n", ns]
        _exec([*ip, "link", "set", "lo", "up"])
        _exec([*ip, "link", "add", "br0", "type", "bridge"])
        _exec([*ip, "addr", "add", f"{CONTROLLER_ADDRESS}/24", "dev", "br0"])
        _exec([*ip, "link", "set", "br0", "up"])

    def _host_network(self, name: str, address: str, index: int) -> str:
        ns = f"opsbot-{self.tag}-{name}"
        _exec(["ip", "netns", "add", ns])
        self._netns.append(ns)
        ctl = ["ip", "-n", self.controller_netns]
        port = f"vh{index}"
        _exec([*ctl, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _exec([*ctl, "link", "set", port, "master", "br0", "up"])
        ip = ["ip", "-n", ns]
        _exec([*ip, "link", "set", "lo", "up"])
        _exec([*ip, "addr", "add", f"{address}/24", "dev", "eth0"])
        _exec([*ip, "link", "set", "eth0", "up"])
        return ns

    # -- ssh and ansible ---------------------------------------------------------------------

    def _ssh(self) -> None:
        key = self.dir / "id_ed25519"
        _exec(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "opsbot-fleet", "-f", str(key)])
        public = (self.dir / "id_ed25519.pub").read_text()
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{h.address} {h.name}\n" for h in self.hosts.values()
        )
        for host in self.hosts.values():
            host.ct.write_file("/etc/hosts", hosts)
            host.ct.run(["install", "-d", "-m", "0700", "/root/.ssh"])
            host.ct.write_file("/root/.ssh/authorized_keys", public, 0o600)
            host.ct.systemctl("start", "ssh.service")

    def _ansible_files(self) -> None:
        inventory: dict[str, Any] = {
            "all": {
                "vars": {
                    "ansible_user": "root",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_ssh_private_key_file": str(self.dir / "id_ed25519"),
                },
                "children": {
                    "opsbot": {
                        "hosts": {n: {"ansible_host": self.hosts[n].address} for n in self.names}
                    },
                },
            }
        }
        if self.collector:
            inventory["all"]["children"]["opsbot_collector"] = {
                "hosts": {self.collector: {"ansible_host": self.hosts[self.collector].address}}
            }
        self.inventory = self.dir / "inventory.json"
        self.inventory.write_text(json.dumps(inventory, indent=2))
        (self.dir / "ansible.cfg").write_text(
            "[defaults]\n"
            f"collections_path = {self.dir / 'collections'}\n"
            "forks = 8\n"
            "host_key_checking = True\n"
            "nocows = True\n"
            "retry_files_enabled = False\n"
            "interpreter_python = /usr/bin/python3\n"
            f"local_tmp = {self.dir / 'tmp'}\n"
            "[ssh_connection]\n"
            "pipelining = True\n"
            f"control_path_dir = {self.dir / 'cp'}\n"
            "ssh_args = -o ControlMaster=auto -o ControlPersist=120s "
            f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={self.dir / 'known_hosts'}"
            "\n"
        )

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LANG": "C.UTF-8",
            "HOME": str(self.dir),
            "ANSIBLE_CONFIG": str(self.dir / "ansible.cfg"),
            "ANSIBLE_HOME": str(self.dir / ".ansible"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }

    def controller(
        self, argv: Sequence[str], *, timeout: float = 600, cwd: Path | None = None
    ) -> PlaybookRun:
        """Run ``argv`` on this machine inside the controller's namespace (never raises on a
        non-zero exit: the caller reads :class:`PlaybookRun`)."""
        full = ["ip", "netns", "exec", self.controller_netns, *argv]
        started = time.monotonic()
        proc = _exec(
            ["env", "-C", str(cwd or self.dir), *full], check=False, timeout=timeout, env=self.env()
        )
        run = PlaybookRun(
            list(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started
        )
        log.info("%s", run)
        return run

    @property
    def playbooks(self) -> Path:
        """The installed collection's playbooks directory."""
        return self.dir / "collections" / "ansible_collections" / "opsbot" / "fleet" / "playbooks"

    def install_collection(self) -> PlaybookRun:
        """``ansible-galaxy collection install`` of this checkout's collection, as an operator
        installs it on the controller."""
        return self.controller(
            [
                str(VENV_BIN / "ansible-galaxy"),
                "collection",
                "install",
                "--force",
                "-p",
                str(self.dir / "collections"),
                str(COLLECTION_SRC),
            ],
            timeout=300,
        )

    def playbook(
        self, name: str, *args: str, extra: Mapping[str, Any] | None = None, timeout: float = 600
    ) -> PlaybookRun:
        """``ansible-playbook -i INVENTORY ARGS PLAYBOOK``, NAME from the installed collection
        (``extra`` as ``-e @file``)."""
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory)]
        variables = {**self.vars, **(extra or {})}
        if variables:
            path = self.dir / f"extra-{uuid.uuid4().hex[:6]}.json"
            path.write_text(json.dumps(variables))
            argv += ["-e", f"@{path}"]
        # Playbook FQCNs take no dashes: run the installed collection's file, as an operator
        # would (docs/operating.md, "A fleet").
        playbook = name if "/" in name else str(self.playbooks / name)
        return self.controller([*argv, *args, playbook], timeout=timeout)

    def adhoc(self, pattern: str, module: str, args: str, *more: str) -> PlaybookRun:
        argv = [
            str(VENV_BIN / "ansible"),
            "-i",
            str(self.inventory),
            pattern,
            "-m",
            module,
            "-a",
            args,
            *more,
        ]
        return self.controller(argv)


def can_make_netns() -> tuple[bool, str]:
    """Whether this machine lets us make network namespaces and veth pairs (root, iproute2)."""
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    for tool in ("ip", "ssh", "ssh-keygen", "openssl"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed"
    if not Path("/usr/sbin/sshd").exists():
        return False, "sshd is not installed (apt-get install openssh-server)"
    if not Path("/lib/systemd/systemd-journal-remote").exists():
        return (
            False,
            "systemd-journal-remote is not installed (apt-get install systemd-journal-remote)",
        )
    if not (VENV_BIN / "ansible-playbook").exists():
        return False, "ansible-core is not installed in the venv (pip install -e .[test])"
    return True, "ok"
