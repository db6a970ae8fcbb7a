"""The approvers' second factor: RFC 6238 TOTP codes (30 s steps, 6 digits, pyotp), a
step either side of now accepted for clock drift, each code usable once.

An approver's secret is root's: ``opsbot approvers add NAME`` writes it to
/etc/opsbot/totp/NAME, and opsbot-approver.service has ``LoadCredential=totp:/etc/opsbot/totp``,
so systemd hands the daemon each file of that directory as the credential
``totp_<NAME>`` in $CREDENTIALS_DIRECTORY (and no other unit ever sees it).

Once a code is accepted its timestep is remembered (persisted): a code of that step or an
earlier one is refused, so a code read over a shoulder or from a proxy's log is spent.
Wrong codes are counted where they come from as well as whose they are:

- five with one link (token) and the link is burned (its plan can still be decided
  from the approver's other links, or as root);
- ten from one source address within fifteen minutes and that address is refused for
  every approver until they age;
- ten of one approver within fifteen minutes (thirty in a day) and that approver is
  locked, but only for the links that saw a wrong code and the addresses that gave
  one: one who saw a single message, or a few, cannot lock the approver out of every
  plan, and a guesser gets one try with each link it has never used while she is
  locked.

A right code with another link's confirmation counts against the link and the source
(the code was the human's; the pairing was not), never against the approver.
"""

from __future__ import annotations

import binascii
import hmac
import os
import re
import stat
from datetime import datetime, timedelta
from pathlib import Path

import pyotp
import structlog

from approver_svc.errors import Refusal
from approver_svc.state import ApproverState, TokenRecord
from approver_svc.tokens import burn, confirmed

log = structlog.get_logger("opsbot.approver")

CREDENTIAL_PREFIX = "totp_"
STEP_SECONDS = 30
DIGITS = 6
#: Steps either side of now that are accepted (clock drift, a code typed as it changes).
VALID_WINDOW = 1
MAX_FAILURES_PER_TOKEN = 5
MAX_FAILURES_PER_APPROVER = 10
MAX_FAILURES_PER_SOURCE = 10
LOCKOUT_SECONDS = 15 * 60
#: And at most this many within a day: ten every 15 minutes, for ever, would give one who
#: holds live links (a subverted page) a lucky guess about once a year; this, once in 90.
MAX_FAILURES_PER_DAY = 30
DAY_SECONDS = 86400
#: How long failures are remembered (the longest window that counts them).
MEMORY_SECONDS = DAY_SECONDS
MAX_SECRET_BYTES = 1024
#: shared_schema.approver_socket.ApproverName, the only names a token or config holds.
NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def credentials_dir() -> Path | None:
    """Where systemd put this service's credentials ($CREDENTIALS_DIRECTORY), if it did."""
    where = os.environ.get("CREDENTIALS_DIRECTORY")
    return Path(where) if where else None


