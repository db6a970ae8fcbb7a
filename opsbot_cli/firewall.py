"""``opsbot firewall [--write]``: the IP filters systemd puts on opsbot's two units that
speak IP, generated from the config: opsbot-web (its socket and service:
``[web] ip_allow``/``ip_deny``, by default loopback only, where a reverse proxy connects
from) and opsbot-notify (``[notify] ip_allow``: where its channels live; nothing else);
and where the page listens (``[web] listen``): with ``"unix"``, opsbot-web.socket's
drop-in ``50-opsbot-listen.conf`` replaces 127.0.0.1:8750 with /run/opsbot/web.sock,
mode 0660, group ``[web] proxy_group``.

The filters are systemd's own (IPAddressAllow=/IPAddressDeny=, eBPF on the unit's
cgroup), written as drop-ins ``50-opsbot-ip.conf``; ``--write`` replaces them (root:root
0644) and reloads systemd. Units that must reach nothing have no network at all instead
(PrivateNetwork=yes in their unit files).
"""

from __future__ import annotations

import argparse
import grp
import os
from pathlib import Path

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, require_root
from shared_io.config import load_config
from shared_io.files import write_atomic
from shared_io.paths import Paths
from shared_io.run import run as run_program
from shared_schema import OpsbotConfig
from shared_schema.config import WEB_SOCKET, WebSettings

UNIT_DIR = Path("/etc/systemd/system")
DROPIN = "50-opsbot-ip.conf"
LISTEN_DROPIN = "50-opsbot-listen.conf"
HEADER = "# Written by `opsbot firewall --write` from {config}; edit the config, not this file.\n"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub,
        "firewall",
        "print (or --write) the IP filters of opsbot-web and opsbot-notify, and where the "
        "page listens, from the config",
    )
    p.add_argument(
        "--write", action="store_true", help=f"write the drop-ins under {UNIT_DIR} and reload"
    )
    p.add_argument("--json", action="store_true", help="the drop-ins and where they go, as JSON")
    p.set_defaults(func=run)


def _section(kind: str, allow: list[str], deny: list[str]) -> str:
    # An empty assignment first resets what the unit file says, so the config is the list.
    lines = [f"[{kind}]", "IPAddressAllow="]
    lines += [f"IPAddressAllow={a}" for a in allow]
    lines.append("IPAddressDeny=")
    lines += [f"IPAddressDeny={d}" for d in deny]
    return "\n".join(lines) + "\n"


def _listen(web: WebSettings) -> str:
    if web.listen == "tcp":
        return '# [web] listen = "tcp": the unit\'s own ListenStream= (127.0.0.1:8750).\n'
    return (
        "[Socket]\n"
        "ListenStream=\n"
        f"ListenStream={WEB_SOCKET}\n"
        "SocketUser=root\n"
        f"SocketGroup={web.proxy_group}\n"
        "SocketMode=0660\n"
    )


def render(config: OpsbotConfig, source: Path) -> dict[str, str]:
    """Each drop-in's path and text."""
    header = HEADER.format(config=source)
    web = _section("Socket", config.web.ip_allow, config.web.ip_deny)
    web_service = _section("Service", config.web.ip_allow, config.web.ip_deny)
    notify = _section("Service", config.notify.ip_allow, ["any"])
    return {
        str(UNIT_DIR / "opsbot-web.socket.d" / DROPIN): header + web,
        str(UNIT_DIR / "opsbot-web.socket.d" / LISTEN_DROPIN): header + _listen(config.web),
        str(UNIT_DIR / "opsbot-web.service.d" / DROPIN): header + web_service,
        str(UNIT_DIR / "opsbot-notify.service.d" / DROPIN): header + notify,
    }


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def current(dropins: dict[str, str]) -> bool:
    """Whether every drop-in on disk says what the config says."""
    for path, text in dropins.items():
        try:
            if Path(path).read_text() != text:
                return False
        except OSError:
            return False
    return True


def run(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    dropins = render(config, paths.config)
    if args.write:
        require_root("firewall --write")
        group = config.web.proxy_group
        if group is not None and not _group_exists(group):
            raise ConsoleError(
                f"[web] proxy_group: no group {group!r} on this host",
                hint="install the reverse proxy first, or name the group it runs as",
            )
        for path, text in dropins.items():
            try:
                os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                write_atomic(Path(path), text.encode(), mode=0o644)
            except OSError as exc:
                raise ConsoleError(f"cannot write {path}: {exc.strerror or exc}") from exc
        reload = run_program(["systemctl", "daemon-reload"], timeout=60)
        if not reload.ok:
            raise ConsoleError(f"wrote the drop-ins; then {reload.failure()}")
    if args.json:
        json_out({"dropins": dropins, "written": bool(args.write)})
        return 0
    if args.write:
        for path in dropins:
            out(f"wrote {path}")
        out("the units take them at their next start (`systemctl restart opsbot-web.socket`)")
        return 0
    for path, text in dropins.items():
        out(f"# {path}")
        out(text.rstrip("\n"))
    return 0
