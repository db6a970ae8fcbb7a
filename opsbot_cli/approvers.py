"""``opsbot approvers add NAME`` and ``opsbot approvers list``: who may approve from the
approval page, and their second factor.

``add`` (root) makes NAME's TOTP secret (RFC 6238, 160 random bits, pyotp) and writes it
to /etc/opsbot/totp/NAME (the directory root's, 0700; the file root's, 0600; written
atomically), which opsbot-approver.service loads as its credential ``totp_NAME``
(``LoadCredential=totp:/etc/opsbot/totp``); no other unit can read it. It prints the
``otpauth://`` provisioning URI and, on a terminal (or with ``--qr``), its QR code, for
NAME's authenticator app (off a terminal, a line saying that ``--qr`` prints the code
anyway), and says to add ``[approvers.NAME]`` to opsbot.toml if it is not there. An
existing secret is replaced only with ``--replace`` (the old one's codes stop working).
``$OPSBOT_TOTP_DIR`` moves the directory (tests).

``list`` (root) shows the configured approvers, whether each has a secret, and the
channels that carry their links.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from opsbot_cli.errors import ConsoleError, UsageError
from opsbot_cli.output import command, json_out, out, printable, require_root
from shared_io.config import load_config
from shared_io.exit_codes import OK
from shared_io.paths import Paths

SUMMARY = "(root) add an approver of the approval page (a TOTP secret, its QR code); list them"
TOTP_DIR = "/etc/opsbot/totp"
ISSUER = "opsbot"
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "approvers", SUMMARY)
    p.add_argument(
        "verb",
        choices=("add", "list"),
        metavar="add|list",
        help="add NAME: make NAME's TOTP secret, print its otpauth:// URI and QR code; "
        "list: the configured approvers, whether each has a secret, their channels",
    )
    p.add_argument(
        "name", metavar="NAME", nargs="?", help="(add) the approver, as in [approvers.NAME]"
    )
    p.add_argument(
        "--replace", action="store_true", help="(add) replace an existing secret (old codes stop)"
    )
    p.add_argument("--qr", action="store_true", help="(add) print the QR code even off a terminal")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, paths: Paths) -> int:
    require_root(f"approvers {args.verb}")
    if args.verb == "list":
        if args.name is not None or args.replace or args.qr:
            raise UsageError("`opsbot approvers list` takes only --json")
        return run_list(args, paths)
    if args.name is None:
        raise UsageError("`opsbot approvers add` needs the approver's NAME")
    return run_add(args, paths)


def totp_dir() -> Path:
    return Path(os.environ.get("OPSBOT_TOTP_DIR") or TOTP_DIR)


def name_arg(value: str) -> str:
    if not NAME.match(value):
        raise UsageError(
            f"{printable(value[:80])!r} is not an approver name",
            hint="a lower-case letter, then up to 31 of a-z, 0-9, _ and - (as in [approvers.NAME])",
        )
    return value


def _secret_dir(directory: Path) -> Path:
    """``directory``, made root's and 0700 if it is missing; refused if it is anything
    else (another owner or wider mode: someone else may have read the secrets)."""
    try:
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError as exc:
        raise ConsoleError(
            f"cannot make {directory}: {directory.parent} does not exist",
            hint=f"mkdir -p {directory.parent}",
        ) from exc
    st = os.stat(directory, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise ConsoleError(
            f"{directory} must be a directory of root's with mode 0700 (it is "
            f"{stat.filemode(st.st_mode)} of uid {st.st_uid}); no secret was written",
            hint=f"chown root:root {directory} && chmod 700 {directory}, and check who "
            "could read the secrets in it",
        )
    return directory


def provisioning_uri(secret: str, name: str, host: str) -> str:
    import pyotp

    return pyotp.TOTP(secret).provisioning_uri(name=f"{name}@{host}", issuer_name=ISSUER)


def run_add(args: argparse.Namespace, paths: Paths) -> int:
    name = name_arg(args.name)
    config = load_config(paths.config)
    directory = _secret_dir(totp_dir())
    path = directory / name
    existed = path.exists()
    if existed and not args.replace:
        raise UsageError(
            f"approver {name} has a TOTP secret already ({path})",
            hint=f"`opsbot approvers add {name} --replace` makes a new one; the codes of "
            "the old one stop working",
        )
    import pyotp

    from shared_io.files import write_atomic

    secret = pyotp.random_base32()
    try:
        write_atomic(path, secret.encode() + b"\n", exclusive=not args.replace, mode=0o600)
    except FileExistsError as exc:
        raise UsageError(
            f"approver {name} has a TOTP secret already ({path}): it appeared meanwhile",
            hint=f"`opsbot approvers add {name} --replace` makes a new one",
        ) from exc
    os.chmod(path, 0o600)
    uri = provisioning_uri(secret, name, socket.gethostname())
    configured = name in config.approvers
    if args.json:
        json_out(
            {
                "approver": name,
                "path": str(path),
                "uri": uri,
                "replaced": existed,
                "configured": configured,
            }
        )
        return OK
    out(f"{'replaced' if existed else 'wrote'} {path} (root 0600): {name}'s TOTP secret")
    out("enrol it in an authenticator app: scan the code, or enter this URI")
    out(uri)
    if args.qr or sys.stdout.isatty():
        import segno

        sys.stdout.flush()
        segno.make(uri, error="m").terminal(out=sys.stdout, compact=True)
    else:
        out("(no QR code: this is not a terminal; --qr prints it anyway)")
    if not configured:
        out(f"add {name} to {paths.config}, with the channels for their links:")
        out(f"  [approvers.{name}]")
        out('  notify = ["CHANNEL"]')
    out("opsbot-approver reads the secret when it next starts (it exits when idle),")
    out("or at once: systemctl restart opsbot-approver.service")
    return OK


def run_list(args: argparse.Namespace, paths: Paths) -> int:
    config = load_config(paths.config)
    directory = totp_dir()
    rows: list[dict[str, Any]] = []
    for name, settings in sorted(config.approvers.items()):
        has = (directory / name).is_file()
        rows.append({"approver": name, "secret": has, "notify": list(settings.notify)})
    strays: list[str] = []
    if directory.is_dir():
        strays = sorted(
            p.name for p in directory.iterdir() if p.is_file() and p.name not in config.approvers
        )
    if args.json:
        json_out({"approvers": rows, "secrets_without_approver": strays})
        return OK
    if not rows:
        out(f"no approvers in {paths.config}: `sudo opsbot approvers add NAME`, then")
        out("add [approvers.NAME] with notify = [CHANNEL, ...]")
    else:
        width = max(len(r["approver"]) for r in rows)
        out(f"{'APPROVER':<{max(width, 8)}}  SECRET   CHANNELS")
        for r in rows:
            said = "yes" if r["secret"] else "NO"
            channels = ", ".join(r["notify"]) or "none"
            out(f"{r['approver']:<{max(width, 8)}}  {said:<7}  {channels}")
    for stray in strays:
        out(f"{directory / stray}: a secret with no [approvers.{stray}] (never used)")
    return OK