def read_secret(directory: Path | None, approver: str) -> pyotp.TOTP:
    """``approver``'s TOTP, from the credential ``totp_<approver>``; Refusal("internal")
    naming what root must do when there is none."""
    add = (
        f"root runs `opsbot approvers add {approver}`; opsbot-approver loads it when it next "
        "starts (it exits when idle, or `systemctl restart opsbot-approver.service`)"
    )
    if directory is None:
        raise Refusal(
            "internal",
            "no credentials: opsbot-approver runs without $CREDENTIALS_DIRECTORY",
            hint="opsbot-approver.service has LoadCredential=totp:/etc/opsbot/totp",
        )
    if not NAME.fullmatch(approver):  # the config and the state allow no other (no "/")
        raise Refusal("internal", f"{approver[:40]!r} is not an approver name")
    path = directory / f"{CREDENTIAL_PREFIX}{approver}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise Refusal("internal", f"approver {approver} has no TOTP secret", hint=add) from exc
    except OSError as exc:  # ELOOP: a symlink; systemd's own copies never are one
        raise Refusal(
            "internal", f"{path} cannot be opened as the credential: {exc.strerror}", hint=add
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            # systemd writes each credential 0400 for the service's user (root): anything
            # else was not put there by systemd, or others could have read or written it.
            raise Refusal(
                "internal",
                f"{path} is not a credential only uid {os.geteuid()} can read (it is "
                f"{stat.filemode(st.st_mode)} of uid {st.st_uid}); no code was checked",
                hint=add,
            )
        raw = handle.read(MAX_SECRET_BYTES + 1)
    if len(raw) > MAX_SECRET_BYTES:  # never a part of it taken for the secret
        raise Refusal(
            "internal",
            f"approver {approver}'s TOTP secret is longer than {MAX_SECRET_BYTES} bytes",
            hint=add,
        )
    secret = raw.decode("ascii", "replace").strip().upper()
    try:  # pyotp checks the secret (base32, long enough) as it builds the TOTP
        totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
        totp.at(0)
    except (binascii.Error, ValueError) as exc:
        raise Refusal(
            "internal", f"approver {approver}'s TOTP secret is not base32", hint=add
        ) from exc
    return totp


def locked(state: ApproverState, approver: str, now: datetime) -> bool:
    """Whether ``approver`` gave MAX_FAILURES_PER_APPROVER wrong codes in LOCKOUT_SECONDS,
    or MAX_FAILURES_PER_DAY in a day."""
    failures = state.memory(approver).failures
    recent = now - timedelta(seconds=LOCKOUT_SECONDS)
    day = now - timedelta(seconds=DAY_SECONDS)
    return (
        sum(at > recent for at in failures) >= MAX_FAILURES_PER_APPROVER
        or sum(at > day for at in failures) >= MAX_FAILURES_PER_DAY
    )


def source_locked(state: ApproverState, source: str, now: datetime) -> bool:
    """Whether ``source`` gave MAX_FAILURES_PER_SOURCE wrong codes in LOCKOUT_SECONDS."""
    recent = now - timedelta(seconds=LOCKOUT_SECONDS)
    return sum(at > recent for at in state.sources.get(source, [])) >= MAX_FAILURES_PER_SOURCE


def tainted(state: ApproverState, token: TokenRecord, source: str, now: datetime) -> bool:
    """Whether this link saw a wrong code, or this source gave one within a day: what a
    locked approver is locked against."""
    day = now - timedelta(seconds=DAY_SECONDS)
    return token.failed_attempts > 0 or any(at > day for at in state.sources.get(source, []))


def source_refusal() -> Refusal:
    return Refusal(
        "limit",
        f"too many wrong codes from this address: it is refused for "
        f"{LOCKOUT_SECONDS // 60} minutes",
        hint="wait, or approve as root on the host with `opsbot approve ID`",
    )


def lockout_refusal(approver: str) -> Refusal:
    return Refusal(
        "limit",
        f"too many wrong codes for {approver}: approvals from the page are locked for "
        f"{LOCKOUT_SECONDS // 60} minutes (a day, after {MAX_FAILURES_PER_DAY} in a day)",
        hint="wait, or approve as root on the host with `opsbot approve ID`",
    )


def matching_step(totp: pyotp.TOTP, code: str, now: datetime) -> int | None:
    """The timestep (within VALID_WINDOW of now) whose code is ``code``, or None."""
    current = totp.timecode(now)
    found = None
    for step in range(current - VALID_WINDOW, current + VALID_WINDOW + 1):
        # Every step is compared, in constant time each: no early exit to time.
        if hmac.compare_digest(totp.generate_otp(step), code) and found is None:
            found = step
    return found


def _failed(state: ApproverState, key: str, token: TokenRecord, now: datetime, source: str) -> None:
    """Count a failure against the link and the source; burn the link at its limit."""
    state.failed_from(source, now)
    token.failed_attempts += 1
    if token.failed_attempts >= MAX_FAILURES_PER_TOKEN:
        burn(state, key, now, f"{MAX_FAILURES_PER_TOKEN} wrong codes")
        raise Refusal(
            "limit",
            f"{MAX_FAILURES_PER_TOKEN} wrong codes with this link: it no longer works",
            hint="ask for a fresh link, or approve as root with `opsbot approve ID`",
        )
    if source_locked(state, source, now):
        raise source_refusal()


def check_code(
    state: ApproverState,
    key: str,
    token: TokenRecord,
    totp: pyotp.TOTP,
    code: str,
    now: datetime,
    source: str = "",
) -> None:
    """Accept ``code`` for the approver of ``token`` (remembering its step), or count a
    failure against the token, the source and the approver and raise
    Refusal("code" or "limit")."""
    approver = token.approver
    memory = state.memory(approver)
    step = matching_step(totp, code, now)
    if step is not None and step > memory.last_timestep:
        memory.last_timestep = step
        return
    reused = step is not None
    memory.failures.append(now)
    _failed(state, key, token, now, source)
    if locked(state, approver, now):
        raise lockout_refusal(approver)
    left = MAX_FAILURES_PER_TOKEN - token.failed_attempts
    if reused:
        raise Refusal(
            "code",
            f"that code was used already; wait for the next one ({left} tries left)",
        )
    raise Refusal(
        "code",
        f"wrong code for {approver} ({left} tries left with this link)",
        hint="the code of the authenticator app enrolled by `opsbot approvers add`",
    )


def check_confirm(
    state: ApproverState,
    key: str,
    token: TokenRecord,
    confirm: str,
    now: datetime,
    source: str = "",
) -> None:
    """After the right code: ``confirm`` must be this link's confirmation, or the code
    was typed for another decision (a relay pairing it with this token). The failure
    counts against the link and the source; the code stays spent."""
    if confirmed(key, token, confirm):
        return
    log.warning(
        "decide.unconfirmed",
        plan_id=token.plan_id,
        approver=token.approver,
        decision=token.decision,
        source=source,
        reason="a right code came with a confirmation that is not this link's",
    )
    _failed(state, key, token, now, source)
    left = MAX_FAILURES_PER_TOKEN - token.failed_attempts
    raise Refusal(
        "confirm",
        f"that confirmation is not the one beside this link in your message; the code is "
        f"spent ({left} tries left with this link)",
        hint="type the next code with the four characters shown beside this link",
    )
