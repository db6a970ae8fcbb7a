"""``opsbot polkit-rule [--write]``: the polkit rule generated from the policy, which lets
the executor's user act on exactly the allowed units with exactly the allowed verbs (and,
with apply windows, only inside them: the next 14 days' windows are in the rule, and
opsbot-polkit-rule.timer writes it again daily), and answers NO to opsbot's users for
every other action. ``--write`` replaces the rule file atomically, owned by root:root
with mode 0644; first, it removes the grants of ``opsbot approve --now`` whose approval no
longer holds (used and archived, rejected, removed, expired, or renewed without ``--now``:
plans.grants), so that the sweep opsbot-archive starts takes effect at once, not after
``--until-quiet``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import structlog

from opsbot_cli.errors import ConsoleError
from opsbot_cli.output import command, json_out, out, require_root
from plans import RULE_PATH, privilege_mode, render_rule, utcnow, write_rule
from plans.grants import sweep
from plans.polkit import RULE_DAYS, Interval, rule_matches
from plans.windows import intervals
from shared_io.config import load_config, load_with_digest
from shared_io.errors import ConfigError
from shared_io.paths import Paths
from shared_schema import ExecutorPolicy

log = structlog.get_logger("opsbot.polkit")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "polkit-rule", "print (or --write) the polkit rule generated from the policy")
    p.add_argument("--write", action="store_true", help=f"write it to {RULE_PATH}")
    p.add_argument(
        "--until-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --write: watch the config after writing and write again at each change, "
        "until it stays unchanged this long (opsbot-polkit-rule.path's unit gives 5)",
    )
    p.add_argument("--json", action="store_true", help="the rule and where it goes, as JSON")
    p.set_defaults(func=run)


def rule_for(policy: ExecutorPolicy) -> tuple[str, list[Interval] | None]:
    """The rule ``policy`` makes now, and the window intervals it carries (None: none)."""
    windows = None
    if policy.apply_window:
        windows = intervals(policy.apply_window, utcnow(), RULE_DAYS)
    return render_rule(policy, windows=windows), windows


def ensure_rule(policy: ExecutorPolicy) -> bool:
    """Root, before an approval: where polkit holds the executor, write the rule again if
    it is not the one ``policy`` makes (the config was edited since, and the path unit has
    not caught up yet), so that the apply is held to today's allowlist and windows.
    Whether it was written."""
    if privilege_mode() != "polkit":
        return False
    try:
        current = RULE_PATH.read_text()
    except OSError:
        return False
    if rule_matches(current, policy):
        return False
    write_rule(rule_for(policy)[0], RULE_PATH)
    log.info("polkit.rule_written", reason="the rule did not match the config")
    return True


#: Rewrites in one run before giving up on a config that never settles.
MAX_ROUNDS = 20
#: Seconds between two looks at the config while waiting for it to stay quiet.
POLL = 0.2


def write_following(
    paths: Paths,
    quiet: float = 0.0,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, list[Interval] | None, str]:
    """Write the rule the config makes, and again whenever the config changes, until it
    has stayed the same for ``quiet`` seconds after the last write (0: only while this
    run reads it). The rule, its windows, and the digest of the config it matches.

    opsbot-polkit-rule.path starts this at each save; a save that lands while this runs
    starts nothing (systemd merges the start into the running one), so the run watches
    the file itself, for a few seconds after each write (the unit gives ``--until-quiet
    5``): an operator's second save right after the first is not lost. A save that
    does not load (caught half written, or a typo) is waited out like any change; if the
    file still does not load once quiet, its ConfigError ends the run, the rule left as
    the last good config made it.
    """
    policy, digest = _policy(paths)
    for _ in range(MAX_ROUNDS):
        rule, windows = rule_for(policy)
        write_rule(rule, RULE_PATH)
        until, seen = clock() + quiet, digest
        while True:
            try:
                policy, now = _policy(paths)
                broken = None
            except ConfigError as exc:  # half saved, or a typo: the next save may mend it
                broken, now = exc, f"broken: {exc.message}"
            if broken is None and now != digest:
                break
            if now != seen:  # any change starts the quiet again
                seen, until = now, clock() + quiet
            if clock() >= until:
                if broken is not None:
                    raise broken  # the rule stays the last good config's; the unit fails
                return rule, windows, digest
            sleep(POLL)
        log.info("polkit.config_changed", reason="the config was saved again; writing again")
        digest = now
    raise ConsoleError(
        f"{paths.config} changed {MAX_ROUNDS} times while the rule was written",
        hint="save the config once more, or run `opsbot polkit-rule --write` when it is quiet",
    )


def _policy(paths: Paths) -> tuple[ExecutorPolicy, str]:
    config, digest = load_with_digest(paths.config)
    return config.executor, digest


def _sweep(paths: Paths) -> list[str]:
    """Remove the grants whose approval no longer holds (plans.grants.sweep); their ids."""
    try:
        ended = sweep(paths.approvals_dir, utcnow())
    except OSError as exc:
        log.warning("grant.sweep_failed", error=exc.strerror or str(exc))
        return []
    for plan_id in ended:
        log.info("grant.removed", plan_id=plan_id, reason="its approval no longer holds")
    return ended


def run(args: argparse.Namespace, paths: Paths) -> int:
    if not args.write:
        rule, windows = rule_for(load_config(paths.config).executor)
        if args.json:
            json_out(
                {"path": str(RULE_PATH), "rule": rule, "windows": _spans(windows), "written": False}
            )
        else:
            sys.stdout.write(rule)
        return 0
    require_root("polkit-rule --write")
    # The grants first (a rejected plan's goes at once), and again once the rule is
    # written: an approval archived while this run waited for a quiet config started this
    # unit again, and that start merged into this run. Never at the rule's cost.
    ended = _sweep(paths)
    try:
        rule, windows, digest = write_following(paths, max(0.0, min(args.until_quiet, 60.0)))
    except OSError as exc:
        raise ConsoleError(
            f"cannot write {RULE_PATH}: {exc.strerror or exc}",
            hint=f"is {RULE_PATH.parent} a directory on a writable file system?",
        ) from exc
    ended += _sweep(paths)
    spans = _spans(windows)
    if args.json:
        json_out(
            {
                "path": str(RULE_PATH),
                "rule": rule,
                "windows": spans,
                "written": True,
                "matches_config": digest,
                "grants_removed": ended,
            }
        )
    else:
        out(f"wrote {RULE_PATH} (root:root 0644); polkit reloads its rules by itself")
        out(f"  it matches {paths.config} as saved now (sha256 {digest[:12]})")
        if windows is not None:
            last = f"the last ends {windows[-1][1]:%Y-%m-%d %H:%M} UTC" if windows else "none"
            out(
                f"  {len(windows)} apply windows in the next {RULE_DAYS} days ({last}); "
                "opsbot-polkit-rule.timer writes them again daily"
            )
    return 0


def _spans(windows: list[Interval] | None) -> list[list[str]] | None:
    return None if windows is None else [[a.isoformat(), b.isoformat()] for a, b in windows]
