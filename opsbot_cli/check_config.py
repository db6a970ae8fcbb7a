"""``opsbot check-config``: validate the config and report how the executor gets the right
to act on units (the privilege mode). Each apply window's start is checked by
``systemd-analyze calendar``, as the apply evaluates it, and the next window is said."""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opsbot_cli.output import command, json_out, out
from opsbot_cli.running_config import Running, running_configs
from plans import (
    RULE_PATH,
    CalendarError,
    allowed_verbs,
    at_text,
    check_calendar,
    privilege_mode,
    span_text,
    window_state,
)
from plans.polkit import rule_horizon, rule_matches
from shared_io.code_stamp import DaemonCode, Stamp, daemons_code, read_stamp
from shared_io.config import load_with_digest
from shared_io.errors import ConfigError, StoreError
from shared_io.paths import Paths
from shared_io.trusted import untrusted_reason
from shared_schema import OpsbotConfig

WRITE_RULE = "`opsbot polkit-rule --write`"
#: The rule is written again daily; less than this ahead means the timer is not running.
RULE_AHEAD = timedelta(days=7)


JOURNAL_DIR = Path("/var/log/journal")


def journal_sealing(journal_dir: Path = JOURNAL_DIR) -> str:
    """Whether journald seals this host's journal (Forward Secure Sealing): "sealed" when
    `journalctl --setup-keys` made the sealing key of this machine's persistent journal,
    "not set up" when the journal is persistent without one, "volatile journal" when
    it is kept in /run only (nothing survives a reboot, nothing can be sealed)."""
    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        return "unknown"
    here = journal_dir / machine
    if not here.is_dir():
        return "volatile journal"
    return "sealed" if (here / "fss").exists() else "not set up"


def stale_windows(horizon: datetime | None) -> bool:
    return horizon is None or horizon < datetime.now(UTC) + RULE_AHEAD


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "check-config", "validate the config and report the privilege mode")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


#: Credential files docs/operating.md suggests next to the config (LoadCredential= sources).
CREDENTIAL_FILES = ("llm_api_key", "llm_api_url", "llm_model")


def check_credential_files(directory: Path) -> list[str]:
    """Refuse a credential source others may change; warnings for one others may read."""
    warnings = []
    for name in CREDENTIAL_FILES:
        path = directory / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        reason = untrusted_reason(path, st, secret=True)
        if reason:
            raise ConfigError(f"credential {reason}")
        if name == "llm_api_key" and st.st_mode & 0o004:
            warnings.append(f"{path} is readable by every local user; chmod 0600 {path}")
    return warnings


