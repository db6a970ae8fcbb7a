"""read_certificates: the TLS certificates a unit is configured with, and when each ends.

A client's "certificate verify failed: certificate has expired" is a lead (anyone can
write it into a unit's log); this reads the present: every certificate file the unit's
configuration names (its ``Environment=``, command line, ``EnvironmentFile=`` files and
the config files its command names, a proxy's includes too: the files
``_config_files`` reads) by a certificate's suffix (``.crt``, ``.pem``, ``.cert``,
``.cer``), each parsed with pyca/cryptography: its subject, issuer and ``notAfter``, and
whether it has expired. A file named like a private key is never opened; a file the
diagnose user may not read is listed as unreadable, never read another way.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import UTC, datetime

from cryptography import x509
from cryptography.x509.oid import NameOID

from diagnose_svc._model import Model
from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import show
from diagnose_svc.tools.read_config_edges import read_configs

__all__ = ["Certificate", "Certificates", "CertificatesArgs", "cert_paths", "read_certificates"]

#: Certificate files looked at, at most, and bytes read of one.
MAX_FILES = 8
FILE_LIMIT = 256 * 1024
_PATH = re.compile(r"(?<![\w.])(/[\w.@+\-/]+\.(?:crt|pem|cert|cer))\b")
#: A file whose name says it holds a private key: never opened.
_KEY_NAME = re.compile(r"key|priv", re.I)


class CertificatesArgs(UnitToolArgs):
    gives = "certificates"


class Certificate(Model):
    """One certificate file a unit names: its first certificate (the leaf), or why it
    could not be read."""

    path: str
    #: Where the unit names it: a config file, or its environment or command line.
    named_in: str
    readable: bool
    subject: str = ""
    issuer: str = ""
    not_after: datetime | None = None
    expired: bool = False
    error: str = ""

    def words(self) -> str:
        if not self.readable:
            return f"{self.path} ({self.error})"
        if self.not_after is None:
            return f"{self.path}: {self.error or 'no certificate in it'}"
        when = f"{self.not_after:%Y-%m-%d %H:%M} UTC"
        state = f"EXPIRED {when}" if self.expired else f"valid until {when}"
        return f"{self.path} ({self.subject}): {state}"


class Certificates(ToolOutput):
    unit: str
    certificates: list[Certificate]

    @property
    def expired(self) -> list[Certificate]:
        return [c for c in self.certificates if c.expired]

    def summary(self) -> str:
        if not self.certificates:
            return f"{self.unit} names no certificate file"
        return f"{self.unit}: " + "; ".join(c.words() for c in self.certificates)


def cert_paths(text: str) -> list[str]:
    """The certificate files ``text`` names (absolute paths with a certificate's
    suffix), a private key's name left out."""
    out = [m.group(1) for m in _PATH.finditer(text)]
    return [p for p in dict.fromkeys(out) if not _KEY_NAME.search(os.path.basename(p))]


def _name(name: x509.Name) -> str:
    common = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return f"CN={common[0].value!s}" if common else name.rfc4514_string()[:120]


def certificate(path: str, named_in: str, now: datetime) -> Certificate:
    """The leaf certificate of ``path`` (its first), as the diagnose user may read it."""
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return Certificate(
                    path=path, named_in=named_in, readable=False, error="not a regular file"
                )
            data = handle.read(FILE_LIMIT)
    except PermissionError:
        return Certificate(path=path, named_in=named_in, readable=False, error="permission denied")
    except FileNotFoundError:
        return Certificate(path=path, named_in=named_in, readable=False, error="not there")
    except OSError as exc:
        return Certificate(
            path=path, named_in=named_in, readable=False, error=exc.strerror or str(exc)
        )
    try:
        leaf = x509.load_pem_x509_certificates(data)[0]
    except (ValueError, IndexError):
        return Certificate(
            path=path, named_in=named_in, readable=True, error="no PEM certificate in it"
        )
    not_after = leaf.not_valid_after_utc
    return Certificate(
        path=path,
        named_in=named_in,
        readable=True,
        subject=_name(leaf.subject),
        issuer=_name(leaf.issuer),
        not_after=not_after,
        expired=not_after < now,
    )


def _named(unit: str) -> dict[str, str]:
    """Each certificate path ``unit``'s configuration names, and where."""
    found: dict[str, str] = {}
    [props] = show([unit], ("Id", "Environment", "ExecStart"))
    for key in ("Environment", "ExecStart"):
        for path in cert_paths(props.get(key, "")):
            found.setdefault(path, f"its {key}=")
    for config in read_configs([unit]):
        for file in config.files:
            try:
                with open(file, "rb") as handle:
                    text = handle.read(FILE_LIMIT).decode("utf-8", "replace")
            except OSError:
                continue  # read a moment ago: gone since, or replaced by one we may not
            for path in cert_paths(text):
                found.setdefault(path, file)
    return found


@read_tool(CertificatesArgs)
def read_certificates(args: CertificatesArgs, context: ToolContext) -> Certificates:
    """Read the TLS certificates one unit is configured with (certificate files named in
    its environment, command line, EnvironmentFile= and config files, a proxy's
    includes too): for each, its subject, issuer, notAfter, and whether it has expired.
    Use it to check a "certificate has expired" or "certificate verify failed" in the
    output of the unit or of a client of it. Private keys are never read.
    """
    now = datetime.now(UTC)
    named = list(_named(args.unit).items())[:MAX_FILES]
    return Certificates(
        unit=args.unit, certificates=[certificate(p, where, now) for p, where in named]
    )