def check_windows(
    config: OpsbotConfig, where: Path, now: datetime
) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Each ``[executor.apply_window]`` checked by systemd-analyze (ConfigError for one it
    refuses or that never elapses); the windows, when the next one is in words, and
    warnings (a plan that expires before the next window opens)."""
    policy = config.executor
    windows: list[dict[str, Any]] = []
    for index, window in enumerate(policy.apply_window, 1):
        try:
            first = check_calendar(window.start)
        except CalendarError as exc:
            raise ConfigError(f"{where}, window {index}: {exc.message}", hint=exc.hint) from exc
        if first is None:
            raise ConfigError(
                f"{where}, window {index}: apply window start {window.start!r} never elapses again",
                hint="give a calendar expression that repeats (systemd.time(7)), e.g. "
                '"Mon..Fri 02:00"',
            )
        windows.append({"start": window.start, "duration": window.duration})
    if not windows:
        return windows, "", []
    state = window_state(policy.apply_window, now)
    warnings = []
    if state.open and state.closes_at:
        said = f"open now, until {at_text(state.closes_at)}"
    elif state.opens_at and state.closes_at:
        said = f"next {span_text(state.opens_at, state.closes_at)}"
        if state.opens_at - now > timedelta(seconds=policy.plan_ttl_seconds):
            warnings.append(
                f"plan_ttl_seconds={policy.plan_ttl_seconds} is shorter than the wait for the "
                "next apply window: a plan proposed now expires before it could run"
            )
    else:
        said = "none opens within 7 days"
        warnings.append("no apply window opens within 7 days: approved plans need --now")
    return windows, said, warnings


#: Channels that cannot send without their credential /etc/opsbot/notify/NAME: the
#: webhook's HMAC key, the Slack or Teams URL, the Apprise URL (ntfy's token is optional,
#: and email needs one only with a ``user``).
NEEDS_SECRET = ("webhook", "slack", "teams", "apprise")
NOTIFY_SECRETS = Path("/etc/opsbot/notify")


def check_approval_path(
    config: OpsbotConfig, source: Path, *, totp: Path, secrets: Path, as_root: bool
) -> list[str]:
    """What would keep an approver from being told, or from approving on the page: no
    link_base, an approver without a TOTP secret, a channel without its secret (only root
    can look: both directories are root's), IP filters older than the config."""
    from opsbot_cli import firewall

    warnings = []
    if config.approvers and config.notify.link_base is None:
        warnings.append(
            "[approvers] are set but [notify] link_base is not: messages carry no links"
        )
    if as_root:
        for name in sorted(config.approvers):
            if not (totp / name).is_file():
                warnings.append(
                    f"approver {name} has no TOTP secret ({totp / name}): "
                    f"`opsbot approvers add {name}`"
                )
        used = {c for a in config.approvers.values() for c in a.notify}
        for name in sorted(used):
            channel = config.notify.channels[name]
            needs = channel.kind in NEEDS_SECRET or getattr(channel, "user", None) is not None
            if needs and not (secrets / name).is_file():
                warnings.append(
                    f"channel {name} ({channel.kind}) has no secret {secrets / name}: it "
                    "sends nothing"
                )
    in_use = bool(config.approvers or config.notify.channels)
    if in_use and not firewall.current(firewall.render(config, source)):
        warnings.append(
            "the IP filters of opsbot-web and opsbot-notify are not the config's: "
            "run `opsbot firewall --write`"
        )
    return warnings


def run(args: argparse.Namespace, paths: Paths) -> int:
    config, digest = load_with_digest(paths.config)
    warnings = check_credential_files(paths.config.parent)
    windows, next_window, window_warnings = check_windows(config, paths.config, datetime.now(UTC))
    warnings += window_warnings
    from opsbot_cli.approvers import totp_dir

    warnings += check_approval_path(
        config, paths.config, totp=totp_dir(), secrets=NOTIFY_SECRETS, as_root=os.geteuid() == 0
    )
    mode = privilege_mode()
    rule_text = RULE_PATH.read_text() if RULE_PATH.exists() else None
    rule_current = rule_text is not None and rule_matches(rule_text, config.executor)
    horizon = rule_horizon(rule_text) if rule_text is not None and windows else None
    allow = allowed_verbs(config.executor)
    running = running_configs(paths, digest)
    stamp, code, code_warnings = installed_code()
    warnings += code_warnings
    info: dict[str, Any] = {
        "config": str(paths.config),
        "config_exists": paths.config.exists(),
        "allow": allow,
        "privilege_mode": mode,
        "polkit_rule_current": rule_current,
        "polkit_rule_windows_until": horizon.isoformat() if horizon else None,
        "step_timeout_seconds": config.executor.step_timeout_seconds,
        "plan_ttl_seconds": config.executor.plan_ttl_seconds,
        "approval_ttl_seconds": config.executor.approval_ttl_seconds,
        "apply_window": windows,
        "next_apply_window": next_window or None,
        "watch": config.diagnose.watch,
        "health_targets": sorted(config.diagnose.health),
        "model": config.diagnose.model.kind,
        "audit_sealing": journal_sealing(),
        "config_sha256": digest,
        "running": [daemon.as_json() for daemon in running],
        "code": _code_json(stamp, code),
        "warnings": warnings,
    }
    if args.json:
        json_out(info)
    else:
        out(f"{paths.config}: valid" + ("" if info["config_exists"] else " (absent: defaults)"))
        for verb, units in allow.items():
            out(f"  may {verb}: {', '.join(units)}")
        if not allow:
            out("  may do nothing: [executor.allow] is empty")
        for window in windows:
            out(f"  applies in window: {window['start']} for {window['duration']}")
        if next_window:
            out(f"  apply window: {next_window}")
        for warning in warnings:
            out(f"  warning: {warning}")
        _say_running(running)
        _say_code(stamp, code)
        out(f"privilege mode: {mode}")
        sealing = info["audit_sealing"]
        out(f"audit trail: chained (`opsbot audit --verify`); journal sealing: {sealing}")
        if sealing != "sealed":
            out("  note: against root on this host the trail proves nothing unless the journal")
            out("  is sealed (journalctl --setup-keys, the verification key kept off the host)")
            out("  or shipped to a collector (opsbot audit --verify --against DIR)")
        if mode == "polkit" and not rule_current:
            out(f"  warning: {RULE_PATH} does not match the policy; run {WRITE_RULE}")
        elif mode == "polkit" and windows and stale_windows(horizon):
            if horizon is not None:
                out(f"  warning: the rule carries apply windows only until {at_text(horizon)};")
            else:
                out("  warning: the rule carries no apply window of the next 14 days;")
            out("  after that the executor may act on nothing: is opsbot-polkit-rule.timer")
            out(f"  enabled? run {WRITE_RULE}")
        if mode == "polkit-rule-missing":
            out(f"  warning: polkit is installed but no opsbot rule: run {WRITE_RULE}")
        if mode == "none":
            out("  warning: no polkit and no root drop-in: the executor cannot act on units")
    return 0 if mode in ("polkit", "root-without-capabilities") or not config.executor.allow else 1


def _say_running(running: list[Running]) -> None:
    """A line per daemon that runs: whether it has this file in force, and what to run."""
    up = [daemon for daemon in running if daemon.status != "not running"]
    if not up:
        return
    if len({(daemon.status, daemon.detail) for daemon in up}) == 1 and up[0].status == "unknown":
        out(f"running daemons: unknown ({up[0].detail})")
        return
    out("running daemons:")
    for daemon in up:
        name = daemon.unit.removesuffix(".service")
        if daemon.status == "current":
            out(f"  {name}: this file")
            continue
        said = f"{name}: {daemon.status}: {daemon.detail}"
        for line in textwrap.wrap(said, 98, subsequent_indent="    "):
            out(f"  {line}")
        if daemon.action:
            for line in textwrap.wrap(f"do: {daemon.action}", 96, subsequent_indent="    "):
                out(f"    {line}")


def installed_code(
    read: Callable[[], Stamp | None] = read_stamp,
) -> tuple[Stamp | None, list[DaemonCode], list[str]]:
    """The code the install recorded (None: not recorded, e.g. a checkout's editable
    install) and each daemon against it; a warning for a stamp that cannot be read."""
    try:
        stamp = read()
    except StoreError as exc:
        return None, [], [f"{exc.message}: {exc.hint}" if exc.hint else exc.message]
    return stamp, daemons_code(stamp) if stamp is not None else [], []


def _code_json(stamp: Stamp | None, code: list[DaemonCode]) -> dict[str, Any] | None:
    if stamp is None:
        return None
    return {
        "version": stamp.version,
        "sha256": stamp.sha256,
        "recorded_at": stamp.recorded_at.isoformat(),
        "daemons": [daemon.as_json() for daemon in code],
    }


def _say_code(stamp: Stamp | None, code: list[DaemonCode]) -> None:
    """The installed code, and each daemon that runs an older one with what to run."""
    if stamp is None:
        return
    recorded = stamp.recorded_at.strftime("%Y-%m-%d %H:%M UTC")
    out(f"installed code: opsbot {stamp.version} (sha256 {stamp.sha256[:12]}), {recorded}")
    for daemon in code:
        if daemon.status not in ("older", "unknown"):
            continue
        name = daemon.unit.removesuffix(".service")
        said = f"{name}: {daemon.detail}" if daemon.detail else f"{name}: {daemon.status}"
        for line in textwrap.wrap(said, 98, subsequent_indent="    "):
            out(f"  {line}")
        if daemon.action:
            out(f"    do: `{daemon.action}`")
